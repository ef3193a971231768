//! `strippedTextReply`: the new part of a reply, without the history it quotes.
//!
//! The text is cut at the first line that starts the quoted history or the signature, then
//! the quoted and blank lines left at its end are removed:
//!
//! 1. A reply header: a line that starts with `On ` and ends with `wrote:` (English), starts
//!    with `Le ` and ends with `a écrit :` or `a écrit:` (French), starts with `Am ` and
//!    ends with `schrieb:` or holds ` schrieb ` and ends with `:` (German), starts with
//!    `El ` and ends with `escribió:` (Spanish); or two consecutive lines that together
//!    do (clients wrap a long header, GitHub's email_reply_parser misses that case).
//! 2. A separator: `-----Original Message-----` (any number of dashes, any case, Outlook),
//!    or a line of 20 or more underscores (Outlook's rule) when the next non-blank line
//!    starts a header block as in 3.
//! 3. A header block of a quoted message (Outlook, and clients copying its form): a line
//!    starting with `From:` (or `*From:*`, `De :`, `De:`, `Von:`) with a `Sent:` or `Date:`
//!    line (`*Sent:*`, `Envoyé :`, `Gesendet:`, `Enviado:`, `Datum:`) among the next four.
//!    Not when the line before it (blank lines aside) announces a forwarded message
//!    (`Forwarded message`, `Begin forwarded message:`): a forward's headers and text are
//!    its content.
//! 4. The signature delimiter `-- ` (RFC 3676 §4.3), also without its trailing space, which
//!    many clients drop.
//! 5. Then quoted lines (starting with `>`, after any indentation) and blank lines at the
//!    end are removed. Quoted lines between new ones (an interleaved answer) are kept: the
//!    answer means nothing without them.
//!
//! Lines are compared after trimming white space (a CR included), case-insensitively for
//! the separators. Lines over 1,000 bytes are never headers (no client writes one).
//! The result is always a prefix of the input with trailing white space removed, so it
//! is never longer, and stripping it again changes nothing; a text that is all quote gives
//! an empty string. Postmark's StrippedTextReply serves the same purpose but its rules are
//! not published. Unlike GitHub's email_reply_parser, there is no rule for `-`/`_` lines
//! other than those above (a list written with dashes is not a signature).

/// Longest line considered as a reply header or separator.
const MAX_HEADER_LINE: usize = 1_000;
/// Lines after a `From:` line searched for its `Sent:`/`Date:` line.
const HEADER_BLOCK_LINES: usize = 4;

/// The new text of a reply `text`: see the module documentation for the rules.
pub fn strip_reply(text: &str) -> String {
    // Byte offset of each line's start and the line without its line ending.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        lines.push((start, line.trim()));
        start += line.len();
    }
    let cut = (0..lines.len()).find(|&i| starts_history(&lines, i)).unwrap_or(lines.len());
    let mut keep = cut;
    while keep > 0 && (lines[keep - 1].1.is_empty() || lines[keep - 1].1.starts_with('>')) {
        keep -= 1;
    }
    let end = lines.get(keep).map_or(text.len(), |(at, _)| *at);
    text[..end].trim_end().to_owned()
}

/// Whether line `i` of `lines` starts the quoted history or the signature.
fn starts_history(lines: &[(usize, &str)], i: usize) -> bool {
    let line = lines[i].1;
    if line.len() > MAX_HEADER_LINE {
        return false;
    }
    if is_signature(line) || is_original_message(line) || is_reply_header(line) {
        return true;
    }
    if let Some((_, next)) = lines.get(i + 1)
        && !line.is_empty()
        && !next.is_empty()
        && next.len() <= MAX_HEADER_LINE
        && starts_reply_header(line)
        && is_reply_header(&format!("{line} {next}"))
    {
        return true;
    }
    if is_header_block(lines, i) && !after_forward_marker(lines, i) {
        return true;
    }
    if line.len() >= 20 && line.bytes().all(|b| b == b'_') {
        return lines[i + 1..]
            .iter()
            .position(|(_, l)| !l.is_empty())
            .is_some_and(|at| is_header_block(lines, i + 1 + at));
    }
    false
}

fn is_signature(line: &str) -> bool {
    line == "--"
}

fn is_original_message(line: &str) -> bool {
    let inner = line.trim_matches('-').trim();
    line.starts_with("--") && line.ends_with("--") && inner.eq_ignore_ascii_case("original message")
}

/// A line that opens a reply header in one of the languages (the first half of a wrapped one).
fn starts_reply_header(line: &str) -> bool {
    ["On ", "Le ", "Am ", "El "].iter().any(|p| line.starts_with(p))
}

fn is_reply_header(line: &str) -> bool {
    (line.starts_with("On ") && line.ends_with("wrote:"))
        || (line.starts_with("Le ") && (line.ends_with("a écrit :") || line.ends_with("a écrit:")))
        || (line.starts_with("Am ")
            && (line.ends_with("schrieb:") || (line.contains(" schrieb ") && line.ends_with(':'))))
        || (line.starts_with("El ") && line.ends_with("escribió:"))
}

/// The last non-blank line before `i` announces a forwarded message (Gmail's
/// `---------- Forwarded message ---------`, Apple Mail's `Begin forwarded message:`): the
/// header block that follows is the content being forwarded, not quoted history.
fn after_forward_marker(lines: &[(usize, &str)], i: usize) -> bool {
    lines[..i].iter().rev().find(|(_, l)| !l.is_empty()).is_some_and(|(_, l)| {
        let lower = l.to_lowercase();
        lower.contains("forwarded message") && l.len() <= MAX_HEADER_LINE
    })
}

/// Line `i` is a `From:` line followed by a `Sent:`/`Date:` line within a few lines.
fn is_header_block(lines: &[(usize, &str)], i: usize) -> bool {
    const FROM: [&str; 5] = ["From:", "*From:*", "De :", "De:", "Von:"];
    const SENT: [&str; 8] = ["Sent:", "*Sent:*", "Date:", "*Date:*", "Envoyé :", "Gesendet:", "Enviado:", "Datum:"];
    let starts = |line: &str, prefixes: &[&str]| prefixes.iter().any(|p| line.starts_with(p));
    starts(lines[i].1, &FROM)
        && lines[i + 1..].iter().take(HEADER_BLOCK_LINES).any(|(_, l)| l.len() <= MAX_HEADER_LINE && starts(l, &SENT))
}
