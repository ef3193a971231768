use proptest::prelude::*;
use ulid::Ulid;

use super::*;
use crate::tracking::{PublicUrl, TokenKind, TrackingKey};

const BASE: &str = "https://t.example.com";
const BOTH: MessageTracking = MessageTracking { opens: true, clicks: true };

fn config() -> TrackingConfig {
    TrackingConfig { public_url: PublicUrl::parse(BASE).unwrap(), key: TrackingKey::from_bytes([3; 32]) }
}

fn ids() -> (WorkspaceId, MessageId) {
    (WorkspaceId(Ulid(11)), MessageId(Ulid(22)))
}

fn rewrite(html: &str, tracking: MessageTracking) -> String {
    let (ws, msg) = ids();
    rewrite_html(html, &config(), ws, msg, None, tracking)
}

/// The values of every `attribute="..."` in `html`, in order.
fn attribute_values(html: &str, attribute: &str) -> Vec<String> {
    let needle = format!(" {attribute}=\"");
    html.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// Where the click link `href` redirects to, asserting it is a valid click token of our
/// message.
fn destination(href: &str) -> String {
    let token = href.strip_prefix(&format!("{BASE}/t/c/")).unwrap_or_else(|| panic!("not tracked: {href}"));
    let verified = config().key.verify(token).unwrap();
    let (ws, msg) = ids();
    assert_eq!((verified.kind, verified.workspace, verified.message), (TokenKind::Click, ws, msg));
    verified.url.unwrap().as_str().to_owned()
}

#[test]
fn http_and_https_links_are_rewritten_to_signed_redirects() {
    let html = r#"<p><a href="https://example.com/a">A</a> <A HREF=" HTTP://example.com/b?x=1&amp;y=2 ">B</A>
        <map><area href="https://example.com/c" alt="c"></map></p>"#;
    let out = rewrite(html, MessageTracking { opens: false, clicks: true });
    let hrefs: Vec<String> = attribute_values(&out.to_lowercase(), "href")
        .iter()
        .map(|lower| {
            // Tokens are case-sensitive: take the original spelling at the same place.
            let at = out.to_lowercase().find(lower.as_str()).unwrap();
            out[at..at + lower.len()].to_owned()
        })
        .collect();
    let destinations: Vec<String> = hrefs.iter().map(|h| destination(h)).collect();
    assert_eq!(destinations, ["https://example.com/a", "http://example.com/b?x=1&y=2", "https://example.com/c"]);
    assert!(out.contains(">A</a>") && out.contains(">B</A>") && out.contains(r#"alt="c""#), "{out}");
    assert!(!out.contains("<img"), "no pixel without open tracking: {out}");
}

#[test]
fn other_links_stay_as_written_and_the_opt_out_attribute_is_removed() {
    let html = concat!(
        r#"<a href="mailto:ann@example.com">mail</a>"#,
        r##"<a href="#top">top</a>"##,
        r#"<a href="/relative">rel</a>"#,
        r#"<a href="tel:+123">tel</a>"#,
        r#"<a href="javascript:void(0)">js</a>"#,
        r#"<a name="anchor">no href</a>"#,
        r#"<a href="https://example.com/private" data-tidings-notrack>private</a>"#,
        r#"<a data-tidings-notrack="yes" href="https://example.com/also">also</a>"#,
    );
    let out = rewrite(html, MessageTracking { opens: false, clicks: true });
    let expected = concat!(
        r#"<a href="mailto:ann@example.com">mail</a>"#,
        r##"<a href="#top">top</a>"##,
        r#"<a href="/relative">rel</a>"#,
        r#"<a href="tel:+123">tel</a>"#,
        r#"<a href="javascript:void(0)">js</a>"#,
        r#"<a name="anchor">no href</a>"#,
        r#"<a href="https://example.com/private">private</a>"#,
        r#"<a href="https://example.com/also">also</a>"#,
    );
    assert_eq!(out, expected);
}

#[test]
fn links_over_the_length_limit_stay_untracked() {
    let long = format!("https://example.com/{}", "a".repeat(2000));
    let html = format!(r#"<a href="{long}">x</a>"#);
    assert_eq!(rewrite(&html, MessageTracking { opens: false, clicks: true }), html);
}

#[test]
fn the_pixel_goes_just_before_the_closing_body_tag() {
    let out = rewrite("<html><body><p>Hi</p></body></html>", MessageTracking { opens: true, clicks: false });
    let (ws, msg) = ids();
    let src = format!("{BASE}/t/o/{}", config().key.sign_open(ws, msg, None));
    assert!(out.starts_with("<html><body><p>Hi</p><table "), "{out}");
    assert!(out.ends_with("</table></body></html>"), "{out}");
    assert_eq!(attribute_values(&out, "background"), [src]);
    for attribute in [r#"width="1""#, r#"height="1""#, r#"border="0""#, r#"role="presentation""#] {
        assert!(out.contains(attribute), "{attribute}: {out}");
    }
}

/// `html` grown past [`IMAGE_ONLY_HTML_CHARS`] with paragraphs.
fn long_html() -> String {
    "<p>A line of a long receipt, with its item, price, tax and total.</p>".repeat(60)
}

#[test]
fn short_html_without_images_gets_the_pixel_as_a_cell_background_and_no_img() {
    // Any <img> in HTML of up to 3,200 characters is image spam to SpamAssassin.
    for html in ["<p>Hi</p>", "<p>See <a href=\"https://example.com/a\">your order</a>.</p>", ""] {
        let out = rewrite(html, BOTH);
        assert!(!out.contains("<img"), "{out}");
        assert_eq!(attribute_values(&out, "background").len(), 1, "{out}");
        assert_eq!(OpenPixel::for_html(html, 0, "https://t.example/t/o/x"), OpenPixel::CellBackground);
    }
}

#[test]
fn html_with_its_own_images_or_long_html_gets_an_img_pixel() {
    let (ws, msg) = ids();
    let src = format!("{BASE}/t/o/{}", config().key.sign_open(ws, msg, None));
    let long = long_html();
    assert!(long.len() > IMAGE_ONLY_HTML_CHARS);
    for html in [r#"<p><img src="cid:logo"> Hi</p>"#, r#"<P><IMG SRC="https://example.com/l.png"></P>"#, long.as_str()]
    {
        let out = rewrite(html, MessageTracking { opens: true, clicks: false });
        let pixel = format!(r#"<img src="{src}" width="1" height="1" alt="" border="0">"#);
        assert!(out.ends_with(&pixel), "{out}");
        assert!(!out.contains("background="), "{out}");
    }
    // The limit counts the pixel: HTML that only the pixel takes past it is still short.
    let edge = "x".repeat(IMAGE_ONLY_HTML_CHARS - OpenPixel::Image.markup(&src).len());
    assert_eq!(OpenPixel::for_html(&edge, 0, &src), OpenPixel::CellBackground);
    assert_eq!(OpenPixel::for_html(&format!("{edge}x"), 0, &src), OpenPixel::Image);
    // Characters, not bytes, as SpamAssassin counts decoded text.
    let wide = "ü".repeat(IMAGE_ONLY_HTML_CHARS / 2);
    assert_eq!(OpenPixel::for_html(&wide, 0, &src), OpenPixel::CellBackground);
}

#[test]
fn the_pixel_is_never_hidden_with_a_style() {
    // SpamAssassin counts `display:none` and `visibility:hidden` styles (`__STY_INVIS`)
    // towards spam rules; the pixel needs neither, and no style at all.
    let long = long_html();
    for html in ["<p>Hi</p>", "<html><body><p>Hi</p></body></html>", "<img src=\"cid:a\">", long.as_str()] {
        let out = rewrite(html, BOTH);
        assert!(!out.contains("style="), "{out}");
        assert!(!out.to_ascii_lowercase().contains("display:none"), "{out}");
    }
}

#[test]
fn without_a_closing_body_tag_the_pixel_is_appended_once() {
    for html in ["<p>Hi</p>", "<body><p>Hi", "<html><body>Hi</body><body>again</body></html>"] {
        let out = rewrite(html, MessageTracking { opens: true, clicks: false });
        assert_eq!(out.matches(&format!("{BASE}/t/o/")).count(), 1, "{out}");
        assert!(out.starts_with(html.split("</body>").next().unwrap()), "{out}");
    }
    assert!(rewrite("<p>Hi</p>", BOTH).ends_with("</td></tr></table>"));
}

#[test]
fn nothing_asked_means_nothing_changes() {
    let html = r#"<a href="https://example.com/" data-tidings-notrack>x</a>"#;
    assert_eq!(rewrite(html, MessageTracking::default()), html);
}

#[test]
fn character_references_are_decoded() {
    assert_eq!(decode_entities("a&amp;b&lt;c&gt;d&quot;e&#39;f&apos;g"), "a&b<c>d\"e'f'g");
    assert_eq!(decode_entities("&#x26;&#X2F;&#47;"), "&//");
    assert_eq!(decode_entities("?a=1&copy=2&amp"), "?a=1&copy=2&amp", "no `;`: kept");
    assert_eq!(
        decode_entities("&nbsp;&#;&#x;&#xZZ;&#0;&#1114112;&#99999999999;"),
        "&nbsp;&#;&#x;&#xZZ;&#0;&#1114112;&#99999999999;"
    );
    assert_eq!(decode_entities("&&amp;&"), "&&&");
    assert!(matches!(decode_entities("plain"), Cow::Borrowed("plain")));
}

proptest! {
    #[test]
    fn decoding_never_panics_and_leaves_text_without_references_alone(text in ".{0,80}") {
        let decoded = decode_entities(&text);
        if !text.contains('&') {
            prop_assert_eq!(decoded.as_ref(), text.as_str());
        }
        prop_assert!(decoded.len() <= text.len(), "a reference never grows");
    }

    #[test]
    fn an_escaped_url_decodes_to_itself(url in "[a-z&<>\"'=?/]{0,40}") {
        let escaped = url.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
            .replace('"', "&quot;").replace('\'', "&#39;");
        let decoded = decode_entities(&escaped);
        prop_assert_eq!(decoded.as_ref(), url.as_str());
    }

    #[test]
    fn rewriting_arbitrary_markup_keeps_the_text_and_adds_one_pixel(html in "[<>a-z =\"/&;#:.]{0,120}") {
        let out = rewrite(&html, BOTH);
        prop_assert_eq!(out.matches(&format!("{BASE}/t/o/")).count(), 1, "{}", out);
    }
}
