//! The few XML documents S3 speaks here: errors, upload ids, object listings, and the
//! body of CompleteMultipartUpload.

use quick_xml::Reader;
use quick_xml::events::Event;

/// A document flattened to its root element's name and, in document order, one item per
/// element below the root: `(path, Some(text))` for an element without child elements,
/// `(path, None)` at the end of one with child elements. Paths are local names joined by
/// `/`, without the root (`Contents/Key`).
pub(super) struct Flat {
    /// The root element's local name (`Error`, `ListBucketResult`, ...).
    pub root: String,
    /// The elements, as described above.
    pub items: Vec<(String, Option<String>)>,
}

impl Flat {
    /// The text of the first element at `path`.
    pub fn text(&self, path: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|(p, text)| p == path && text.is_some())
            .and_then(|(_, text)| text.as_deref())
    }
}

/// Parses `xml` (leading whitespace, as S3 sends while it works on a request, is fine).
pub(super) fn parse(xml: &[u8]) -> Result<Flat, String> {
    let xml = std::str::from_utf8(xml).map_err(|_| "the XML is not UTF-8".to_string())?;
    let mut reader = Reader::from_str(xml.trim_start());
    let mut root = None;
    let mut stack: Vec<(String, bool)> = Vec::new();
    let mut text = String::new();
    let mut items = Vec::new();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("bad XML at {}: {e}", reader.buffer_position()))?;
        match event {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                if let Some(parent) = stack.last_mut() {
                    parent.1 = true;
                } else if root.is_some() {
                    return Err("more than one root element".into());
                }
                stack.push((name, false));
                text.clear();
            }
            Event::Empty(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                match stack.last_mut() {
                    Some(parent) => {
                        parent.1 = true;
                        items.push((path(&stack[1..], &name), Some(String::new())));
                    }
                    None if root.is_none() => {
                        return Ok(Flat { root: name, items });
                    }
                    None => return Err("more than one root element".into()),
                }
            }
            Event::Text(t) => text.push_str(&t.xml10_content().map_err(|e| e.to_string())?),
            Event::CData(t) => text.push_str(&t.decode().map_err(|e| e.to_string())?),
            Event::GeneralRef(r) => match r.resolve_char_ref().map_err(|e| e.to_string())? {
                Some(c) => text.push(c),
                None => text.push(match r.decode().map_err(|e| e.to_string())?.as_ref() {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "apos" => '\'',
                    "quot" => '"',
                    other => return Err(format!("unknown XML entity &{other};")),
                }),
            },
            Event::End(_) => {
                let (name, has_children) = stack.pop().ok_or("unbalanced XML")?;
                if stack.is_empty() {
                    root = Some(name);
                    continue;
                }
                let item = path(&stack[1..], &name);
                items.push((item, (!has_children).then(|| std::mem::take(&mut text))));
                text.clear();
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    match root {
        Some(root) if stack.is_empty() => Ok(Flat { root, items }),
        _ => Err("the XML document is incomplete".into()),
    }
}

fn path(ancestors: &[(String, bool)], name: &str) -> String {
    let mut out = String::new();
    for (ancestor, _) in ancestors {
        out.push_str(ancestor);
        out.push('/');
    }
    out.push_str(name);
    out
}

/// The body of CompleteMultipartUpload for `parts` (number, ETag).
pub(super) fn complete_body(parts: &[(u32, String)]) -> String {
    let mut body = String::from("<CompleteMultipartUpload>");
    for (number, etag) in parts {
        body.push_str(&format!(
            "<Part><PartNumber>{number}</PartNumber><ETag>{}</ETag></Part>",
            quick_xml::escape::escape(etag.as_str())
        ));
    }
    body.push_str("</CompleteMultipartUpload>");
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_a_listing() {
        let xml = br#"
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
              <Name>b</Name><IsTruncated>true</IsTruncated>
              <Contents><Key>a &amp; b&#x20;&lt;c&gt;</Key><Size>3</Size><Owner><ID>x</ID></Owner></Contents>
              <Contents><Key><![CDATA[d<e]]></Key><Size>0</Size><ETag/></Contents>
              <NextContinuationToken>tok</NextContinuationToken>
            </ListBucketResult>"#;
        let flat = parse(xml).unwrap();
        assert_eq!(flat.root, "ListBucketResult");
        assert_eq!(flat.text("NextContinuationToken"), Some("tok"));
        let items: Vec<(&str, Option<&str>)> = flat
            .items
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_deref()))
            .collect();
        assert_eq!(
            items,
            [
                ("Name", Some("b")),
                ("IsTruncated", Some("true")),
                ("Contents/Key", Some("a & b <c>")),
                ("Contents/Size", Some("3")),
                ("Contents/Owner/ID", Some("x")),
                ("Contents/Owner", None),
                ("Contents", None),
                ("Contents/Key", Some("d<e")),
                ("Contents/Size", Some("0")),
                ("Contents/ETag", Some("")),
                ("Contents", None),
                ("NextContinuationToken", Some("tok")),
            ]
        );
    }

    #[test]
    fn errors_and_garbage() {
        let flat =
            parse(b"\n  \n<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>").unwrap();
        assert_eq!(flat.root, "Error");
        assert_eq!(flat.text("Code"), Some("NoSuchKey"));
        assert!(parse(b"<Error><Code>x</Code>").is_err());
        assert!(parse(b"not xml").is_err());
        assert!(parse(b"").is_err());
    }

    #[test]
    fn complete_body_escapes_etags() {
        assert_eq!(
            complete_body(&[(1, "\"ab\"".into())]),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>\
             <ETag>&quot;ab&quot;</ETag></Part></CompleteMultipartUpload>"
        );
    }
}
