//! The text alternative of an HTML-only message: what the HTML says, as plain text
//! (docs/decisions.md, "Messages every receiver authenticates").
//!
//! - No markup. Text inside `<script>`, `<style>`, `<title>`, `<textarea>` and comments is
//!   dropped; character references are decoded ([`decode`]); runs of white space (`&nbsp;`
//!   and other Unicode spaces included) become one space, as a browser shows them, except
//!   inside `<pre>`.
//! - Line breaks where a reader sees them: a blank line around paragraphs, headings, lists,
//!   tables and `<pre>`; a line break around other blocks (`<div>`, `<tr>`, `<li>`, ...) and
//!   at `<br>`; never more than one blank line in a row. List items start with `- ` (or
//!   `1. ` in an `<ol>`), indented by nesting; table cells are separated by a space.
//! - Links keep their target: `label (https://…)`; the target alone when the label is empty
//!   (an image link shows its `alt` as the label) and once when the label already is the
//!   address. Only http, https and mailto targets are written (mailto as the bare address);
//!   relative links and `#anchors` mean nothing in a text part.
//! - Invisible characters that templates use as preview padding (`&zwnj;`, zero-width space,
//!   soft hyphen, ...) are kept only between two visible characters, where they may matter
//!   (a zero-width joiner inside an emoji sequence).
//!
//! Bounded work on any input: lol_html tokenizes in one pass without building a tree (the
//! same streaming rewriter that adds tracking, run non-strict), and each handler here does
//! work proportional to the markup it is called for, so time and output are linear in the
//! input. Nothing depends on end tags being present or balanced: a missing `</a>` is closed
//! by the next link or the end of the document, a missing `</ul>` only deepens indentation
//! (capped). The conversion reads the HTML as the client sent it, before tracking, so the
//! text part never carries a tracking URL.

mod entities;

use std::cell::RefCell;
use std::rc::Rc;

use lol_html::html_content::{Element, TextType};
use lol_html::{RewriteStrSettings, doc_text, element, end, end_tag, rewrite_str};

/// The text of `html`, or `None` when it has no visible text (or, should lol_html ever
/// refuse an input, which it does not for any we know of when run non-strict, then too:
/// the message goes out without a text part rather than not at all).
pub fn text_from_html(html: &str) -> Option<String> {
    let writer = Rc::new(RefCell::new(Writer::default()));
    let (on_element, on_text, on_end) = (Rc::clone(&writer), Rc::clone(&writer), Rc::clone(&writer));
    let settings = RewriteStrSettings::new()
        .with_strict(false)
        .append_element_content_handler(element!("*", move |el| {
            start_tag(&on_element, el);
            Ok(())
        }))
        .append_document_content_handler(doc_text!(move |chunk| {
            if matches!(chunk.text_type(), TextType::Data | TextType::PlainText | TextType::CDataSection) {
                let mut writer = on_text.borrow_mut();
                writer.pending.push_str(chunk.as_str());
                if chunk.last_in_text_node() {
                    writer.flush_text();
                }
            }
            Ok(())
        }))
        .append_document_content_handler(end!(move |_| {
            let mut writer = on_end.borrow_mut();
            writer.flush_text();
            writer.close_link();
            Ok(())
        }));
    if let Err(e) = rewrite_str(html, settings) {
        tracing::warn!(error = %e, "no text part could be generated from the HTML part");
        return None;
    }
    let text = writer.borrow_mut().finish();
    (!text.is_empty()).then_some(text)
}

/// How an element breaks the flow of text.
#[derive(Clone, Copy)]
enum Flow {
    /// Inline: no break.
    Inline,
    /// A line break before and after.
    Line,
    /// A blank line before and after.
    Paragraph,
}

fn flow(tag: &str) -> Flow {
    match tag {
        "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "table" | "blockquote" | "pre" | "hr" | "dl" => Flow::Paragraph,
        "div" | "tr" | "li" | "dt" | "dd" | "section" | "article" | "header" | "footer" | "main" | "nav" | "aside"
        | "address" | "figure" | "figcaption" | "form" | "fieldset" | "legend" | "center" | "caption" | "tbody"
        | "thead" | "tfoot" | "details" | "summary" => Flow::Line,
        _ => Flow::Inline,
    }
}

/// Deepest list nesting that still indents further.
const MAX_INDENT_LEVELS: usize = 8;

fn start_tag(writer: &Rc<RefCell<Writer>>, el: &mut Element<'_, '_>) {
    let tag = el.tag_name();
    let mut w = writer.borrow_mut();
    // A tag ends the text node before it.
    w.flush_text();
    match (tag.as_str(), flow(&tag)) {
        ("br", _) => w.line_break(),
        ("a", _) => {
            w.close_link();
            let target = el.get_attribute("href").and_then(|href| link_target(&decode(&href)));
            w.flush_separators();
            w.link = Some(Link { start: w.out.len(), target });
        }
        ("img", _) => {
            if w.link.is_some()
                && let Some(alt) = el.get_attribute("alt")
            {
                w.space = true;
                w.push_text(&decode(&alt));
                w.space = true;
            }
        }
        ("td" | "th", _) => w.space = true,
        ("ul" | "ol", _) => {
            let breaks = if w.lists.is_empty() { 2 } else { 1 };
            w.block(breaks);
            w.lists.push(if tag == "ol" { List::Numbers(0) } else { List::Bullets });
        }
        ("li", _) => {
            w.block(1);
            w.list_marker();
        }
        (_, Flow::Inline) => {}
        (_, block) => {
            let breaks = if matches!(block, Flow::Paragraph) { 2 } else { 1 };
            w.block(breaks);
            if tag == "pre" {
                w.pre += 1;
            }
        }
    }
    drop(w);
    let Some(handlers) = el.end_tag_handlers() else { return };
    let writer = Rc::clone(writer);
    handlers.push(end_tag!(move |_| {
        let mut w = writer.borrow_mut();
        w.flush_text();
        match (tag.as_str(), flow(&tag)) {
            ("a", _) => w.close_link(),
            ("ul" | "ol", _) => {
                w.lists.pop();
                let breaks = if w.lists.is_empty() { 2 } else { 1 };
                w.block(breaks);
            }
            (_, Flow::Inline) => {}
            (_, block) => {
                w.block(if matches!(block, Flow::Paragraph) { 2 } else { 1 });
                if tag == "pre" {
                    w.pre = w.pre.saturating_sub(1);
                }
            }
        }
        Ok(())
    }));
}

/// What a link's target is written as: an http(s) URL as it is, a mailto address without
/// the scheme and query (control characters dropped from both); `None` for anything else.
fn link_target(href: &str) -> Option<String> {
    let href = href.trim();
    let scheme = href.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http" | "https") if href.len() > "http://".len() => {
            Some(href.chars().filter(|c| !c.is_control()).collect())
        }
        Some("mailto") => {
            let address = href["mailto:".len()..].split('?').next().unwrap_or("").trim();
            let address: String = address.chars().filter(|c| !c.is_control()).collect();
            (!address.is_empty()).then_some(address)
        }
        _ => None,
    }
}

/// An open `<a>`: where its label starts in the output, and its target.
struct Link {
    start: usize,
    target: Option<String>,
}

/// An open list and the number of its last item.
enum List {
    Bullets,
    Numbers(u32),
}

/// The text being written, with the separators it owes before the next word.
#[derive(Default)]
struct Writer {
    out: String,
    /// White space was seen since the last character written.
    space: bool,
    /// Line breaks owed before the next character (2: a blank line).
    breaks: u8,
    /// Invisible characters seen since the last visible one.
    invisible: String,
    /// Open `<pre>` elements.
    pre: usize,
    lists: Vec<List>,
    /// Where the last list marker ends in the output: a block that starts right after it
    /// (`<li><p>`) stays on the marker's line.
    marker_end: usize,
    link: Option<Link>,
    /// The raw text of the current text node so far: a character reference may straddle
    /// two chunks.
    pending: String,
}

impl Writer {
    fn flush_text(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let raw = std::mem::take(&mut self.pending);
        self.push_text(&decode(&raw));
    }

    /// Writes decoded text, collapsing white space outside `<pre>`.
    fn push_text(&mut self, text: &str) {
        for c in text.chars() {
            match c {
                '\r' if self.pre > 0 => {}
                '\n' if self.pre > 0 => self.line_break(),
                c if c.is_whitespace() && self.pre > 0 => {
                    self.flush_separators();
                    self.out.push(' ');
                }
                c if c.is_whitespace() => {
                    self.space = true;
                    self.invisible.clear();
                }
                c if is_invisible(c) => self.invisible.push(c),
                c if c.is_control() => {}
                c => {
                    let joined = !self.space && self.breaks == 0 && !self.out.is_empty() && !self.out.ends_with(' ');
                    self.flush_separators();
                    if joined {
                        self.out.push_str(&self.invisible);
                    }
                    self.invisible.clear();
                    self.out.push(c);
                }
            }
        }
    }

    /// Writes the separators owed: line breaks (never more than one blank line, none at the
    /// start), else one space (none at the start of a line).
    fn flush_separators(&mut self) {
        if self.out.is_empty() {
            (self.breaks, self.space) = (0, false);
            return;
        }
        if self.breaks > 0 {
            self.trim_trailing_spaces();
            let have = self.out.bytes().rev().take_while(|&b| b == b'\n').count();
            for _ in have..usize::from(self.breaks) {
                self.out.push('\n');
            }
            (self.breaks, self.space) = (0, false);
        } else if self.space {
            if !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
            self.space = false;
        }
    }

    fn trim_trailing_spaces(&mut self) {
        let kept = self.out.trim_end_matches(' ').len();
        self.out.truncate(kept);
    }

    /// Owes at least `breaks` line breaks before the next character; inside a list, where
    /// blank lines would pull an item apart, at most one.
    fn block(&mut self, breaks: u8) {
        self.invisible.clear();
        if self.marker_end == self.out.len() && self.marker_end > 0 {
            return;
        }
        let breaks = if self.lists.is_empty() { breaks } else { breaks.min(1) };
        self.breaks = self.breaks.max(breaks);
    }

    /// `<br>` (or a newline inside `<pre>`): one line break now, at most two in a row.
    fn line_break(&mut self) {
        self.flush_separators();
        self.invisible.clear();
        self.trim_trailing_spaces();
        if self.out.is_empty() || self.out.ends_with("\n\n") {
            return;
        }
        self.out.push('\n');
    }

    /// Starts a list item's line with its marker.
    fn list_marker(&mut self) {
        let depth = self.lists.len().clamp(1, MAX_INDENT_LEVELS);
        let marker = match self.lists.last_mut() {
            Some(List::Numbers(n)) => {
                *n = n.saturating_add(1);
                format!("{n}. ")
            }
            Some(List::Bullets) | None => "- ".to_owned(),
        };
        // A marker is written like text, so it also pays the line breaks owed.
        self.flush_separators();
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
        self.out.push_str(&"  ".repeat(depth - 1));
        self.out.push_str(&marker);
        self.marker_end = self.out.len();
    }

    /// Ends the open link, if any: writes its target after the label.
    fn close_link(&mut self) {
        let Some(Link { start, target: Some(target) }) = self.link.take() else { return };
        let label = self.out.get(start..).unwrap_or("").trim();
        let bare = target.split_once("://").map_or(target.as_str(), |(_, rest)| rest);
        if label == target || label == bare || label.trim_end_matches('/') == bare.trim_end_matches('/') {
            return;
        }
        let unlabelled = label.is_empty();
        let (owed_breaks, owed_space) = (std::mem::take(&mut self.breaks), self.space);
        self.space = true;
        self.flush_separators();
        if unlabelled {
            self.out.push_str(&target);
        } else {
            self.out.push('(');
            self.out.push_str(&target);
            self.out.push(')');
        }
        (self.breaks, self.space) = (owed_breaks, owed_space);
    }

    /// The text, each line without trailing white space, never two blank lines in a row,
    /// without white space at either end.
    fn finish(&mut self) -> String {
        let mut text = String::with_capacity(self.out.len());
        for line in self.out.trim().split('\n').map(str::trim_end) {
            if !(line.is_empty() && text.ends_with("\n\n")) {
                text.push_str(line);
                text.push('\n');
            }
        }
        text.truncate(text.trim_end().len());
        text
    }
}

/// Characters that show nothing on their own and that templates repeat as padding.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{ad}' | '\u{34f}' | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}')
}

/// `text` with its character references decoded: the named ones of [`entities`] (with their
/// `;`) and numeric ones, which HTML reads as Windows-1252 in 128–159 and as U+FFFD when out
/// of range, a surrogate or NUL. Anything else is kept as written.
pub(crate) fn decode(text: &str) -> std::borrow::Cow<'_, str> {
    crate::tracking::html::decode_references(text, reference)
}

/// The character `text` (starting with `&`) refers to, and the reference's length.
fn reference(text: &str) -> Option<(char, usize)> {
    // The longest names are 8 characters (`&thetasym;`); numbers are cut at 10 digits.
    let end = text.char_indices().take(14).find(|&(_, c)| c == ';')?.0;
    let name = &text[1..end];
    let c = match name.strip_prefix('#') {
        None => {
            let at = entities::ENTITIES.binary_search_by(|(n, _)| n.as_bytes().cmp(name.as_bytes())).ok()?;
            entities::ENTITIES[at].1
        }
        Some(number) => {
            let (digits, radix) = match number.strip_prefix(['x', 'X']) {
                Some(hex) => (hex, 16),
                None => (number, 10),
            };
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            let code = u32::from_str_radix(digits, radix).unwrap_or(u32::MAX);
            numeric(code)
        }
    };
    Some((c, end + 1))
}

/// The character a numeric reference stands for, as HTML reads it.
fn numeric(code: u32) -> char {
    const WINDOWS_1252: [char; 32] = [
        '\u{20ac}', '\u{81}', '\u{201a}', '\u{192}', '\u{201e}', '\u{2026}', '\u{2020}', '\u{2021}', '\u{2c6}',
        '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8d}', '\u{17d}', '\u{8f}', '\u{90}', '\u{2018}', '\u{2019}',
        '\u{201c}', '\u{201d}', '\u{2022}', '\u{2013}', '\u{2014}', '\u{2dc}', '\u{2122}', '\u{161}', '\u{203a}',
        '\u{153}', '\u{9d}', '\u{17e}', '\u{178}',
    ];
    match code {
        0 => char::REPLACEMENT_CHARACTER,
        0x80..=0x9f => WINDOWS_1252[(code - 0x80) as usize],
        _ => char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
    }
}

#[cfg(test)]
#[path = "html_text_tests.rs"]
mod tests;
