//! Keys of the instance's role, from the EC2 instance metadata service
//! (IMDSv2: a session token first, then the role's name and its keys), for
//! a cloud machine whose environment and profile hold none. The keys are
//! taken once, when the client is made: they last hours, longer than a
//! replay.

use std::time::Duration;

use crate::answer::BodyUse;
use crate::connection::Connection;
use crate::transport::Peer;

const SERVICE: &str = "169.254.169.254";
const ROLES: &str = "/latest/meta-data/iam/security-credentials/";

/// The access key, the secret and the session token of the instance's role.
pub fn instance_role_keys(timeout: Duration) -> Result<(String, String, Option<String>), String> {
    let authority = std::env::var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .ok()
        .and_then(|e| {
            e.strip_prefix("http://")
                .map(|a| a.trim_end_matches('/').to_string())
        })
        .unwrap_or_else(|| SERVICE.into());
    let mut c = Connection::new(Peer {
        authority,
        tls: None,
        connect_timeout: timeout.min(Duration::from_secs(2)),
        timeout: timeout.min(Duration::from_secs(5)),
    });
    let mut ask = |method: &str, path: &str, headers: &str| -> Result<String, String> {
        let a = c
            .request(
                method,
                path,
                headers,
                (method == "PUT").then_some(&[][..]),
                BodyUse::Keep,
            )
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&a.body).into_owned();
        match a.success() {
            true => Ok(text),
            false => Err(format!("{method} {path}: {} {}", a.status, a.reason)),
        }
    };
    let none = |e: String| {
        format!(
            "no credentials: none in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) \
             or the profile files (AWS_PROFILE), and the instance metadata service gave none ({e})"
        )
    };
    let token = ask(
        "PUT",
        "/latest/api/token",
        "x-aws-ec2-metadata-token-ttl-seconds: 21600\r\n",
    )
    .map_err(none)?;
    let header = format!("x-aws-ec2-metadata-token: {}\r\n", token.trim());
    let roles = ask("GET", ROLES, &header).map_err(none)?;
    let role = roles.lines().next().unwrap_or_default().trim();
    if role.is_empty() {
        return Err(none("the instance has no role".into()));
    }
    let keys = ask("GET", &format!("{ROLES}{role}"), &header).map_err(none)?;
    let keys: serde_json::Value =
        serde_json::from_str(&keys).map_err(|e| none(format!("its answer: {e}")))?;
    let field = |name: &str| keys.get(name).and_then(|v| v.as_str()).map(str::to_string);
    match (field("AccessKeyId"), field("SecretAccessKey")) {
        (Some(a), Some(s)) => Ok((a, s, field("Token"))),
        _ => Err(none("its answer holds no keys".into())),
    }
}
