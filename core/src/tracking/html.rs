//! Puts tracking into an HTML part, with lol_html (a streaming rewriter: the markup around
//! what we change is copied byte for byte, however malformed).
//!
//! - Clicks: the `href` of every `<a>` and `<area>` whose value (entities decoded, whitespace
//!   trimmed) is an http or https URL of at most [`MAX_TRACKED_URL_BYTES`] becomes
//!   `{public_url}/t/c/{token}`. `mailto:`, `#anchors`, relative and other schemes stay as
//!   written, and so does any link carrying `data-tidings-notrack`; that attribute is ours,
//!   so it is removed from every link on the way out.
//! - Opens: a 1×1 `<img>` of `{public_url}/t/o/{token}`, just before the first `</body>`,
//!   or at the end when there is none.
//!
//! [`MAX_TRACKED_URL_BYTES`]: super::MAX_TRACKED_URL_BYTES

use std::borrow::Cow;
use std::cell::Cell;
use std::rc::Rc;

use lol_html::html_content::{ContentType, Element};
use lol_html::{RewriteStrSettings, element, end, end_tag, rewrite_str};

use super::{TrackedUrl, TrackingConfig};
use crate::ids::{MessageId, WorkspaceId};
use crate::model::MessageTracking;

/// The attribute that keeps a link untracked.
pub const NOTRACK_ATTRIBUTE: &str = "data-tidings-notrack";

/// `html` with the tracking `tracking` asks for, signed for `message` of `workspace` (and for
/// the copy of `recipient`, by position, on a message with a recipient list).
/// Returns `html` unchanged when it asks for none. Should the rewriter ever fail (it does
/// not on any input we know of: it is run non-strict, without memory limits), the part is
/// sent untracked rather than not at all, and a warning is logged.
pub fn rewrite_html(
    html: &str,
    config: &TrackingConfig,
    workspace: WorkspaceId,
    message: MessageId,
    recipient: Option<u8>,
    tracking: MessageTracking,
) -> String {
    if !tracking.opens && !tracking.clicks {
        return html.to_owned();
    }
    let links = element!("a, area", |el| {
        rewrite_link(el, tracking.clicks.then_some((config, workspace, message, recipient)));
        Ok(())
    });
    let mut settings = RewriteStrSettings::new().with_strict(false).append_element_content_handler(links);
    if tracking.opens {
        let pixel = pixel(&config.public_url.open_url(&config.key.sign_open(workspace, message, recipient)));
        let placed = Rc::new(Cell::new(false));
        let (body_pixel, body_placed) = (pixel.clone(), Rc::clone(&placed));
        let body = element!("body", move |el| {
            if let Some(handlers) = el.end_tag_handlers() {
                let (pixel, placed) = (body_pixel.clone(), Rc::clone(&body_placed));
                handlers.push(end_tag!(move |end| {
                    if !placed.replace(true) {
                        end.before(&pixel, ContentType::Html);
                    }
                    Ok(())
                }));
            }
            Ok(())
        });
        let at_end = end!(move |end| {
            if !placed.get() {
                end.append(&pixel, ContentType::Html);
            }
            Ok(())
        });
        settings = settings.append_element_content_handler(body).append_document_content_handler(at_end);
    }
    match rewrite_str(html, settings) {
        Ok(rewritten) => rewritten,
        Err(e) => {
            tracing::warn!(%message, error = %e, "tracking could not be added to the HTML part; it is sent untracked");
            html.to_owned()
        }
    }
}

/// Rewrites one link for `signing` (`None`: clicks are not tracked) and strips our opt-out
/// attribute.
fn rewrite_link(el: &mut Element<'_, '_>, signing: Option<(&TrackingConfig, WorkspaceId, MessageId, Option<u8>)>) {
    if el.has_attribute(NOTRACK_ATTRIBUTE) {
        el.remove_attribute(NOTRACK_ATTRIBUTE);
        return;
    }
    let Some((config, workspace, message, recipient)) = signing else { return };
    // lol_html hands attribute values over raw: `&amp;` in the source is `&` in the URL.
    let Some(url) = el.get_attribute("href").and_then(|raw| TrackedUrl::parse(&decode_entities(&raw))) else {
        return;
    };
    let tracked = config.public_url.click_url(&config.key.sign_click(workspace, message, recipient, &url));
    // "href" is a valid attribute name, the only way this could fail.
    let _ = el.set_attribute("href", &tracked);
}

/// The pixel: hidden, sized and bordered so that no client lays out a visible box.
fn pixel(src: &str) -> String {
    format!(
        r#"<img src="{src}" width="1" height="1" alt="" style="display:none;width:1px;height:1px;border:0;margin:0;padding:0">"#
    )
}

/// Decodes the character references a URL in an attribute may hold: `&amp;` `&lt;` `&gt;`
/// `&quot;` `&apos;` and numeric ones (`&#39;`, `&#x26;`). Anything else, including a
/// reference without its `;` (which HTML does not decode inside attribute values either when
/// it looks like `&copy=2` in a query string), is kept as written.
pub fn decode_entities(text: &str) -> Cow<'_, str> {
    decode_references(text, reference)
}

/// `text` with every `&` that `reference` recognizes replaced by the character it names;
/// `reference` gets the rest of the text from that `&` and answers the character and how many
/// bytes the reference takes, or `None` to keep the `&` as written. Shared with the text part
/// made from HTML (`outbound::html_text`), which knows more references than an attribute does.
pub(crate) fn decode_references(text: &str, reference: impl Fn(&str) -> Option<(char, usize)>) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match reference(rest) {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The character `text` (starting with `&`) refers to, and the reference's length.
fn reference(text: &str) -> Option<(char, usize)> {
    // The longest reference we decode is `&#x10FFFF;` or `&#1114111;` (10 bytes).
    let end = text.char_indices().take(12).find(|&(_, c)| c == ';')?.0;
    let name = &text[1..end];
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                    u32::from_str_radix(hex, 16).ok()?
                }
                Some(_) => return None,
                None if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()) => number.parse().ok()?,
                None => return None,
            };
            char::from_u32(code).filter(|&c| c != '\0')?
        }
    };
    Some((c, end + 1))
}

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
