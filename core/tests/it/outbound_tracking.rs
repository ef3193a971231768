//! Tracking as it leaves in the MIME: the HTML part rewritten, the text part not, and both
//! DKIM signatures covering the rewritten bytes.

use mail_parser::MessageParser;

use tidings_core::model::{Message, MessageTracking};
use tidings_core::outbound::{DomainSigner, build_message, prepare};
use tidings_core::tracking::{PublicUrl, TokenKind, TrackingConfig, TrackingKey};
use tidings_testing::dkim::verify_dkim;
use tidings_testing::signing::{message_from, signing_domain};

const BASE: &str = "https://track.example.com";
const HTML: &str = concat!(
    r#"<html><body><p>Your <a href="https://shop.example.com/orders/42?utm=mail&amp;x=1">order</a>."#,
    r##" <a href="mailto:help@example.com">Help</a> <a href="#details">Details</a>"##,
    r#" <a href="https://shop.example.com/unsubscribe" data-tidings-notrack>Unsubscribe</a></p></body></html>"#,
);
const TEXT: &str = "Your order: https://shop.example.com/orders/42?utm=mail&x=1";

fn config() -> TrackingConfig {
    TrackingConfig { public_url: PublicUrl::parse(BASE).unwrap(), key: TrackingKey::from_bytes([9; 32]) }
}

fn tracked_message(tracking: MessageTracking) -> (tidings_core::model::Domain, Message) {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.html = Some(HTML.to_owned());
    message.text = Some(TEXT.to_owned());
    message.tracking = tracking;
    (domain, message)
}

/// The decoded html and text parts of `raw`.
fn parts(raw: &[u8]) -> (String, String) {
    let parsed = MessageParser::default().parse(raw).unwrap();
    (parsed.body_html(0).unwrap().into_owned(), parsed.body_text(0).unwrap().into_owned())
}

/// Every `{BASE}/t/{kind}/{token}` in `html`, as (kind, token).
fn tracking_urls(html: &str) -> Vec<(String, String)> {
    let prefix = format!("{BASE}/t/");
    html.match_indices(&prefix)
        .map(|(at, _)| {
            let rest = &html[at + prefix.len()..];
            let end = rest.find('"').unwrap();
            let (kind, token) = rest[..end].split_once('/').unwrap();
            (kind.to_owned(), token.to_owned())
        })
        .collect()
}

#[test]
fn a_tracked_message_has_its_links_rewritten_and_the_pixel_and_an_untouched_text_part() {
    let (domain, message) = tracked_message(MessageTracking { opens: true, clicks: true });

    let built = build_message(&message, &domain, Some(&config())).unwrap();

    let (html, text) = parts(&built.raw);
    assert_eq!(text, TEXT);
    let found = tracking_urls(&html);
    let kinds: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["c", "o"], "one tracked link, then the pixel: {html}");
    let click = config().key.verify(&found[0].1).unwrap();
    assert_eq!((click.kind, click.workspace, click.message), (TokenKind::Click, message.workspace_id, message.id));
    assert_eq!(click.url.unwrap().as_str(), "https://shop.example.com/orders/42?utm=mail&x=1");
    assert_eq!(config().key.verify(&found[1].1).unwrap().kind, TokenKind::Open);
    assert!(html.contains(r#"<a href="mailto:help@example.com">Help</a>"#), "{html}");
    assert!(html.contains(r##"<a href="#details">Details</a>"##), "{html}");
    assert!(html.contains(r#"<a href="https://shop.example.com/unsubscribe">Unsubscribe</a>"#), "{html}");
    // Short HTML without images: the pixel is a cell background, not an <img> (module docs of
    // tracking::html).
    assert!(html.ends_with(r#"</td></tr></table></body></html>"#), "the pixel is the last thing in the body: {html}");
    assert!(!html.contains("<img") && !html.contains("display:none"), "{html}");
}

#[test]
fn only_what_the_message_asks_for_is_added() {
    let (domain, message) = tracked_message(MessageTracking { opens: false, clicks: true });
    let (html, _) = parts(&build_message(&message, &domain, Some(&config())).unwrap().raw);
    assert_eq!(tracking_urls(&html).iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["c"]);

    let (domain, message) = tracked_message(MessageTracking { opens: true, clicks: false });
    let (html, _) = parts(&build_message(&message, &domain, Some(&config())).unwrap().raw);
    assert_eq!(tracking_urls(&html).iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["o"]);
}

#[test]
fn untracked_or_unconfigured_messages_are_built_as_written() {
    let (domain, untracked) = tracked_message(MessageTracking::default());
    let (tracked_domain, tracked) = tracked_message(MessageTracking { opens: true, clicks: true });
    for (domain, message, config) in [(&domain, &untracked, Some(config())), (&tracked_domain, &tracked, None)] {
        let (html, text) = parts(&build_message(message, domain, config.as_ref()).unwrap().raw);
        assert_eq!((html.as_str(), text.as_str()), (HTML, TEXT));
    }
}

#[test]
fn a_text_only_message_is_never_tracked() {
    let (domain, mut message) = tracked_message(MessageTracking { opens: true, clicks: true });
    message.html = None;
    let tracked = build_message(&message, &domain, Some(&config())).unwrap();
    assert_eq!(tracked, build_message(&message, &domain, None).unwrap());
}

#[test]
fn the_text_generated_for_an_html_only_message_has_the_links_as_written_not_tracked() {
    let (domain, mut message) = tracked_message(MessageTracking { opens: true, clicks: true });
    message.text = None;

    let built = build_message(&message, &domain, Some(&config())).unwrap();

    let (html, text) = parts(&built.raw);
    assert_eq!(tracking_urls(&html).len(), 2, "the HTML part is tracked: {html}");
    assert!(!text.contains(BASE), "{text}");
    assert_eq!(
        text,
        "Your order (https://shop.example.com/orders/42?utm=mail&x=1). Help (help@example.com) Details Unsubscribe \
         (https://shop.example.com/unsubscribe)"
    );
}

#[tokio::test]
async fn both_dkim_signatures_cover_the_rewritten_html() {
    let (domain, message) = tracked_message(MessageTracking { opens: true, clicks: true });
    let signer = DomainSigner::new(&domain).unwrap();

    let email = prepare(&message, &domain, &signer, None, Some(&config())).unwrap();

    assert_eq!(tracking_urls(&parts(&email.raw).0).len(), 2, "prepare tracks");
    let checks = verify_dkim(&email.raw, &domain.records).await;
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c.passed()), "{checks:?}");
}
