//! How the text and HTML parts and the files of a message are written on the wire
//! (docs/decisions.md, "Messages every receiver authenticates").
//!
//! - Text and HTML: every line end (CRLF, a bare LF or a bare CR) becomes CRLF before the
//!   part is encoded ([`crlf_line_ends`]). RFC 5322 §2.3 allows CR and LF only together, and
//!   a bare CR left in a `7bit` part is dropped by DKIM body canonicalization on one side
//!   and not the other, so `bh=` no longer matched. lettre then picks `7bit`,
//!   quoted-printable or base64, whichever is valid and shortest; a part holding a control
//!   character other than tab (NUL, ESC, ...) is quoted-printable, so none is written raw.
//! - Files and inline parts: always base64, whatever the bytes. A CSV or a small binary file
//!   can happen to be ASCII, and lettre would send it `7bit` with bare LFs or NULs.

use std::borrow::Cow;

use lettre::message::header::{ContentTransferEncoding, ContentType};
use lettre::message::{Body, SinglePart};

/// `text` with every CRLF, bare LF and bare CR as CRLF.
pub fn crlf_line_ends(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let already = bytes.iter().enumerate().all(|(i, &b)| match b {
        b'\r' => bytes.get(i + 1) == Some(&b'\n'),
        b'\n' => i > 0 && bytes[i - 1] == b'\r',
        _ => true,
    });
    if already {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push_str("\r\n");
            }
            '\n' => out.push_str("\r\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A text part of `content_type` (text/plain or text/html, UTF-8) holding `text`, line ends
/// made CRLF.
pub fn text_part(content_type: ContentType, text: &str) -> SinglePart {
    let text = crlf_line_ends(text).into_owned();
    let raw_control = text.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n'));
    let body = if raw_control {
        // Quoted-printable accepts any input, so this is never the fallback.
        Body::new_with_encoding(text, ContentTransferEncoding::QuotedPrintable).unwrap_or_else(Body::new)
    } else {
        Body::new(text)
    };
    SinglePart::builder().header(content_type).body(body)
}

/// The body of a file or inline part: `bytes` in base64.
pub fn file_body(bytes: Vec<u8>) -> Body {
    // Base64 accepts any input, so this is never the fallback.
    Body::new_with_encoding(bytes, ContentTransferEncoding::Base64).unwrap_or_else(Body::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_end_becomes_crlf() {
        assert_eq!(crlf_line_ends("crlf line\r\nlf line\nlone cr\rend"), "crlf line\r\nlf line\r\nlone cr\r\nend");
        assert_eq!(crlf_line_ends("\r\r\n\n\r"), "\r\n\r\n\r\n\r\n");
        assert_eq!(crlf_line_ends("\n\rx"), "\r\n\r\nx", "LF CR is two line ends");
        assert!(matches!(crlf_line_ends("a\r\nb"), Cow::Borrowed(_)));
        assert!(matches!(crlf_line_ends("no breaks"), Cow::Borrowed(_)));
    }
}
