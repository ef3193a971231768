//! A linear pre-pass over a template source that mirrors just enough of the Handlebars
//! grammar (handlebars 6's `grammar.pest`) to find its tags, blocks and literal text before
//! the real parser sees the source. It exists because that parser cannot be trusted with
//! arbitrary input:
//!
//! - handlebars turns the parse tree into a template recursively, one stack frame per
//!   nested subexpression (and renders and drops templates one frame per nested block), so
//!   `((((...` or 10,000 nested `{{#if}}` overflow the stack and abort the process. The scan
//!   counts nesting and refuses it past the limits first.
//! - handlebars computes every node's line and column by rescanning the source from its
//!   start, which makes compiling quadratic. The scan finds where the source can be cut into
//!   pieces that compile separately (see `compile.rs`).
//! - It refuses what we do not support (partials, decorators, raw blocks) with a position,
//!   and notes likely causes of a syntax error (an unclosed tag or block) for a better message.
//!
//! Where the mirror could disagree with the real grammar (a quote inside `[...]`, object
//! literals `{...}` in a tag), the source is refused rather than guessed about.

use std::ops::Range;

use super::{MAX_BLOCK_DEPTH, MAX_NESTING, MAX_SUBEXPRESSION_DEPTH, MAX_TAGS};

/// Literal text shorter than this is left to the parser: parsing a placeholder tag costs
/// about as much as parsing this much text.
const MIN_LITERAL: usize = 256;

/// What the scan found.
#[derive(Debug)]
pub(super) struct Scan {
    /// Section 0 is the whole template; each block adds one section per branch (the body,
    /// and each `{{else}}`), in the order they start.
    pub(super) sections: Vec<Section>,
    /// The likeliest cause of a syntax error, if the source has one.
    pub(super) hint: Option<Hint>,
}

/// The content of the template or of one branch of a block, at its own nesting level.
#[derive(Debug)]
pub(super) struct Section {
    /// From the end of the tag that opens the branch to the start of the tag that ends it.
    pub(super) extent: Range<usize>,
    /// The branches of the blocks directly inside this one, in order.
    pub(super) children: Vec<usize>,
    /// Where the section's text can be cut (see [`Cut`]); ascending.
    pub(super) cuts: Vec<Cut>,
    /// Literal text (no escapes, no braces) between two of the cuts, which needs no parsing.
    /// Ascending.
    pub(super) literals: Vec<Range<usize>>,
}

/// An offset in the text between tags where the source can be split into two parts that
/// compile, separately, to what the whole compiles to: nothing in handlebars' whitespace
/// handling (`{{~`, `~}}`, standalone block lines) looks across it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    /// The offset.
    pub(super) at: usize,
    /// Whether it is just after a `\n` (else it is between two non-whitespace characters,
    /// which stop every trim and make the line non-standalone on both sides).
    pub(super) after_newline: bool,
}

/// A likely cause of a syntax error, found by the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hint {
    /// A `{{` at this offset is not closed by `}}`.
    UnclosedTag(usize),
    /// A `{{/...}}` at this offset closes no block.
    StrayClose(usize),
    /// A block opened at this offset is never closed.
    UnclosedBlock {
        /// Offset of the `{{#`.
        at: usize,
        /// The block helper's name.
        name: String,
    },
}

/// Why the scan refused the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ScanError {
    /// A construct we do not support, at this offset.
    Unsupported {
        /// Offset of the tag.
        at: usize,
        /// What it is, for the message.
        what: &'static str,
    },
    /// Nesting or size past a limit, at this offset.
    TooComplex {
        /// Offset of the tag that went over.
        at: usize,
        /// Which limit.
        reason: String,
    },
}

struct OpenBlock {
    at: usize,
    name: String,
    /// `{{else if ...}}` links so far: each nests the rest of the chain one level deeper.
    links: usize,
    /// The section the block is in.
    parent: usize,
}

/// What a tag does to the structure.
enum TagKind {
    Open(String),
    Else { link: bool },
    Close,
    Other,
}

struct Scanner<'a> {
    src: &'a str,
    b: &'a [u8],
    sections: Vec<Section>,
    current: usize,
    hint: Option<Hint>,
    open: Vec<OpenBlock>,
    /// Blocks plus links currently open: the depth the compiled template will have here.
    nesting: usize,
    tags: usize,
}

/// Scans `src` (see the module doc).
pub(super) fn scan(src: &str) -> Result<Scan, ScanError> {
    let root = Section { extent: 0..src.len(), children: Vec::new(), cuts: Vec::new(), literals: Vec::new() };
    let mut s = Scanner {
        src,
        b: src.as_bytes(),
        sections: vec![root],
        current: 0,
        hint: None,
        open: Vec::new(),
        nesting: 0,
        tags: 0,
    };
    s.run()?;
    Ok(Scan { sections: s.sections, hint: s.hint })
}

impl Scanner<'_> {
    fn run(&mut self) -> Result<(), ScanError> {
        let b = self.b;
        let mut text_start = 0;
        // Whether a `~}}` is still in force. handlebars keeps trimming the start of every text,
        // and dropping whitespace between tags, until the next tag other than a comment.
        let mut trimming = false;
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => {
                    // grammar: `\{{` (and `\{{{{`) is literal text, but two or more
                    // backslashes before `{{` are literal and the tag is real.
                    let n = b[i..].iter().take_while(|&&c| c == b'\\').count();
                    if n == 1 && b[i + 1..].starts_with(b"{{") {
                        i += 3;
                        if b[i..].starts_with(b"{{") {
                            i += 2;
                        }
                    } else {
                        i += n;
                    }
                }
                b'{' if b.get(i + 1) == Some(&b'{') => {
                    let trims_before = trims_before(b, i);
                    self.text(text_start..i, trimming, trims_before);
                    let (end, trims) = self.tag(i)?;
                    trimming = trims.unwrap_or(trimming);
                    (i, text_start) = (end, end);
                }
                _ => i += 1,
            }
        }
        self.text(text_start..b.len(), trimming, false);
        if let Some(block) = self.open.first() {
            self.hint.get_or_insert(Hint::UnclosedBlock { at: block.at, name: block.name.clone() });
        }
        Ok(())
    }

    /// Records the cuts in a stretch of text between tags. `trimming`: a `~}}` before it is in
    /// force; `trims_before`: the tag after it starts with `{{~`.
    fn text(&mut self, range: Range<usize>, trimming: bool, trims_before: bool) {
        if range.is_empty() || trimming {
            // A piece compiled apart would start without the trim (nor would the text after
            // a placeholder, which is a tag and ends it).
            return;
        }
        let text = &self.src[range.clone()];
        let mut literals: Vec<Range<usize>> = Vec::new();
        let mut first_solid_cut = None;
        // Within each run free of `\`, `{` and `}` (which could change what a neighbouring
        // placeholder tag means), literal text runs from the first to the last boundary with
        // a non-whitespace character on both sides.
        let mut first: Option<usize> = None;
        let mut last: Option<usize> = None;
        let mut prev_solid = false;
        for (offset, c) in text.char_indices().chain(std::iter::once((text.len(), '\\'))) {
            if matches!(c, '\\' | '{' | '}') {
                if let (Some(p), Some(q)) = (first, last)
                    && q >= p + MIN_LITERAL
                {
                    literals.push(range.start + p..range.start + q);
                }
                (first, last, prev_solid) = (None, None, false);
                continue;
            }
            let solid = !c.is_whitespace();
            if solid && prev_solid {
                first.get_or_insert(offset);
                first_solid_cut.get_or_insert(range.start + offset);
                last = Some(offset);
            }
            prev_solid = solid;
        }

        let mut cuts: Vec<Cut> = Vec::new();
        if literals.is_empty() {
            cuts.extend(first_solid_cut.map(|at| Cut { at, after_newline: false }));
        } else {
            for literal in &literals {
                cuts.push(Cut { at: literal.start, after_newline: false });
                cuts.push(Cut { at: literal.end, after_newline: false });
            }
        }
        // After a newline, unless a `{{~` trim would reach back across it through whitespace.
        let newline = text.rmatch_indices('\n').map(|(n, _)| n + 1).find(|&n| {
            let at = range.start + n;
            !literals.iter().any(|l| l.start < at && at < l.end)
        });
        if let Some(n) = newline
            && (!trims_before || text[n..].chars().any(|c| !c.is_whitespace()))
        {
            cuts.push(Cut { at: range.start + n, after_newline: true });
        }
        cuts.sort_by_key(|cut| cut.at);

        let section = &mut self.sections[self.current];
        section.cuts.extend(cuts);
        section.literals.extend(literals);
    }

    /// Scans the tag starting with `{{` at `k`; returns the offset after it and, unless it
    /// is a comment, whether it ends with `~}}`.
    fn tag(&mut self, k: usize) -> Result<(usize, Option<bool>), ScanError> {
        let b = self.b;
        self.tags += 1;
        if self.tags > MAX_TAGS {
            return Err(ScanError::TooComplex { at: k, reason: format!("more than {MAX_TAGS} tags") });
        }
        if b[k + 2..].starts_with(b"{{") {
            return Err(ScanError::Unsupported { at: k, what: "raw blocks ({{{{raw}}}})" });
        }
        if b.get(k + 2) == Some(&b'!') {
            return Ok((self.comment(k), None));
        }
        let mut j = skip_ws(b, k + 2);
        if b.get(j) == Some(&b'~') {
            j = skip_ws(b, j + 1);
        }
        let triple = b[k + 2..].starts_with(b"{");
        let kind = match b.get(j) {
            Some(b'#') => {
                j = skip_ws(b, j + 1);
                match b.get(j) {
                    Some(b'>') => return Err(unsupported_partial(k)),
                    Some(b'*') => return Err(unsupported_decorator(k)),
                    _ => TagKind::Open(self.name_at(j)),
                }
            }
            Some(b'/') => TagKind::Close,
            Some(b'>') => return Err(unsupported_partial(k)),
            Some(b'*') => return Err(unsupported_decorator(k)),
            Some(b'^') => TagKind::Else { link: self.is_link(j + 1) },
            _ if b[j..].starts_with(b"else") => TagKind::Else { link: self.is_link(j + 4) },
            Some(b'{') => {
                // `{{{x}}}` and `{{ {x} }}`: this brace is not an object literal.
                j += 1;
                TagKind::Other
            }
            _ => TagKind::Other,
        };
        let mut end = self.interior(k, j)?;
        let trims_after = b[..end.saturating_sub(2)].iter().rev().find(|c| !c.is_ascii_whitespace()) == Some(&b'~');
        if triple && b.get(end) == Some(&b'}') {
            // `{{{x}}}` ends with three braces.
            end += 1;
        }
        self.structure(k, end, kind)?;
        Ok((end, Some(trims_after)))
    }

    fn name_at(&self, j: usize) -> String {
        let len = self.b[j..]
            .iter()
            .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'$' | b':') || c >= 0x80)
            .count();
        // Non-ASCII bytes are taken whole, so the name ends at a char boundary.
        self.src[j..j + len].to_owned()
    }

    /// Whether `{{else` / `{{^` continues with a helper (`{{else if x}}`), from `j`.
    fn is_link(&self, j: usize) -> bool {
        // Counting an odd tag such as `{{elsewhere}}` as a link only overestimates.
        let j = skip_ws(self.b, j);
        !(self.b.get(j) == Some(&b'~') || self.b[j..].starts_with(b"}}"))
    }

    /// Applies a tag from `k` to `end` to the block structure and nesting limits.
    fn structure(&mut self, k: usize, end: usize, kind: TagKind) -> Result<(), ScanError> {
        match kind {
            TagKind::Open(name) => {
                let section = self.new_section(end, self.current);
                self.open.push(OpenBlock { at: k, name, links: 0, parent: self.current });
                self.current = section;
                self.nesting += 1;
                if self.open.len() > MAX_BLOCK_DEPTH {
                    return Err(ScanError::TooComplex {
                        at: k,
                        reason: format!("more than {MAX_BLOCK_DEPTH} nested blocks"),
                    });
                }
                self.check_nesting(k)
            }
            TagKind::Else { link } => {
                let Some(parent) = self.open.last().map(|block| block.parent) else { return Ok(()) };
                self.sections[self.current].extent.end = k;
                self.current = self.new_section(end, parent);
                if link && let Some(block) = self.open.last_mut() {
                    block.links += 1;
                    self.nesting += 1;
                    return self.check_nesting(k);
                }
                Ok(())
            }
            TagKind::Close => {
                match self.open.pop() {
                    Some(block) => {
                        self.sections[self.current].extent.end = k;
                        self.current = block.parent;
                        self.nesting -= 1 + block.links;
                    }
                    None => {
                        self.hint.get_or_insert(Hint::StrayClose(k));
                    }
                }
                Ok(())
            }
            TagKind::Other => Ok(()),
        }
    }

    fn new_section(&mut self, start: usize, parent: usize) -> usize {
        let id = self.sections.len();
        self.sections.push(Section {
            extent: start..self.src.len(),
            children: Vec::new(),
            cuts: Vec::new(),
            literals: Vec::new(),
        });
        self.sections[parent].children.push(id);
        id
    }

    fn check_nesting(&self, k: usize) -> Result<(), ScanError> {
        if self.nesting > MAX_NESTING {
            return Err(ScanError::TooComplex {
                at: k,
                reason: format!("more than {MAX_NESTING} levels of nested blocks and {{{{else if}}}} branches"),
            });
        }
        Ok(())
    }

    /// `{{!-- ... --}}` or `{{! ... }}` starting at `k`; returns the offset after it.
    fn comment(&mut self, k: usize) -> usize {
        let b = self.b;
        let j = skip_ws(b, k + 3);
        if b[j..].starts_with(b"--")
            && let Some(end) = find(b, j + 2, b"--}}")
        {
            return end + 4;
        }
        match find(b, k + 3, b"}}") {
            Some(end) => end + 2,
            None => {
                self.hint.get_or_insert(Hint::UnclosedTag(k));
                b.len()
            }
        }
    }

    /// The rest of the tag opened at `k`, from `j`; returns the offset after its `}}`.
    fn interior(&mut self, k: usize, mut j: usize) -> Result<usize, ScanError> {
        let b = self.b;
        let mut parens = 0usize;
        while j < b.len() {
            match b[j] {
                quote @ (b'"' | b'\'') => {
                    j += 1;
                    while j < b.len() && b[j] != quote {
                        j += if b[j] == b'\\' { 2 } else { 1 };
                    }
                    j += 1;
                }
                b'[' => {
                    // A path segment `[any text]`, or an array literal.
                    let end = b[j..].iter().position(|&c| c == b']').map_or(b.len(), |n| j + n);
                    if b[j..end].iter().any(|&c| c == b'"' || c == b'\'') {
                        return Err(ScanError::Unsupported { at: k, what: "quotes inside [...]" });
                    }
                    j = end + 1;
                }
                b'(' => {
                    parens += 1;
                    if parens > MAX_SUBEXPRESSION_DEPTH {
                        return Err(ScanError::TooComplex {
                            at: k,
                            reason: format!("more than {MAX_SUBEXPRESSION_DEPTH} nested subexpressions"),
                        });
                    }
                    j += 1;
                }
                b')' => {
                    parens = parens.saturating_sub(1);
                    j += 1;
                }
                b'}' if b.get(j + 1) == Some(&b'}') => return Ok(j + 2),
                b'{' if b.get(j + 1) == Some(&b'{') => {
                    // The parser fails here too; a new tag starts.
                    self.hint.get_or_insert(Hint::UnclosedTag(k));
                    return Ok(j);
                }
                b'{' => return Err(ScanError::Unsupported { at: k, what: "object literals ({...})" }),
                _ => j += 1,
            }
        }
        self.hint.get_or_insert(Hint::UnclosedTag(k));
        Ok(b.len())
    }
}

fn unsupported_partial(at: usize) -> ScanError {
    ScanError::Unsupported { at, what: "partials ({{> name}})" }
}

fn unsupported_decorator(at: usize) -> ScanError {
    ScanError::Unsupported { at, what: "decorators and inline partials ({{* ...}})" }
}

/// Whether the tag at `k` starts with `{{~` (or `{{{~`), which trims the text before it.
fn trims_before(b: &[u8], k: usize) -> bool {
    let mut j = skip_ws(b, k + 2);
    if b.get(j) == Some(&b'{') {
        j = skip_ws(b, j + 1);
    }
    b.get(j) == Some(&b'~')
}

/// Skips the grammar's whitespace (space, tab, CR, LF).
fn skip_ws(b: &[u8], mut j: usize) -> usize {
    while j < b.len() && matches!(b[j], b' ' | b'\t' | b'\n' | b'\r') {
        j += 1;
    }
    j
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|n| from + n)
}
