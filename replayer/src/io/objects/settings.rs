//! Endpoint, region and credentials, found where the AWS CLI finds them:
//! the environment first (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_S3`,
//! `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), then the profile
//! (`AWS_PROFILE`, else `default`) of the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and of the
//! config file (`AWS_CONFIG_FILE`, else `~/.aws/config`), for what the
//! environment leaves unset.

use std::collections::HashMap;
use std::path::PathBuf;

use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::ClientConfigKey;

use super::direct::DirectSettings;
use super::sigv4::Credentials;

/// One INI section's keys, lower-cased (`None` when the file or the
/// section is missing).
fn section(text: &str, name: &str) -> Option<HashMap<String, String>> {
    let mut found = None;
    let mut current: Option<HashMap<String, String>> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if let Some(done) = current.take() {
                found = Some(done);
            }
            if head.trim() == name {
                current = Some(HashMap::new());
            }
            continue;
        }
        if let (Some(map), Some((k, v))) = (current.as_mut(), line.split_once('=')) {
            map.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    current.or(found)
}

fn file(var: &str, default: &str) -> Option<String> {
    let path = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aws").join(default))
    })?;
    std::fs::read_to_string(path).ok()
}

/// The S3 client settings for `bucket`, environment over profile.
pub fn builder(bucket: &str) -> AmazonS3Builder {
    let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials")
        .and_then(|t| section(&t, &profile))
        .unwrap_or_default();
    // The config file names profiles `[profile NAME]`, except `[default]`.
    let config_name = if profile == "default" {
        profile.clone()
    } else {
        format!("profile {profile}")
    };
    let config = file("AWS_CONFIG_FILE", "config")
        .and_then(|t| section(&t, &config_name))
        .unwrap_or_default();
    let from_profile = [
        (AmazonS3ConfigKey::AccessKeyId, "aws_access_key_id"),
        (AmazonS3ConfigKey::SecretAccessKey, "aws_secret_access_key"),
        (AmazonS3ConfigKey::Token, "aws_session_token"),
        (AmazonS3ConfigKey::Region, "region"),
        (AmazonS3ConfigKey::Endpoint, "endpoint_url"),
    ];
    for (key, name) in from_profile {
        if b.get_config_value(&key).is_some() {
            continue;
        }
        if let Some(v) = credentials.get(name).or_else(|| config.get(name)) {
            b = b.with_config(key, v);
        }
    }
    if b.get_config_value(&AmazonS3ConfigKey::Region).is_none() {
        if let Ok(r) = std::env::var("AWS_DEFAULT_REGION") {
            b = b.with_region(r);
        }
    }
    // A request that hangs fails (and is retried) rather than stalling a
    // rank for good; set here, as keys, so the environment's other client
    // settings (AWS_ALLOW_HTTP, proxies) stay. object_store has defaults
    // of its own (30 s and 5 s), so only the environment's own setting
    // (AWS_TIMEOUT, AWS_CONNECT_TIMEOUT) is left as it is.
    for (key, var, value) in [
        (ClientConfigKey::Timeout, "AWS_TIMEOUT", "60s"),
        (
            ClientConfigKey::ConnectTimeout,
            "AWS_CONNECT_TIMEOUT",
            "10s",
        ),
    ] {
        if std::env::var_os(var).is_none() {
            b = b.with_config(AmazonS3ConfigKey::Client(key), value);
        }
    }
    // An endpoint named with http:// (a test server, a cluster-internal
    // gateway) is what the user asked for; object_store refuses plain HTTP
    // unless told.
    let endpoint = b.get_config_value(&AmazonS3ConfigKey::Endpoint);
    if endpoint.is_some_and(|e| e.starts_with("http://")) {
        b = b.with_allow_http(true);
    }
    b
}

/// The settings of the direct request path (`direct`), where it serves:
/// an `http://` endpoint, path-style requests, static keys, and nothing
/// object_store would add to a request that `direct` does not (a proxy,
/// customer-provided encryption keys, requester pays, unsigned requests,
/// S3 Express sessions). Elsewhere, `None`: every request goes through
/// object_store.
pub fn direct(b: &AmazonS3Builder) -> Option<DirectSettings> {
    let get = |k: AmazonS3ConfigKey| b.get_config_value(&k);
    let on = |k: AmazonS3ConfigKey| get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let endpoint = get(AmazonS3ConfigKey::Endpoint)?;
    if !endpoint.starts_with("http://")
        || on(AmazonS3ConfigKey::VirtualHostedStyleRequest)
        || on(AmazonS3ConfigKey::SkipSignature)
        || on(AmazonS3ConfigKey::RequestPayer)
        || on(AmazonS3ConfigKey::S3Express)
        || "aws_sse_customer_key_base64"
            .parse()
            .is_ok_and(|k| get(k).is_some())
        || get(AmazonS3ConfigKey::Client(ClientConfigKey::ProxyUrl)).is_some()
        || ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
    {
        return None;
    }
    let credentials = Credentials {
        access_key: get(AmazonS3ConfigKey::AccessKeyId)?,
        secret_key: get(AmazonS3ConfigKey::SecretAccessKey)?,
        token: get(AmazonS3ConfigKey::Token),
        region: get(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into()),
    };
    let duration = |k: ClientConfigKey, default: u64| {
        get(AmazonS3ConfigKey::Client(k))
            .and_then(|v| parse_duration(&v))
            .unwrap_or(Duration::from_secs(default))
    };
    Some(DirectSettings {
        endpoint: endpoint.trim_end_matches('/').to_string(),
        credentials,
        connect_timeout: duration(ClientConfigKey::ConnectTimeout, 10),
        timeout: duration(ClientConfigKey::Timeout, 60),
    })
}

/// `60s`, `1500ms`, `2m` or a number of seconds, as the timeouts are set.
fn parse_duration(v: &str) -> Option<Duration> {
    let v = v.trim();
    let split = v
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(v.len());
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => n,
        "ms" => n / 1e3,
        "m" | "min" | "mins" => n * 60.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

/// Whether keys were found (else the client asks the instance metadata
/// service, as on a cloud machine with a role).
pub fn has_keys(b: &AmazonS3Builder) -> bool {
    b.get_config_value(&AmazonS3ConfigKey::AccessKeyId)
        .is_some()
}

/// The endpoint the requests go to, for messages.
pub fn endpoint(b: &AmazonS3Builder) -> String {
    b.get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_else(|| "AWS S3".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_sections_are_read_by_name() {
        let text = "[default]\naws_access_key_id = A\n\n[other]\n# note\nAWS_Secret_Access_Key=B\nregion = eu-west-1\n";
        assert_eq!(section(text, "default").unwrap()["aws_access_key_id"], "A");
        let other = section(text, "other").unwrap();
        assert_eq!(other["aws_secret_access_key"], "B");
        assert_eq!(other["region"], "eu-west-1");
        assert!(section(text, "missing").is_none());
    }

    /// Builders as the environment would give them, without reading it.
    fn with(pairs: &[(AmazonS3ConfigKey, &str)]) -> AmazonS3Builder {
        pairs
            .iter()
            .fold(AmazonS3Builder::new().with_bucket_name("b"), |b, (k, v)| {
                b.with_config(*k, *v)
            })
    }

    #[test]
    fn the_direct_path_serves_plain_http_with_keys_and_nothing_it_cannot_send() {
        use AmazonS3ConfigKey as K;
        let keys = [
            (K::AccessKeyId, "a"),
            (K::SecretAccessKey, "s"),
            (K::Endpoint, "http://gw:7480/"),
        ];
        let d = direct(&with(&keys)).expect("plain HTTP with keys");
        assert_eq!(d.endpoint, "http://gw:7480");
        assert_eq!(d.credentials.region, "us-east-1");
        let mut more = keys.to_vec();
        more.extend([
            (K::Region, "eu-west-1"),
            (K::Token, "t"),
            (K::Client(ClientConfigKey::Timeout), "7s"),
        ]);
        let d = direct(&with(&more)).unwrap();
        assert_eq!(
            d.timeout,
            Duration::from_secs(7),
            "the timeout object_store has"
        );
        assert_eq!(
            (
                d.credentials.region.as_str(),
                d.credentials.token.as_deref()
            ),
            ("eu-west-1", Some("t"))
        );
        // TLS, no keys, or something only object_store sends: not direct.
        let tls = [keys[0], keys[1], (K::Endpoint, "https://gw")];
        assert!(direct(&with(&tls)).is_none());
        assert!(direct(&with(&keys[2..])).is_none());
        for extra in [
            (K::VirtualHostedStyleRequest, "true"),
            (K::SkipSignature, "true"),
            (K::RequestPayer, "true"),
            (K::Client(ClientConfigKey::ProxyUrl), "http://proxy:3128"),
            ("aws_sse_customer_key_base64".parse().unwrap(), "a2V5"),
        ] {
            let mut set = keys.to_vec();
            set.push(extra);
            assert!(direct(&with(&set)).is_none(), "{extra:?}");
        }
    }

    #[test]
    fn timeouts_are_read_as_they_are_set() {
        assert_eq!(parse_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("soon"), None);
    }
}
