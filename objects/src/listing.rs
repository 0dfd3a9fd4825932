//! A ListObjectsV2 answer, read for what a replayed listing needs: how many
//! entries its page held and the next page's token. A rank making a
//! listing storm reads thousands of these a second, and an XML reader's
//! events (one per tag and per text, each a small decision) cost more than
//! the request's own signing; so the document is scanned instead, tag by
//! tag, as far as S3's answers use XML: no DTD, and text only where a
//! token is read (with its entities and character references resolved).

use std::sync::LazyLock;

use memchr::{memchr, memchr3, memmem};

/// The elements of a listing's root that are its entries (a key, a
/// common prefix), with their end tag and their start tag's opening: what
/// skipping an entry whole looks for.
struct Entry {
    name: &'static [u8],
    end: memmem::Finder<'static>,
    start: memmem::Finder<'static>,
}

static ENTRIES: LazyLock<[Entry; 2]> = LazyLock::new(|| {
    [
        (b"Contents".as_slice(), "</Contents>", "<Contents"),
        (
            b"CommonPrefixes".as_slice(),
            "</CommonPrefixes>",
            "<CommonPrefixes",
        ),
    ]
    .map(|(name, end, start)| Entry {
        name,
        end: memmem::Finder::new(end),
        start: memmem::Finder::new(start),
    })
});

/// One page of a listing: how many entries (keys and common prefixes) it
/// held, and the token of the next page.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub entries: u64,
    pub next: Option<String>,
}

/// The entries and the next page's token of a ListObjectsV2 answer: the
/// `Contents` and `CommonPrefixes` elements inside the root, and the text
/// of its `NextContinuationToken`.
pub fn read_page(xml: &[u8]) -> Result<Page, String> {
    let mut page = Page::default();
    // How deep the scan is: 1 inside the root element.
    let mut depth = 0usize;
    let mut token = None::<String>;
    let mut at = 0;
    while let Some(open) = memchr(b'<', &xml[at..]) {
        let tag = &xml[at + open + 1..];
        // How far past the `<` the scan goes on.
        let next = if let Some(r) = tag.strip_prefix(b"?") {
            1 + past(r, b"?>", "a declaration")?
        } else if let Some(r) = tag.strip_prefix(b"!--") {
            3 + past(r, b"-->", "a comment")?
        } else if let Some(r) = tag.strip_prefix(b"![CDATA[") {
            8 + past(r, b"]]>", "a CDATA section")?
        } else if tag.first() == Some(&b'!') {
            return Err("a DOCTYPE in a listing".into());
        } else {
            let end = tag_end(tag)?;
            let inner = &tag[..end];
            if inner.first() == Some(&b'/') {
                depth = depth.checked_sub(1).ok_or("an end tag closes no element")?;
            } else {
                let empty = inner.last() == Some(&b'/');
                let name = local_name(inner);
                if depth == 1 {
                    let entry = ENTRIES.iter().find(|e| e.name == name);
                    page.entries += u64::from(entry.is_some());
                    let skip = entry
                        .filter(|_| !empty)
                        .and_then(|e| entry_rest(e, &tag[end + 1..], inner));
                    if let Some(skip) = skip {
                        at += open + 1 + end + 1 + skip;
                        continue;
                    }
                    if name == b"NextContinuationToken" && !empty {
                        let text = &tag[end + 1..];
                        let close =
                            memmem::find(text, b"</").ok_or("the listing ends inside its token")?;
                        token
                            .get_or_insert_default()
                            .push_str(unescape(&text[..close])?.trim());
                    }
                }
                if !empty {
                    depth += 1;
                }
            }
            end + 1
        };
        at += open + 1 + next;
    }
    if depth != 0 {
        return Err("the listing ends inside an element".into());
    }
    page.next = token.filter(|t| !t.is_empty());
    Ok(page)
}

/// How far into `s` the first `end` ends (a declaration's, a comment's:
/// short, and a finder built for each would cost more than the search).
fn past(s: &[u8], end: &[u8], what: &str) -> Result<usize, String> {
    s.windows(end.len())
        .position(|w| w == end)
        .map(|i| i + end.len())
        .ok_or_else(|| format!("the listing ends inside {what}"))
}

/// How far past `entry`'s start tag (its `inner` text) its end tag
/// ends, found at once rather than tag by tag (an entry's keys, sizes,
/// dates and owner are a dozen tags, and a storm reads thousands of
/// entries a second). Its text cannot hold the end tag (a `<` in text is
/// escaped); where the entry holds a comment, CDATA or an entry of its
/// own name, or its name has a namespace's prefix, none: it is scanned as
/// the rest is.
fn entry_rest(entry: &Entry, rest: &[u8], inner: &[u8]) -> Option<usize> {
    if inner != entry.name {
        return None;
    }
    let end = entry.end.find(rest)?;
    let within = &rest[..end];
    let markup = memchr::memchr_iter(b'!', within).any(|i| i > 0 && within[i - 1] == b'<');
    let plain = !markup && entry.start.find(within).is_none();
    plain.then(|| end + entry.end.needle().len())
}

/// Where a tag's `>` is, past any quoted attribute values.
fn tag_end(tag: &[u8]) -> Result<usize, String> {
    let ends = || String::from("the listing ends inside a tag");
    let mut at = 0;
    loop {
        let i = at + memchr3(b'>', b'"', b'\'', &tag[at..]).ok_or_else(ends)?;
        match tag[i] {
            b'>' => return Ok(i),
            quote => at = i + 1 + memchr(quote, &tag[i + 1..]).ok_or_else(ends)? + 1,
        }
    }
}

/// A start tag's name, without its namespace's prefix.
fn local_name(inner: &[u8]) -> &[u8] {
    let end = inner
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == b'/')
        .unwrap_or(inner.len());
    let name = &inner[..end];
    match name.iter().position(|&b| b == b':') {
        Some(colon) => &name[colon + 1..],
        None => name,
    }
}

/// Text with its predefined entities and character references resolved.
fn unescape(text: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(text).map_err(|_| "a token that is not UTF-8")?;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let semi = after.find(';').ok_or("an entity without its `;`")?;
        let name = &after[..semi];
        let c = match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = name.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32)
                    .ok_or_else(|| format!("unknown entity &{name};"))?
            }
        };
        out.push(c);
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_count_keys_and_prefixes_and_give_the_next_token() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>d/</Prefix>
<KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>
<Contents><Key>d/a&amp;b</Key><Size>4</Size></Contents><Contents><Key>d/c</Key><Size>0</Size></Contents>
<CommonPrefixes><Prefix>d/e/</Prefix></CommonPrefixes>
<NextContinuationToken>1a/b+c=&amp;&#x41;&#66;</NextContinuationToken></ListBucketResult>"#;
        assert_eq!(
            read_page(xml).unwrap(),
            Page {
                entries: 3,
                next: Some("1a/b+c=&AB".into())
            }
        );
        let last = br#"<ListBucketResult><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>"#;
        assert_eq!(read_page(last).unwrap(), Page::default());
        assert!(read_page(b"<ListBucketResult><Contents></ListBucketResult>").is_err());
    }

    /// Plain entries are skipped to their end tag at once; one holding
    /// markup or an entry of its own name is scanned tag by tag, and
    /// counts the same.
    #[test]
    fn entries_skipped_whole_count_as_entries_scanned() {
        let xml = br#"<ListBucketResult><Contents><Key>a&lt;/Contents&gt;</Key></Contents>
<Contents><Key><![CDATA[</Contents>]]></Key></Contents>
<Contents><Owner><Contents></Contents></Owner></Contents>
<Contents><!-- </Contents> --></Contents><Contents a="1"><Key>b</Key></Contents>
<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes><KeyCount>6</KeyCount></ListBucketResult>"#;
        assert_eq!(read_page(xml).unwrap().entries, 6);
        assert!(read_page(b"<ListBucketResult><Contents><Key>a</Key></ListBucketResult>").is_err());
    }

    #[test]
    fn only_the_roots_children_count_whatever_the_markup_around_them() {
        // Entries nested deeper, in comments or in CDATA are not the
        // root's; prefixed names, empty elements and quoted `>` are.
        let xml = br#"<?xml version="1.0"?><!-- <Contents> --><s3:ListBucketResult a="x>y">
<s3:Contents><Key><![CDATA[<Contents>]]></Key><Owner><Contents/></Owner></s3:Contents>
<CommonPrefixes/><Other><Contents></Contents></Other>
<NextContinuationToken> t&lt;1 </NextContinuationToken></s3:ListBucketResult>"#;
        assert_eq!(
            read_page(xml).unwrap(),
            Page {
                entries: 2,
                next: Some("t<1".into())
            }
        );
        for broken in [
            &b"<ListBucketResult><Contents>"[..],
            b"<ListBucketResult></Contents></ListBucketResult></X>",
            b"<ListBucketResult><!-- open",
            b"<ListBucketResult a=\"x>",
            b"<ListBucketResult><NextContinuationToken>&bogus;</NextContinuationToken></ListBucketResult>",
            b"<!DOCTYPE x [<!ENTITY e \"y\">]><ListBucketResult></ListBucketResult>",
        ] {
            assert!(
                read_page(broken).is_err(),
                "{}",
                String::from_utf8_lossy(broken)
            );
        }
    }
}
