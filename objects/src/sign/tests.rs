use super::*;
use std::time::Duration;

use aws_credential_types::Credentials as AwsCredentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_smithy_runtime_api::client::identity::Identity;

fn example() -> Credentials {
    // The example credentials of S3's SigV4 documentation.
    Credentials {
        access_key: "AKIAIOSFODNN7EXAMPLE".into(),
        secret_key: "wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        token: None,
        region: "us-east-1".into(),
    }
}

/// 2013-05-24 00:00:00 UTC.
fn day() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_369_353_600)
}

fn header<'a>(lines: &'a str, name: &str) -> Option<&'a str> {
    lines
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
}

fn authorization(lines: &str) -> &str {
    header(lines, "authorization").expect("an authorization header")
}

/// The crate's whole signer, set as S3 asks: the headers it adds.
fn crate_signed(
    c: &Credentials,
    method: &str,
    url: &str,
    extra: &[(&'static str, &str)],
    at: SystemTime,
) -> Vec<(String, String)> {
    let keys = AwsCredentials::new(&c.access_key, &c.secret_key, c.token.clone(), None, "test");
    let identity: Identity = keys.into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&c.region)
        .name("s3")
        .time(at)
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let request = SignableRequest::new(
        method,
        url,
        extra.iter().copied(),
        SignableBody::UnsignedPayload,
    )
    .unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    instructions
        .headers()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Every kind of request this client signs, signed here and by the
/// crate's whole signer: the same headers, the same signature.
#[test]
fn every_request_signs_as_the_aws_sdks_signer_signs_it() {
    let with_token = Credentials {
        token: Some("session/token+=".into()),
        region: "eu-west-1".into(),
        ..example()
    };
    type Ask<'a> = (&'a str, &'a str, &'a [(&'static str, &'a str)]);
    let asks: [Ask; 9] = [
        ("GET", "/b/k", &[("range", "bytes=0-4095")]),
        ("GET", "/gw/b/a%20b/x%25231.bin", &[]),
        ("HEAD", "/b/data/rep-0000/r0.bin", &[]),
        ("PUT", "/b/k", &[]),
        ("PUT", "/b/k", &[("x-amz-copy-source", "b/from%20here")]),
        ("DELETE", "/b/k?uploadId=2~x", &[]),
        ("POST", "/b/k?uploads=", &[]),
        ("PUT", "/b/k?partNumber=3&uploadId=2~x", &[]),
        (
            "GET",
            "/b?continuation-token=1a%2Fb&delimiter=%2F&list-type=2&prefix=d%2F",
            &[],
        ),
    ];
    for c in [example(), with_token] {
        for (method, target, extra) in asks {
            let at = day() + Duration::from_secs(3_723);
            let ours = Signer::new(&c)
                .sign(method, "gw:7480", target, extra, at)
                .to_string();
            let theirs = crate_signed(&c, method, &format!("http://gw:7480{target}"), extra, at);
            for (name, value) in &theirs {
                assert_eq!(
                    header(&ours, name),
                    Some(value.as_str()),
                    "{method} {target}: {name}"
                );
            }
            let names = ours.lines().filter(|l| !l.is_empty()).count();
            assert_eq!(names, theirs.len() + extra.len(), "{ours}");
        }
    }
}

/// Known answers, computed apart from any signer with Python's `hmac`
/// and `hashlib` from SigV4's steps: a ranged GET of a key with a
/// space, and a listing's query.
#[test]
fn signatures_match_an_independent_computation() {
    let mut s = Signer::new(&example());
    let path = "/examplebucket/test%20file.txt";
    let get = s
        .sign(
            "GET",
            "127.0.0.1:8000",
            path,
            &[("range", "bytes=0-9")],
            day(),
        )
        .to_string();
    assert!(get.starts_with("range: bytes=0-9\r\n"), "{get}");
    assert!(
        authorization(&get).ends_with(
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=953977269e64145609542d9f9cd35e5719ac0cfd503553c3abb2818e37603a27"
        ),
        "{get}"
    );
    let query = "/examplebucket?delimiter=%2F&list-type=2&max-keys=1&prefix=a%2Fb%2F";
    let list = s
        .sign("GET", "127.0.0.1:8000", query, &[], day())
        .to_string();
    assert!(
        authorization(&list).ends_with(
            "Signature=fe4b2c78b1b742be5b037f60054b396ba53877fb636a98718f3dc929958786f2"
        ),
        "{list}"
    );
}

#[test]
fn dates_are_utc_in_sigv4s_form() {
    assert_eq!(AmzDate::at(0).as_str(), "19700101T000000Z");
    assert_eq!(AmzDate::at(1_369_353_600).as_str(), "20130524T000000Z");
    assert_eq!(AmzDate::at(951_868_799).as_str(), "20000229T235959Z");
    assert_eq!(AmzDate::at(1_795_000_000).as_str(), "20261118T110640Z");
}

/// A request asked again within its second is given its signature
/// again; any change (its second, its day, its query, a header) signs
/// it anew, as a fresh signer would.
#[test]
fn a_request_the_same_to_the_second_is_given_its_signature_again() {
    let later = day() + Duration::from_millis(1500);
    let next_day = day() + Duration::from_secs(86_400);
    let mut kept = Signer::new(&example());
    type Ask<'a> = (&'a str, &'a [(&'static str, &'a str)], SystemTime);
    let asks: [Ask; 6] = [
        ("/b?list-type=2&prefix=d%2F", &[], day()),
        ("/b?list-type=2&prefix=d%2F", &[], day()),
        ("/b?list-type=2&prefix=d%2F", &[], later),
        ("/b/k", &[("range", "bytes=0-9")], later),
        ("/b/k", &[("range", "bytes=10-19")], later),
        ("/b/k", &[("range", "bytes=10-19")], next_day),
    ];
    let mut signed = Vec::new();
    for (target, extra, at) in asks {
        let lines = kept.sign("GET", "h:1", target, extra, at).to_string();
        let fresh = Signer::new(&example())
            .sign("GET", "h:1", target, extra, at)
            .to_string();
        assert_eq!(lines, fresh, "{target} {extra:?}");
        signed.push(lines);
    }
    assert_eq!(signed[0], signed[1]);
    for pair in signed[1..].windows(2) {
        assert_ne!(pair[0], pair[1]);
    }
}

#[test]
fn a_token_is_sent_and_signed_and_never_printed() {
    let with_token = Credentials {
        token: Some("session".into()),
        ..example()
    };
    let mut s = Signer::new(&with_token);
    let h = s.sign("GET", "h", "/b/k", &[("range", "bytes=0-9")], day());
    assert!(h.ends_with("\r\n"));
    assert_eq!(header(h, "x-amz-security-token"), Some("session"));
    assert!(
        authorization(h).contains(
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token,"
        ),
        "{h}"
    );
    assert!(!format!("{with_token:?}").contains("session"));
    assert!(!format!("{s:?}").contains("session"));
}
