//! Puts tracking into an HTML part, with lol_html (a streaming rewriter: the markup around
//! what we change is copied byte for byte, however malformed).
//!
//! - Clicks: the `href` of every `<a>` and `<area>` whose value (entities decoded, whitespace
//!   trimmed) is an http or https URL of at most [`MAX_TRACKED_URL_BYTES`] becomes
//!   `{public_url}/t/c/{token}`. `mailto:`, `#anchors`, relative and other schemes stay as
//!   written, and so does any link carrying `data-tidings-notrack`; that attribute is ours,
//!   so it is removed from every link on the way out.
//! - Opens: a 1×1 pixel of `{public_url}/t/o/{token}`, just before the first `</body>`, or
//!   at the end when there is none: the last thing in the body, where filters expect it.
//!   Never hidden with `display:none` (it used to be): SpamAssassin counts invisible-style
//!   markup (`__STY_INVIS`) towards several spam rules, and a 1×1 pixel without a border
//!   shows nothing anyway. Its form ([`OpenPixel::for_html`]) depends on the part, because
//!   SpamAssassin scores any `<img>` in an HTML part of at most 3,200 characters as image
//!   spam (`HTML_IMAGE_ONLY_04` … `_32`, 0.6 to 2.8 points with local rules, whatever the
//!   image's size):
//!   - an `<img width="1" height="1" alt="" border="0">` when the part has images of its own
//!     (those rules judge the sender's markup then, pixel or not) or is longer than that
//!     with the pixel;
//!   - otherwise a 1×1 table cell with the pixel as its `background`, which mail programs
//!     load like an image (Outlook for Windows does not: it misses opens of such short
//!     parts) and which is no `<img>` to those rules (docs/deliverability.md has the
//!     scores of each form).
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
    let images = Rc::new(Cell::new(0usize));
    let counted = Rc::clone(&images);
    let links = element!("a, area", |el| {
        rewrite_link(el, tracking.clicks.then_some((config, workspace, message, recipient)));
        Ok(())
    });
    let img = element!("img", move |_| {
        counted.set(counted.get() + 1);
        Ok(())
    });
    let settings = RewriteStrSettings::new()
        .with_strict(false)
        .append_element_content_handler(links)
        .append_element_content_handler(img);
    let linked = match rewrite_str(html, settings) {
        Ok(rewritten) => rewritten,
        Err(e) => {
            tracing::warn!(%message, error = %e, "tracking could not be added to the HTML part; it is sent untracked");
            return html.to_owned();
        }
    };
    if !tracking.opens {
        return linked;
    }
    let src = config.public_url.open_url(&config.key.sign_open(workspace, message, recipient));
    let pixel = OpenPixel::for_html(&linked, images.get(), &src).markup(&src);
    match with_pixel(&linked, &pixel) {
        Ok(tracked) => tracked,
        Err(e) => {
            tracing::warn!(%message, error = %e, "the open pixel could not be added to the HTML part; it is sent without");
            linked
        }
    }
}

/// Most characters of an HTML part in which SpamAssassin scores an `<img>` as image spam
/// (`HTML_IMAGE_ONLY_32` ends there; the raw HTML, markup included, is measured).
pub const IMAGE_ONLY_HTML_CHARS: usize = 3200;

/// The form of the open pixel (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenPixel {
    /// `<img width="1" height="1" alt="" border="0">`.
    Image,
    /// A 1×1 table cell whose `background` is the pixel.
    CellBackground,
}

impl OpenPixel {
    /// The form for `html` (the part with its links rewritten), holding `images` `<img>`
    /// elements of its own, and the pixel URL `src`: an image when the part has some, or when
    /// with an image pixel it is longer than [`IMAGE_ONLY_HTML_CHARS`]; a cell background
    /// otherwise.
    pub fn for_html(html: &str, images: usize, src: &str) -> Self {
        // Counted in characters, as SpamAssassin measures decoded text; the pixel's markup is
        // ASCII, so its bytes are its characters.
        let with_image = html.chars().count() + Self::Image.markup(src).len();
        if images > 0 || with_image > IMAGE_ONLY_HTML_CHARS { Self::Image } else { Self::CellBackground }
    }

    /// The markup of this form for the pixel URL `src` (which holds no `"`: it is our URL
    /// with a base64url token).
    pub fn markup(self, src: &str) -> String {
        match self {
            Self::Image => format!(r#"<img src="{src}" width="1" height="1" alt="" border="0">"#),
            Self::CellBackground => format!(
                r#"<table role="presentation" width="1" height="1" cellpadding="0" cellspacing="0" border="0"><tr><td background="{src}" width="1" height="1"></td></tr></table>"#
            ),
        }
    }
}

/// `html` with `pixel` just before the first `</body>`, or at the end when there is none.
fn with_pixel(html: &str, pixel: &str) -> Result<String, lol_html::errors::RewritingError> {
    let placed = Rc::new(Cell::new(false));
    let (body_pixel, body_placed) = (pixel.to_owned(), Rc::clone(&placed));
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
    let end_pixel = pixel.to_owned();
    let at_end = end!(move |end| {
        if !placed.get() {
            end.append(&end_pixel, ContentType::Html);
        }
        Ok(())
    });
    let settings = RewriteStrSettings::new()
        .with_strict(false)
        .append_element_content_handler(body)
        .append_document_content_handler(at_end);
    rewrite_str(html, settings)
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
