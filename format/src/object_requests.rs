//! What an object-storage request row did (op `request`, see
//! [`crate::schema::COL_METHOD`]): its bucket, its key and the S3 action
//! its method and kept parameters name. The one place a request's URL is
//! read for its meaning: the analysis counts listings and parts with it,
//! and the replayer turns each request into the file calls it stands for.

/// What a request asked of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// GET of an object (whole, or the row's range).
    Get,
    /// PUT of a whole object.
    Put,
    /// POST `?uploads`: a multipart upload begins.
    CreateUpload,
    /// PUT `?partNumber=N&uploadId=…`: one part.
    UploadPart {
        number: u32,
    },
    /// POST `?uploadId=…`: the parts become the object.
    CompleteUpload,
    /// DELETE `?uploadId=…`: the parts are thrown away.
    AbortUpload,
    Head,
    /// DELETE of one object.
    Delete,
    /// A listing (GET of the bucket, V1 or V2) of the keys beneath `prefix`.
    List {
        prefix: String,
    },
    /// POST `?delete`: many keys deleted at once; the row does not say which.
    DeleteMany,
    /// Anything else: a bucket's own settings, its creation, a HEAD of it.
    Other,
}

impl Action {
    /// The action's name, as reports show it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Action::Get => "get",
            Action::Put => "put",
            Action::CreateUpload => "create_upload",
            Action::UploadPart { .. } => "upload_part",
            Action::CompleteUpload => "complete_upload",
            Action::AbortUpload => "abort_upload",
            Action::Head => "head",
            Action::Delete => "delete",
            Action::List { .. } => "list",
            Action::DeleteMany => "delete_many",
            Action::Other => "other",
        }
    }
}

/// A request row read for its meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRequest {
    /// The first segment of the URL's path (path-style addressing; a
    /// virtual-hosted address keeps its bucket in the host, and its key's
    /// first segment stands here).
    pub bucket: String,
    /// The rest of the path, percent-decoded; empty for the bucket itself.
    pub key: String,
    pub action: Action,
}

impl ObjectRequest {
    /// What `method` on `url` (as a request row spells it:
    /// `http(s)://HOST/BUCKET/KEY?kept-parameters`) did; `None` for a URL
    /// that names no bucket.
    pub fn parse(method: &str, url: &str) -> Option<ObjectRequest> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))?;
        let (target, query) = match rest.split_once('?') {
            Some((t, q)) => (t, q),
            None => (rest, ""),
        };
        let path = target.find('/').map_or("", |at| &target[at + 1..]);
        let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
        if bucket.is_empty() {
            return None;
        }
        let param = |name: &str| {
            query.split('&').find_map(|p| {
                let (n, v) = p.split_once('=').unwrap_or((p, ""));
                (n == name).then_some(v)
            })
        };
        let action = if key.is_empty() {
            match method {
                "GET" if param("location").is_none() && param("versioning").is_none() => {
                    Action::List {
                        prefix: percent_decoded(param("prefix").unwrap_or("")),
                    }
                }
                "POST" if param("delete").is_some() => Action::DeleteMany,
                _ => Action::Other,
            }
        } else {
            match (method, param("uploadId"), param("partNumber")) {
                ("PUT", Some(_), Some(n)) => match n.parse() {
                    Ok(number) => Action::UploadPart { number },
                    Err(_) => Action::Other,
                },
                ("POST", None, _) if param("uploads").is_some() => Action::CreateUpload,
                ("POST", Some(_), None) => Action::CompleteUpload,
                ("DELETE", Some(_), None) => Action::AbortUpload,
                ("GET", None, _) => Action::Get,
                ("PUT", None, None) => Action::Put,
                ("HEAD", None, _) => Action::Head,
                ("DELETE", None, _) => Action::Delete,
                _ => Action::Other,
            }
        };
        Some(ObjectRequest {
            bucket: percent_decoded(bucket),
            key: percent_decoded(key),
            action,
        })
    }
}

/// `%XX` escapes decoded (`+` stays: S3 keys in a path are not form-encoded).
/// An escape that is not two hex digits stays as it was; bytes that do not
/// make UTF-8 are replaced.
pub fn percent_decoded(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(method: &str, url: &str) -> Action {
        ObjectRequest::parse(method, url).unwrap().action
    }

    #[test]
    fn a_request_says_its_bucket_key_and_action() {
        let r = ObjectRequest::parse("GET", "http://h:80/jobb/p1/train/a%20b.bin").unwrap();
        assert_eq!(
            (r.bucket.as_str(), r.key.as_str()),
            ("jobb", "p1/train/a b.bin")
        );
        assert_eq!(r.action, Action::Get);
        let list = "https://h/jobb?list-type=2&prefix=p1%2Ftrain%2F";
        assert_eq!(
            action("GET", list),
            Action::List {
                prefix: "p1/train/".into()
            }
        );
        assert_eq!(
            action("GET", "http://h/b"),
            Action::List { prefix: "".into() }
        );
        assert_eq!(action("GET", "http://h/b?location"), Action::Other);
        assert_eq!(action("POST", "http://h/b/k?uploads"), Action::CreateUpload);
        assert_eq!(
            action("PUT", "http://h/b/k?uploadId=2~x&partNumber=3"),
            Action::UploadPart { number: 3 }
        );
        assert_eq!(
            action("POST", "http://h/b/k?uploadId=2~x"),
            Action::CompleteUpload
        );
        assert_eq!(
            action("DELETE", "http://h/b/k?uploadId=2~x"),
            Action::AbortUpload
        );
        assert_eq!(action("PUT", "http://h/b/k"), Action::Put);
        assert_eq!(action("HEAD", "http://h/b/k"), Action::Head);
        assert_eq!(action("DELETE", "http://h/b/k"), Action::Delete);
        assert_eq!(action("POST", "http://h/b?delete"), Action::DeleteMany);
        assert_eq!(action("PUT", "http://h/b"), Action::Other);
        assert_eq!(ObjectRequest::parse("GET", "http://h/"), None);
        assert_eq!(ObjectRequest::parse("GET", "/data/x"), None);
    }

    #[test]
    fn escapes_are_decoded_and_a_broken_one_is_kept() {
        assert_eq!(percent_decoded("a%2Fb%zz%4"), "a/b%zz%4");
        assert_eq!(percent_decoded("a+b"), "a+b");
        assert_eq!(percent_decoded("%E2%82%AC"), "€");
    }
}
