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

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::ClientConfigKey;

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
    // settings (AWS_ALLOW_HTTP, proxies) stay.
    for (key, value) in [
        (ClientConfigKey::Timeout, "60s"),
        (ClientConfigKey::ConnectTimeout, "10s"),
    ] {
        if b.get_config_value(&AmazonS3ConfigKey::Client(key))
            .is_none()
        {
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
}
