//! The message HTML as the preview serves it: the mail's own markup, less what would make
//! the browser reach out by itself although only images may (`?images=1`), as a document of
//! its own ([`framed_document`]) that a page frames in `<iframe sandbox>`. Mail sent
//! (`/messages/{id}/html`) and mail received (`/inbound/{id}/html`) are served alike.
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

use axum::body::Bytes;
use axum::http::HeaderValue;
use axum::http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use lol_html::{RewriteStrSettings, element, rewrite_str};
use maud::{Markup, html};

use crate::error::PageResult;
use crate::held_body::{self, busy, owner};
use crate::session::Viewer;
use crate::{DashboardState, MESSAGE_HTML_CSP, MESSAGE_HTML_IMAGES_CSP};

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

/// `html` as the preview frame's document: sandboxed and under [`MESSAGE_HTML_CSP`] (or
/// [`MESSAGE_HTML_IMAGES_CSP`] when `images`), without the elements that connect out by
/// themselves ([`without_fetching_elements`]). The copy made for the answer counts in the
/// workspace's share of the memory budget until it is sent (or its stream dropped): streams
/// that are never read end in 503s, not in a copy each.
pub(crate) fn framed_document(
    state: &DashboardState,
    viewer: &Viewer,
    html: &str,
    images: bool,
) -> PageResult<Response> {
    let body = Bytes::from(without_fetching_elements(html));
    let claim = state.budget.hold(owner(viewer), body.len()).map_err(|_| busy(viewer))?;
    let mut response = held_body::bytes(body, claim).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    let policy = if images { MESSAGE_HTML_IMAGES_CSP } else { MESSAGE_HTML_CSP };
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
    // Anchors' host names are not looked up ahead of a click (browsers that honour it).
    headers.insert("x-dns-prefetch-control", HeaderValue::from_static("off"));
    Ok(response)
}

/// The frame of the page at `page` (`/messages/{id}`) that shows its `page/html` document
/// ([`framed_document`]): `iframe#preview` with an empty `sandbox` (no script, no origin, no
/// forms, no popups), and, until `images`, the link that loads remote images (`a#load-images`:
/// the page again with `?images=1`, or with the script only the frame).
pub(crate) fn frame(page: &str, images: bool) -> Markup {
    let frame = if images { format!("{page}/html?images=1") } else { format!("{page}/html") };
    html! {
        @if !images {
            p.muted {
                "Remote images are blocked. "
                a #load-images href={ (page) "?images=1" } data-frame-src={ (page) "/html?images=1" } { "Load remote images" }
            }
        }
        iframe #preview sandbox="" src=(frame) title="The message's HTML, without scripts" referrerpolicy="no-referrer" loading="lazy" {}
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
