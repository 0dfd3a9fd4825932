//! The few XML documents S3 answers with besides a listing's count
//! (`listing`): a multipart upload's id, a listing's keys and sizes (a
//! clean-up, not a storm), an error's code. Read with quick-xml, by local
//! element names (a namespace's prefix is not looked at).

use quick_xml::events::Event;
use quick_xml::Reader;

/// The text of every element named (locally) one of `names`, in order,
/// with its entities and character references resolved: which name, and
/// the text.
fn texts_of(xml: &[u8], names: &[&str]) -> Result<Vec<(usize, String)>, String> {
    let mut reader = Reader::from_reader(xml);
    let mut found: Vec<(usize, String)> = Vec::new();
    // Whether the scan is inside one of `names`.
    let mut inside = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let local = e.local_name();
                let named = names.iter().position(|n| n.as_bytes() == local.as_ref());
                inside = named.is_some();
                if let Some(i) = named {
                    found.push((i, String::new()));
                }
            }
            Ok(Event::End(_)) => inside = false,
            Ok(Event::Text(t)) if inside => {
                let text = t.decode().map_err(|e| e.to_string())?;
                found.last_mut().expect("inside").1.push_str(&text);
            }
            Ok(Event::GeneralRef(r)) if inside => {
                let c = match r.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r.decode().map_err(|e| e.to_string())?;
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .ok_or_else(|| format!("unknown entity &{name};"))?
                            .to_string()
                    }
                };
                found.last_mut().expect("inside").1.push_str(&c);
            }
            Ok(Event::DocType(_)) => return Err("a DOCTYPE in an answer".into()),
            Ok(Event::Eof) => return Ok(found),
            Ok(_) => {}
            Err(e) => return Err(format!("at byte {}: {e}", reader.error_position())),
        }
    }
}

/// The `UploadId` of a CreateMultipartUpload answer.
pub fn upload_id(xml: &[u8]) -> Result<String, String> {
    texts_of(xml, &["UploadId"])?
        .pop()
        .map(|(_, id)| id)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| "no UploadId in the answer".into())
}

/// A listing's keys with their sizes, and the next page's token.
pub type KeysPage = (Vec<(String, u64)>, Option<String>);

/// One page of a ListObjectsV2 answer: every key with its size, and the
/// next page's token.
pub fn keys_page(xml: &[u8]) -> Result<KeysPage, String> {
    let mut keys: Vec<(String, u64)> = Vec::new();
    let mut next = None;
    for (i, text) in texts_of(xml, &["Key", "Size", "NextContinuationToken"])? {
        match i {
            0 => keys.push((text, 0)),
            1 => {
                let (_, size) = keys.last_mut().ok_or("a Size before any Key")?;
                *size = text.trim().parse().map_err(|_| format!("Size {text:?}"))?;
            }
            _ => next = Some(text.trim().to_string()).filter(|t| !t.is_empty()),
        }
    }
    Ok((keys, next))
}

/// Whether a successful answer's body is an S3 error (`<Error>`), as a
/// copy or a completed upload that failed after its 200 sends.
pub fn error_in(body: &[u8]) -> bool {
    memchr::memmem::find(body, b"<Error>").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_id_is_read_and_its_absence_said() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k</Key><UploadId>2~abc&amp;d</UploadId></InitiateMultipartUploadResult>"#;
        assert_eq!(upload_id(xml).unwrap(), "2~abc&d");
        assert!(upload_id(b"<InitiateMultipartUploadResult/>").is_err());
    }

    #[test]
    fn a_listings_keys_and_sizes_and_next_token_are_read() {
        let xml = br#"<ListBucketResult><Contents><Key>d/a&amp;b</Key><Size>4</Size></Contents>
<Contents><Key>d/c&#x41;</Key><LastModified>x</LastModified><Size>0</Size></Contents>
<NextContinuationToken> t1 </NextContinuationToken></ListBucketResult>"#;
        let (keys, next) = keys_page(xml).unwrap();
        assert_eq!(keys, [("d/a&b".to_string(), 4), ("d/cA".to_string(), 0)]);
        assert_eq!(next.as_deref(), Some("t1"));
        assert!(keys_page(b"<L><Size>3</Size></L>").is_err());
        assert!(keys_page(b"<!DOCTYPE x><L/>").is_err());
    }

    #[test]
    fn a_copy_answered_200_can_still_have_failed() {
        let done = br#"<?xml version="1.0" encoding="UTF-8"?>
<CopyObjectResult><LastModified>2026-11-27T20:00:00.000Z</LastModified><ETag>"9b2cf535f27731c974343645a3985328"</ETag></CopyObjectResult>"#;
        let failed = br#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>"#;
        assert!(!error_in(done));
        assert!(error_in(failed));
    }
}
