//! What of a request path may reach the access log: a path segment holding an address
//! (`/v1/suppressions/ann@example.com`, the dashboard's `/suppressions/{email}/delete`) is
//! replaced by `{address}`, so recipient addresses are not written at `info` on every request.
//! The query string never reaches the log (it holds the `to` filter of message lists).

use std::borrow::Cow;

/// What a segment holding an address is logged as.
pub const ADDRESS_PLACEHOLDER: &str = "{address}";

/// `path` with every segment that holds an `@`, raw or percent-encoded (`%40`), replaced by
/// [`ADDRESS_PLACEHOLDER`]. Borrowed when there is nothing to replace (the common case).
pub fn without_addresses(path: &str) -> Cow<'_, str> {
    let holds_address = |segment: &str| segment.contains('@') || segment.to_ascii_lowercase().contains("%40");
    if !holds_address(path) {
        return Cow::Borrowed(path);
    }
    let segments: Vec<&str> =
        path.split('/').map(|segment| if holds_address(segment) { ADDRESS_PLACEHOLDER } else { segment }).collect();
    Cow::Owned(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_holding_an_address_are_replaced_and_others_kept() {
        assert_eq!(without_addresses("/v1/suppressions/ann@example.com"), "/v1/suppressions/{address}");
        assert_eq!(without_addresses("/v1/suppressions/ann%40example.com"), "/v1/suppressions/{address}");
        assert_eq!(without_addresses("/v1/suppressions/Ann%40Example.com"), "/v1/suppressions/{address}");
        assert_eq!(without_addresses("/suppressions/a%2Bb%40x.example/delete"), "/suppressions/{address}/delete");
        assert_eq!(without_addresses("/a@b/c/d@e/"), "/{address}/c/{address}/");
        let plain = "/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV";
        assert!(matches!(without_addresses(plain), Cow::Borrowed(p) if p == plain));
        assert_eq!(without_addresses("/v1/domains/x/senders/billing"), "/v1/domains/x/senders/billing");
    }
}
