//! The message HTML as the preview serves it: the mail's own markup, less what would make
//! the browser reach out by itself although only images may (`?images=1`).
//!
//! The policy ([`crate::MESSAGE_HTML_CSP`]) is `default-src 'none'` with explicit image
//! sources, which covers fetches, but not everything a `<link>` can do: `dns-prefetch` and
//! `preconnect` are not fetches and no policy governs them (the DNS lookup or TLS handshake
//! tells a sender the message was opened), and a `preload` or `prefetch` with `as=image`
//! falls under `img-src` once images are allowed. So every `<link>` goes (a preview needs
//! none: stylesheets cannot load anyway), and so does every `<meta http-equiv>` (which can
//! switch DNS prefetching back on, or refresh). `<noscript>` goes with its content: the
//! preview runs no script, so a browser parses its content as markup, where a rewriter that
//! assumes scripting (lol_html does) sees only text and would let a `<link>` inside through.
//!
//! The rewriter runs strict: markup it cannot parse the way a browser would (foreign content
//! holding raw text) is an error, and the preview then shows [`UNREADABLE`] rather than the
//! HTML unchecked.

use lol_html::{RewriteStrSettings, element, rewrite_str};

/// What the preview shows when the HTML cannot be checked.
pub(crate) const UNREADABLE: &str = "<!doctype html><p>This message's HTML cannot be shown safely here. \
     Its text part and its .eml file are on the message page.</p>";

/// `html` without the elements that make a browser connect on its own (module docs), or
/// [`UNREADABLE`] when it cannot be parsed with certainty.
pub(crate) fn without_fetching_elements(html: &str) -> String {
    let settings =
        RewriteStrSettings::new().append_element_content_handler(element!("link, noscript, meta[http-equiv]", |el| {
            el.remove();
            Ok(())
        }));
    match rewrite_str(html, settings) {
        Ok(clean) => clean,
        Err(e) => {
            tracing::debug!(error = %e, "message HTML not previewed: the rewriter could not parse it");
            UNREADABLE.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_of_every_kind_and_refreshes_are_removed_and_images_kept() {
        let html = r#"<html><head>
            <link rel="prefetch" href="https://t.example/prefetch">
            <LINK REL=DNS-PREFETCH HREF="//dns.t.example">
            <link rel="preconnect" href="https://pre.t.example">
            <link rel="preload" as="image" href="https://t.example/preload.png">
            <link rel="modulepreload" href="https://t.example/m.js">
            <link rel="prerender" href="https://t.example/page">
            <link rel="stylesheet" href="https://t.example/s.css">
            <meta http-equiv="x-dns-prefetch-control" content="on">
            <meta http-equiv="refresh" content="0;url=https://t.example/refresh">
            <meta charset="utf-8">
            </head><body><p>Hi</p><link rel=prefetch href="https://t.example/in-body">
            <noscript><link rel="prefetch" href="https://t.example/noscript"><p>no script</p></noscript>
            <img src="https://t.example/x.png" alt="remote"></body></html>"#;
        let clean = without_fetching_elements(html);
        for gone in [
            "<link",
            "<LINK",
            "t.example/prefetch",
            "dns.t.example",
            "pre.t.example",
            "preload",
            "noscript",
            "refresh",
            "x-dns",
        ] {
            assert!(!clean.contains(gone), "{gone} is still there: {clean}");
        }
        for kept in [r#"<img src="https://t.example/x.png" alt="remote">"#, "<p>Hi</p>", r#"<meta charset="utf-8">"#] {
            assert!(clean.contains(kept), "{kept} is gone: {clean}");
        }
    }

    #[test]
    fn ordinary_mail_html_is_unchanged() {
        let html = "<table style=\"width:100%\"><tr><td><a href=\"https://acme.example/o/1\">Order</a> &amp; \
                    <img src=\"cid:logo\"></td></tr></table>";
        assert_eq!(without_fetching_elements(html), html);
    }

    #[test]
    fn html_the_rewriter_cannot_read_with_certainty_is_not_shown() {
        // Raw text inside foreign content: whether `<link>` is markup depends on the tree.
        let html = "<svg><style><link rel=prefetch href=https://t.example/x></style></svg>";
        let clean = without_fetching_elements(html);
        assert!(clean == UNREADABLE || !clean.contains("<link"), "{clean}");
    }
}
