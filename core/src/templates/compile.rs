//! Compiling one part: size limit, the pre-scan, the handlebars parser, then checks on the
//! compiled template (helpers that exist and are used as blocks or values, no partials).
//!
//! handlebars 6 computes each node's line and column by rescanning the source from its
//! start, so compiling one source costs about (number of tags) x (its length): a 100 KB
//! email with 300 tags takes a good part of a second, and 1 MiB of `{{a}}` hours. So the
//! source is compiled in pieces ("units") of a few dozen tags, cut where `scan.rs` found
//! that handlebars' whitespace rules cannot see across ([`Cut`]). Within each block branch,
//! the text between cuts is grouped into units of [`FAN_OUT`] pieces, those into units of
//! units, and so on; a unit's text has each piece it contains replaced by a placeholder tag
//! (`{{__tidings_sub_N}}`), and the compiled pieces are put back in place of the
//! placeholders. Literal text between cuts is not compiled at all. What each compile still
//! costs is estimated, and a source that would cost too much is refused.

use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};

use handlebars::template::TemplateElement;
use handlebars::{Template, TemplateErrorReason};

use super::check::{Checker, helper_name};
use super::scan::{self, Cut, Hint, Scan, ScanError};
use super::{TemplateError, TemplatePart, truncate_for_message};

/// Marks a placeholder; sources that contain it are compiled in one piece.
const PLACEHOLDER: &str = "__tidings_sub_";

/// Pieces per unit.
const FAN_OUT: usize = 16;

/// Budget for the parser's position bookkeeping: the sum, over the tags of every unit, of
/// twice their offset in the unit. A unit of it costs 10-25 ns, so this is at most about
/// 0.2 s; real templates, compiled in pieces, use a few percent of it.
const COMPILE_COST_BUDGET: u64 = 8_000_000;

/// Message of the error reported if the parser panics (it has `unwrap`s and `assert!`s on its
/// own invariants) or if the pieces do not fit back together; tests check no input gets here.
pub(super) const INTERNAL_COMPILE_ERROR: &str = "the template could not be compiled (internal error)";

/// Compiles one part.
pub(super) fn compile_part(part: TemplatePart, src: &str) -> Result<Template, TemplateError> {
    compile_with(part, src, true)
}

/// Compiles one part, in pieces if `split`. Compiling whole, without the cost budget, is for
/// tests to compare with.
pub(super) fn compile_with(part: TemplatePart, src: &str, split: bool) -> Result<Template, TemplateError> {
    let limit = part.max_source_bytes();
    if src.len() > limit {
        return Err(TemplateError::TooComplex { part, reason: format!("the source is larger than {limit} bytes") });
    }
    let scan = scan::scan(src).map_err(|e| scan_error(part, src, e))?;
    let units = if split && !src.contains(PLACEHOLDER) { plan(&scan) } else { Vec::new() };
    let units = match units.iter().map(|unit| UnitText::new(src, unit)).collect::<Option<Vec<_>>>() {
        Some(texts) if !texts.is_empty() => units.into_iter().zip(texts).collect::<Vec<_>>(),
        // Unsplit, or the scan's structure did not nest (only in sources that do not parse).
        _ => {
            let whole = Unit { range: 0..src.len(), subs: Vec::new() };
            let text = UnitText { start: 0, text: src.to_owned(), pieces: Vec::new() };
            vec![(whole, text)]
        }
    };
    if split && units.iter().map(|(_, text)| text.cost()).sum::<u64>() > COMPILE_COST_BUDGET {
        return Err(TemplateError::TooComplex {
            part,
            reason: "it has too many tags without text between them to compile in reasonable time".to_owned(),
        });
    }

    let mut compiled = Vec::with_capacity(units.len());
    let mut errors = Vec::new();
    for (_, text) in &units {
        match compile_text(part, src, text, &scan) {
            Ok(template) => compiled.push(Some(template)),
            Err(e) => {
                errors.push(e);
                compiled.push(None);
            }
        }
    }
    // Report what compiling the source whole would: the first syntax error, else the first
    // other error.
    if let Some((_, _, error)) = errors.into_iter().min_by_key(|(rank, at, _)| (*rank, *at)) {
        return Err(error);
    }

    let internal =
        || TemplateError::Syntax { part, line: None, column: None, reason: INTERNAL_COMPILE_ERROR.to_owned() };
    for (i, (unit, _)) in units.iter().enumerate() {
        let (done, rest) = compiled.split_at_mut(i);
        let template = rest[0].as_mut().ok_or_else(internal)?;
        assemble(src, template, &unit.subs, done).ok_or_else(internal)?;
    }
    let mut template = compiled.pop().flatten().ok_or_else(internal)?;
    tidy(&mut template);
    Ok(template)
}

/// A piece of the source compiled on its own, with pieces of it (`subs`) replaced by
/// placeholders.
struct Unit {
    range: Range<usize>,
    subs: Vec<Sub>,
}

/// A range of a unit replaced by a placeholder.
#[derive(Clone)]
struct Sub {
    range: Range<usize>,
    what: What,
    /// Whether the range ends with a `\n`, which the placeholder is then followed by, so that
    /// the text after it still starts a line.
    newline_after: bool,
}

#[derive(Clone, Copy)]
enum What {
    /// Literal text.
    Text,
    /// Another unit, by index; always an earlier one.
    Unit(usize),
}

/// Plans the units: for each block branch (innermost first), the text between its first and
/// last cut grouped into a tree of units; then the whole source. Every unit comes after the
/// units it contains.
fn plan(scan: &Scan) -> Vec<Unit> {
    let sections = &scan.sections;
    let mut units = Vec::new();
    // What each section's enclosing unit must replace: its root, and the exports of its
    // children that lie outside its root.
    let mut exports: Vec<Vec<Sub>> = vec![Vec::new(); sections.len()];
    for id in (0..sections.len()).rev() {
        let section = &sections[id];
        let mut children = section.children.iter().copied().peekable();
        let mut take_children = |end: usize, into: &mut Vec<Sub>| {
            while let Some(child) = children.next_if(|&c| sections[c].extent.end <= end) {
                into.extend(exports[child].iter().cloned());
            }
        };
        let mut cuts = section.cuts.clone();
        cuts.dedup_by_key(|cut| cut.at);
        let mut own = Vec::new();
        if let [first, _, ..] = cuts[..] {
            take_children(first.at, &mut own);
            let mut literals = section.literals.iter().peekable();
            let mut level: Vec<Sub> = Vec::new();
            for atoms in cuts.windows(2).collect::<Vec<_>>().chunks(FAN_OUT) {
                let mut subs = Vec::new();
                for atom in atoms {
                    let range = atom[0].at..atom[1].at;
                    while literals.next_if(|l| l.end <= range.start).is_some() {}
                    if literals.next_if(|l| **l == range).is_some() {
                        subs.push(Sub { range, what: What::Text, newline_after: false });
                    } else {
                        take_children(range.end, &mut subs);
                    }
                }
                level.push(group(&mut units, subs, atoms[0][0], atoms[atoms.len() - 1][1]));
            }
            while level.len() > 1 {
                level = level
                    .chunks(FAN_OUT)
                    .map(|subs| {
                        let (start, end) = (&subs[0], &subs[subs.len() - 1]);
                        let cut = |at, after_newline| Cut { at, after_newline };
                        group(
                            &mut units,
                            subs.to_vec(),
                            cut(start.range.start, false),
                            cut(end.range.end, end.newline_after),
                        )
                    })
                    .collect();
            }
            own.extend(level);
        }
        take_children(usize::MAX, &mut own);
        exports[id] = own;
    }
    let whole = sections.first().map_or(0, |s| s.extent.end);
    units.push(Unit { range: 0..whole, subs: std::mem::take(&mut exports[0]) });
    units
}

/// A unit of `subs` from cut `start` to cut `end`, or the only sub if it already spans them.
fn group(units: &mut Vec<Unit>, subs: Vec<Sub>, start: Cut, end: Cut) -> Sub {
    if let [only] = &subs[..]
        && only.range == (start.at..end.at)
    {
        return only.clone();
    }
    units.push(Unit { range: start.at..end.at, subs });
    Sub { range: start.at..end.at, what: What::Unit(units.len() - 1), newline_after: end.after_newline }
}

/// A unit's text, and where its placeholders are.
struct UnitText {
    /// Where the unit starts in the source.
    start: usize,
    text: String,
    /// For each sub: the placeholder's range in `text`, and the sub's range in the source.
    pieces: Vec<(Range<usize>, Range<usize>)>,
}

impl UnitText {
    /// `None` if the subs are not in order inside the unit.
    fn new(src: &str, unit: &Unit) -> Option<Self> {
        let mut text = String::new();
        let mut pieces = Vec::with_capacity(unit.subs.len());
        let mut copied = unit.range.start;
        for (n, sub) in unit.subs.iter().enumerate() {
            if sub.range.start < copied || sub.range.end > unit.range.end || sub.range.is_empty() {
                return None;
            }
            text.push_str(src.get(copied..sub.range.start)?);
            let at = text.len();
            text.push_str("{{");
            text.push_str(PLACEHOLDER);
            text.push_str(&n.to_string());
            text.push_str("}}");
            if sub.newline_after {
                text.push('\n');
            }
            pieces.push((at..text.len(), sub.range.clone()));
            copied = sub.range.end;
        }
        text.push_str(src.get(copied..unit.range.end)?);
        Some(Self { start: unit.range.start, text, pieces })
    }

    /// The parser's position bookkeeping for this text: each tag, and the text after it.
    fn cost(&self) -> u64 {
        self.text.match_indices("{{").map(|(at, _)| 2 * at as u64).sum()
    }

    /// The source offset of an offset in this text (the start of a placeholder's range for
    /// any offset in the placeholder).
    fn to_source(&self, at: usize) -> usize {
        let (mut text_end, mut source_end) = (0, self.start);
        for (placeholder, range) in &self.pieces {
            if at < placeholder.start {
                break;
            }
            if at < placeholder.end {
                return range.start;
            }
            (text_end, source_end) = (placeholder.end, range.end);
        }
        at - text_end + source_end
    }
}

/// Compiles and checks one unit's text. Errors come ranked: 0 for syntax errors, 1 for other
/// parser errors, 2 for our checks; with their source offset.
fn compile_text(
    part: TemplatePart,
    src: &str,
    unit: &UnitText,
    scan: &Scan,
) -> Result<Template, (u8, usize, TemplateError)> {
    let position = Position { src, unit };
    let template = match catch_unwind(AssertUnwindSafe(|| Template::compile(&unit.text))) {
        Ok(Ok(template)) => template,
        Ok(Err(e)) => {
            // Ranked by where the parser stopped, which is where compiling the source whole
            // would stop too, not by where a hint points.
            let rank = u8::from(!matches!(e.reason(), TemplateErrorReason::InvalidSyntax(_)));
            let stopped = e.pos().map_or(usize::MAX, |(line, column)| position.source_offset(line, column));
            return Err((rank, stopped, parse_error(part, &position, scan, &e)));
        }
        Err(_) => {
            let error =
                TemplateError::Syntax { part, line: None, column: None, reason: INTERNAL_COMPILE_ERROR.to_owned() };
            return Err((0, usize::MAX, error));
        }
    };
    let checker = Checker { part, position };
    checker.check(&template).map_err(|error| (2, error_offset(&error, src), error))?;
    Ok(template)
}

/// Where an error is, for choosing the first.
fn error_offset(error: &TemplateError, src: &str) -> usize {
    match error {
        TemplateError::Syntax { line: Some(line), column: Some(column), .. } => offset_of(src, *line, *column),
        _ => usize::MAX,
    }
}

/// Maps positions in a unit's text to the source.
#[derive(Clone, Copy)]
pub(super) struct Position<'a> {
    /// The whole source.
    pub(super) src: &'a str,
    unit: &'a UnitText,
}

impl Position<'_> {
    /// The source offset of a parser line and column in the unit's text.
    pub(super) fn source_offset(&self, line: usize, column: usize) -> usize {
        self.unit.to_source(offset_of(&self.unit.text, line, column))
    }
}

fn placeholder_index(element: &TemplateElement) -> Option<usize> {
    let TemplateElement::Expression(ht) = element else { return None };
    if ht.block || !ht.params.is_empty() || !ht.hash.is_empty() {
        return None;
    }
    helper_name(&ht.name)?.strip_prefix(PLACEHOLDER)?.parse().ok()
}

/// Replaces the placeholders of a compiled unit with what they stand for: literal text, or
/// the elements of an earlier (already assembled) unit. `None` if they do not fit.
fn assemble(src: &str, root: &mut Template, subs: &[Sub], units: &mut [Option<Template>]) -> Option<()> {
    let mut found = vec![false; subs.len()];
    let mut stack = vec![root];
    while let Some(template) = stack.pop() {
        let elements = std::mem::take(&mut template.elements);
        let mut own_blocks = Vec::new();
        let mut strip_newline = false;
        for mut element in elements {
            if std::mem::take(&mut strip_newline) {
                // The newline that followed the placeholder stood for the sub's last one.
                let TemplateElement::RawString(text) = &mut element else { return None };
                text.strip_prefix('\n')?;
                text.remove(0);
            }
            if let Some(n) = placeholder_index(&element) {
                let sub = subs.get(n)?;
                if std::mem::replace(found.get_mut(n)?, true) {
                    return None;
                }
                match sub.what {
                    What::Text => {
                        template.elements.push(TemplateElement::RawString(src.get(sub.range.clone())?.to_owned()))
                    }
                    What::Unit(u) => template.elements.append(&mut units.get_mut(u)?.take()?.elements),
                }
                strip_newline = sub.newline_after;
                continue;
            }
            if matches!(element, TemplateElement::HelperBlock(_)) {
                own_blocks.push(template.elements.len());
            }
            template.elements.push(element);
        }
        if strip_newline {
            return None;
        }
        template.mapping.clear();
        // Descend into this unit's own blocks only: spliced units are assembled already.
        let mut own_blocks = own_blocks.into_iter().peekable();
        for (i, element) in template.elements.iter_mut().enumerate() {
            if own_blocks.next_if_eq(&i).is_none() {
                continue;
            }
            if let TemplateElement::HelperBlock(ht) = element {
                stack.extend(ht.template.as_mut());
                stack.extend(ht.inverse.as_mut());
            }
        }
    }
    found.iter().all(|&f| f).then_some(())
}

/// Joins adjacent text elements (pieces of text that were compiled apart) throughout.
fn tidy(root: &mut Template) {
    let mut stack = vec![root];
    while let Some(template) = stack.pop() {
        template.mapping.clear();
        let elements = std::mem::take(&mut template.elements);
        for element in elements {
            if let TemplateElement::RawString(text) = &element
                && let Some(TemplateElement::RawString(previous)) = template.elements.last_mut()
            {
                previous.push_str(text);
                continue;
            }
            template.elements.push(element);
        }
        for element in &mut template.elements {
            if let TemplateElement::HelperBlock(ht) = element {
                stack.extend(ht.template.as_mut());
                stack.extend(ht.inverse.as_mut());
            }
        }
    }
}

fn scan_error(part: TemplatePart, src: &str, e: ScanError) -> TemplateError {
    match e {
        ScanError::Unsupported { at, what } => syntax_error(part, src, Some(at), format!("{what} are not supported")),
        ScanError::TooComplex { at, reason } => {
            let (line, column) = line_col(src, at);
            TemplateError::TooComplex { part, reason: format!("{reason} (line {line}, column {column})") }
        }
    }
}

/// Turns the parser's error into ours, with the position in the source and, where the scan
/// saw the likely cause, a message about that instead of the grammar's rule names.
fn parse_error(
    part: TemplatePart,
    position: &Position<'_>,
    scan: &Scan,
    e: &handlebars::TemplateError,
) -> TemplateError {
    let src = position.src;
    let at = e.pos().map(|(line, column)| position.source_offset(line, column));
    match e.reason() {
        TemplateErrorReason::InvalidSyntax(_) => {
            let error_at = at.unwrap_or(src.len());
            let hinted = match &scan.hint {
                Some(Hint::UnclosedTag(tag)) if error_at >= *tag => {
                    Some((*tag, "this {{ is not closed by }}".to_owned()))
                }
                Some(Hint::StrayClose(tag)) if error_at >= *tag => {
                    Some((*tag, "this closing tag does not close any block".to_owned()))
                }
                Some(Hint::UnclosedBlock { at: block, name }) if error_at == src.len() => {
                    let name = truncate_for_message(name);
                    Some((*block, format!("{{{{#{name}}}}} is never closed by {{{{/{name}}}}}")))
                }
                _ => None,
            };
            match hinted {
                Some((at, reason)) => syntax_error(part, src, Some(at), reason),
                None if error_at < src.len() => {
                    let rest = src.get(error_at..).unwrap_or_default();
                    let near: String = rest.chars().take_while(|&c| c != '\n').take(20).collect();
                    syntax_error(part, src, at, format!("invalid Handlebars syntax near {near:?}"))
                }
                None => syntax_error(part, src, at, "invalid Handlebars syntax at the end of the template".to_owned()),
            }
        }
        TemplateErrorReason::MismatchingClosedHelper(open, close) => {
            let (open, close) = (truncate_for_message(open), truncate_for_message(close));
            syntax_error(part, src, at, format!("{{{{#{open}}}}} is closed by {{{{/{close}}}}}"))
        }
        other => syntax_error(part, src, at, truncate_for_message(&other.to_string())),
    }
}

/// A syntax error at source offset `at`.
pub(super) fn syntax_error(part: TemplatePart, src: &str, at: Option<usize>, reason: String) -> TemplateError {
    let position = at.map(|at| line_col(src, at));
    TemplateError::Syntax { part, line: position.map(|p| p.0), column: position.map(|p| p.1), reason }
}

/// 1-based line and column (in characters) of byte offset `at`, counted as the parser does:
/// a line ends at `\n` or `\r\n`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let (mut line, mut column) = (1, 1);
    let mut chars = text[..at].chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {
                chars.next();
                (line, column) = (line + 1, 1);
            }
            '\n' => (line, column) = (line + 1, 1),
            _ => column += 1,
        }
    }
    (line, column)
}

/// Byte offset of a 1-based line and column as [`line_col`] counts them (the end of `text`
/// if past it).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let (mut l, mut c) = (1, 1);
    let mut chars = text.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        if (l, c) >= (line, column) {
            return i;
        }
        match ch {
            '\r' if matches!(chars.peek(), Some((_, '\n'))) => {
                chars.next();
                (l, c) = (l + 1, 1);
            }
            '\n' => (l, c) = (l + 1, 1),
            _ => c += 1,
        }
    }
    text.len()
}
