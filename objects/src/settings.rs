//! Endpoint, region and credentials, found where the AWS CLI finds them:
//! the environment first (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`,
//! `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), then the profile
//! (`AWS_PROFILE`, else `default`) of the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and of the
//! config file (`AWS_CONFIG_FILE`, else `~/.aws/config`), for what the
//! environment leaves unset; and where no keys are found, the instance's
//! role (`imds`). Timeouts: `AWS_CONNECT_TIMEOUT` (10 s) and
//! `AWS_TIMEOUT` (60 s).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::sign::Credentials;

/// The region requests are signed for when none is set, as the AWS CLI's.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Where and as whom a client's requests go.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `http[s]://host[:port][/base]`, without a trailing `/`; AWS S3's
    /// regional endpoint when none is set.
    pub endpoint: String,
    /// Whether an endpoint was set (else the requests go to AWS S3).
    pub endpoint_set: bool,
    pub region: String,
    /// `None` where neither the environment nor the profile holds keys.
    pub keys: Option<(String, String, Option<String>)>,
    /// Requests name the bucket in the host (`BUCKET.s3...`) rather than
    /// in the path: AWS S3's own endpoint, or
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true`.
    pub virtual_hosted: bool,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

impl Settings {
    /// The settings the environment and the profile give.
    pub fn from_env() -> Settings {
        let env = |v: &str| std::env::var(v).ok().filter(|v| !v.is_empty());
        let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".into());
        let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials")
            .and_then(|t| section(&t, &profile))
            .unwrap_or_default();
        // The config file names profiles `[profile NAME]`, except `[default]`.
        let config_name = match profile.as_str() {
            "default" => profile.clone(),
            _ => format!("profile {profile}"),
        };
        let config = file("AWS_CONFIG_FILE", "config")
            .and_then(|t| section(&t, &config_name))
            .unwrap_or_default();
        let profiled = |name: &str| credentials.get(name).or_else(|| config.get(name)).cloned();
        let endpoint = env("AWS_ENDPOINT_URL_S3")
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .or_else(|| env("AWS_ENDPOINT"))
            .or_else(|| profiled("endpoint_url"));
        let region = env("AWS_REGION")
            .or_else(|| profiled("region"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| DEFAULT_REGION.into());
        let access = env("AWS_ACCESS_KEY_ID").or_else(|| profiled("aws_access_key_id"));
        let secret = env("AWS_SECRET_ACCESS_KEY").or_else(|| profiled("aws_secret_access_key"));
        let token = env("AWS_SESSION_TOKEN").or_else(|| profiled("aws_session_token"));
        let duration = |var: &str, default: u64| {
            env(var)
                .and_then(|v| parse_duration(&v))
                .unwrap_or(Duration::from_secs(default))
        };
        let on = |var: &str| env(var).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Settings {
            endpoint: endpoint
                .clone()
                .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"))
                .trim_end_matches('/')
                .to_string(),
            endpoint_set: endpoint.is_some(),
            virtual_hosted: endpoint.is_none() || on("AWS_VIRTUAL_HOSTED_STYLE_REQUEST"),
            region,
            keys: access.zip(secret).map(|(a, s)| (a, s, token)),
            connect_timeout: duration("AWS_CONNECT_TIMEOUT", 10),
            timeout: duration("AWS_TIMEOUT", 60),
        }
    }

    /// The endpoint, for messages: its URL, or `AWS S3 (REGION)`.
    pub fn endpoint_name(&self) -> String {
        match self.endpoint_set {
            true => self.endpoint.clone(),
            false => format!("AWS S3 ({})", self.region),
        }
    }

    /// The keys requests are signed with: the settings' own, else the
    /// instance's role's.
    pub fn credentials(&self) -> Result<Credentials, String> {
        let (access_key, secret_key, token) = match &self.keys {
            Some(keys) => keys.clone(),
            None => crate::imds::instance_role_keys(self.connect_timeout)?,
        };
        Ok(Credentials {
            access_key,
            secret_key,
            token,
            region: self.region.clone(),
        })
    }
}

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

    #[test]
    fn timeouts_are_read_as_they_are_set() {
        assert_eq!(parse_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("soon"), None);
    }
}
