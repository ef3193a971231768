//! The message's top-level headers as a reader sees them: name and value pairs in the order
//! written, values unfolded and with RFC 2047 encoded words decoded, within the header
//! limits of [`InboundLimits`].

use mail_parser::{HeaderName, HeaderValue, MessageParser};

use super::InboundLimits;
use crate::model::InboundHeader;

/// The headers of `raw` and whether any were left out or cut. Every header is read as
/// unstructured text (RFC 5322 §3.2.5 with RFC 2047 words), whatever its field: an address
/// header shows its display names decoded, a Message-ID keeps its angle brackets.
pub(super) fn decoded_headers(raw: &[u8], limits: &InboundLimits) -> (Vec<InboundHeader>, bool) {
    // A non-empty map makes mail-parser use the default (here: unstructured) for every other
    // field instead of its per-field parsers.
    let parser = MessageParser::new().default_header_text().header_text(HeaderName::Subject);
    let Some(message) = parser.parse_headers(raw) else {
        return (Vec::new(), false);
    };
    let mut headers = Vec::new();
    let mut total = 0usize;
    let mut truncated = false;
    for header in message.headers() {
        let value = match header.value() {
            HeaderValue::Text(text) => text.trim().to_owned(),
            HeaderValue::TextList(list) => list.join(" "),
            _ => String::new(),
        };
        let name = cut(header.name(), limits.max_header_value_bytes);
        let kept = cut(&value, limits.max_header_value_bytes);
        truncated |= kept.len() < value.len() || name.len() < header.name().len();
        let value = kept;
        let size = name.len() + value.len();
        if headers.len() == limits.max_headers || total + size > limits.max_header_bytes {
            truncated = true;
            break;
        }
        total += size;
        headers.push(InboundHeader { name: name.to_owned(), value: value.to_owned() });
    }
    (headers, truncated)
}

/// The longest prefix of `text` of at most `limit` bytes that ends at a character boundary.
pub(super) fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
