use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use proptest::prelude::*;
use ulid::Ulid;

use super::*;
use crate::ids::{MessageId, WorkspaceId};

fn key(byte: u8) -> TrackingKey {
    TrackingKey::from_bytes([byte; TRACKING_KEY_BYTES])
}

fn ids(ws: u128, msg: u128) -> (WorkspaceId, MessageId) {
    (WorkspaceId(Ulid(ws)), MessageId(Ulid(msg)))
}

fn url(text: &str) -> TrackedUrl {
    TrackedUrl::parse(text).unwrap()
}

#[test]
fn an_open_token_verifies_to_its_workspace_and_message() {
    let (ws, msg) = ids(7, 9);
    let token = key(1).sign_open(ws, msg, None);
    assert_eq!(token.len(), 88, "34 bytes of payload and a 32-byte tag");
    let verified = key(1).verify(&token).unwrap();
    assert_eq!(verified, Verified { kind: TokenKind::Open, workspace: ws, message: msg, recipient: None, url: None });
}

#[test]
fn a_click_token_carries_its_url() {
    let (ws, msg) = ids(7, 9);
    let target = url("https://example.com/a?b=1&c=2#d");
    let verified = key(1).verify(&key(1).sign_click(ws, msg, None, &target)).unwrap();
    assert_eq!(verified.kind, TokenKind::Click);
    assert_eq!(verified.url.as_ref().map(TrackedUrl::as_str), Some("https://example.com/a?b=1&c=2#d"));
}

#[test]
fn another_key_does_not_verify_a_token() {
    let (ws, msg) = ids(1, 2);
    assert_eq!(key(2).verify(&key(1).sign_open(ws, msg, None)), Err(TokenError::BadSignature));
}

#[test]
fn ids_swapped_in_from_another_message_do_not_verify() {
    let k = key(1);
    let (ws, a) = ids(5, 100);
    let (_, b) = ids(5, 200);
    let mut bytes = URL_SAFE_NO_PAD.decode(k.sign_open(ws, a, None)).unwrap();
    bytes[18..34].copy_from_slice(&b.to_bytes());
    assert_eq!(k.verify(&URL_SAFE_NO_PAD.encode(bytes)), Err(TokenError::BadSignature));
}

#[test]
fn only_short_enough_http_and_https_urls_are_tracked() {
    assert!(TrackedUrl::parse(" HTTPS://Example.COM/x ").is_some_and(|u| u.as_str() == "https://example.com/x"));
    for text in ["mailto:a@example.com", "#top", "/relative", "javascript:alert(1)", "ftp://example.com/", ""] {
        assert_eq!(TrackedUrl::parse(text), None, "{text}");
    }
    let base = "https://example.com/";
    let longest = format!("{base}{}", "a".repeat(MAX_TRACKED_URL_BYTES - base.len()));
    assert!(TrackedUrl::parse(&longest).is_some());
    assert_eq!(TrackedUrl::parse(&format!("{longest}a")), None);
    let token = key(1).sign_click(WorkspaceId(Ulid(1)), MessageId(Ulid(2)), None, &url(&longest));
    assert!(token.len() <= MAX_TOKEN_CHARS, "{} > {MAX_TOKEN_CHARS}", token.len());
    assert!(key(1).verify(&token).is_ok());
}

#[test]
fn public_urls_are_bases_without_a_trailing_slash() {
    assert_eq!(PublicUrl::parse("https://t.example.com/").unwrap().as_str(), "https://t.example.com");
    let with_path = PublicUrl::parse("http://127.0.0.1:8443/mail/").unwrap();
    assert_eq!(with_path.open_url("TOKEN"), "http://127.0.0.1:8443/mail/t/o/TOKEN");
    assert_eq!(with_path.click_url("TOKEN"), "http://127.0.0.1:8443/mail/t/c/TOKEN");
    assert!(matches!(PublicUrl::parse("ftp://example.com"), Err(PublicUrlError::Scheme(_))));
    assert!(matches!(PublicUrl::parse("example.com"), Err(PublicUrlError::Syntax(_))));
    for text in ["https://example.com/?a=b", "https://example.com/#x", "https://u:p@example.com/"] {
        assert_eq!(PublicUrl::parse(text), Err(PublicUrlError::NotABase), "{text}");
    }
}

#[test]
fn debug_never_shows_the_key() {
    assert_eq!(format!("{:?}", key(0xAB)), "TrackingKey(***)");
    let config = TrackingConfig { public_url: PublicUrl::parse("https://t.example").unwrap(), key: key(0xAB) };
    let shown = format!("{config:?}");
    assert!(shown.contains("TrackingKey(***)") && !shown.to_lowercase().contains("171"), "{shown}");
}

fn any_url() -> impl Strategy<Value = TrackedUrl> {
    ("[a-z]{1,12}", "[a-zA-Z0-9/._~-]{0,40}", proptest::option::of("[a-z0-9=&]{1,20}"))
        .prop_map(|(host, path, query)| {
            let query = query.map(|q| format!("?{q}")).unwrap_or_default();
            TrackedUrl::parse(&format!("https://{host}.example/{path}{query}"))
        })
        .prop_filter_map("trackable", |u| u)
}

fn any_token() -> impl Strategy<Value = (String, Verified)> {
    (any::<u128>(), any::<u128>(), proptest::option::of(any_url())).prop_map(|(ws, msg, url)| {
        let (ws, msg) = ids(ws, msg);
        let token = match &url {
            Some(u) => key(1).sign_click(ws, msg, None, u),
            None => key(1).sign_open(ws, msg, None),
        };
        let kind = if url.is_some() { TokenKind::Click } else { TokenKind::Open };
        (token, Verified { kind, workspace: ws, message: msg, recipient: None, url })
    })
}

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/ .";

proptest! {
    #[test]
    fn every_signed_token_verifies_to_what_was_signed((token, expected) in any_token()) {
        prop_assert_eq!(key(1).verify(&token), Ok(expected));
    }

    #[test]
    fn any_changed_character_fails(
        (token, _) in any_token(),
        at in any::<prop::sample::Index>(),
        with in prop::sample::select(ALPHABET),
    ) {
        let at = at.index(token.len());
        prop_assume!(token.as_bytes()[at] != with);
        let mut bytes = token.into_bytes();
        bytes[at] = with;
        let altered = String::from_utf8(bytes).unwrap();
        prop_assert!(key(1).verify(&altered).is_err(), "{}", altered);
    }

    #[test]
    fn any_truncation_or_extension_fails(
        (token, _) in any_token(),
        cut in any::<prop::sample::Index>(),
        extra in "[A-Za-z0-9_-]{1,8}",
    ) {
        let truncated = &token[..cut.index(token.len())];
        prop_assert!(key(1).verify(truncated).is_err());
        let (appended, prepended) = (format!("{token}{extra}"), format!("{extra}{token}"));
        prop_assert!(key(1).verify(&appended).is_err());
        prop_assert!(key(1).verify(&prepended).is_err());
    }

    #[test]
    fn arbitrary_text_never_panics_and_never_verifies(text in ".{0,200}") {
        prop_assert!(key(1).verify(&text).is_err());
    }

    #[test]
    fn arbitrary_bytes_under_a_valid_looking_encoding_never_verify(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        prop_assert!(key(1).verify(&URL_SAFE_NO_PAD.encode(&bytes)).is_err());
    }
}
