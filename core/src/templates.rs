//! Email templates (docs/api.md#templates): Handlebars for the `subject`, `html` and `text`
//! parts, compiled when a template version is created and rendered for each send or preview.
//!
//! Built on the `handlebars` crate, with rules of our own because template authors are API
//! clients, not trusted developers:
//!
//! - `{{ name }}` is HTML-escaped in `html` and verbatim in `subject` and `text`;
//!   `{{{ name }}}` is verbatim everywhere.
//! - Strict: outputting a variable that was not supplied is [`TemplateError::MissingVariable`]
//!   naming its path (`user.name`), as is passing one to a helper (`{{eq status "paid"}}`).
//!   `null` counts as supplied and renders empty.
//! - Except as the subject of a block: a missing variable in `{{#if x}}`, `{{#unless x}}`,
//!   `{{#each x}}` or `{{#with x}}` counts as false / empty and takes the `{{else}}` branch
//!   (or renders nothing), as Postmark and Resend do; so does `{{#each}}` over anything but
//!   a non-empty list or object. So optional sections need no dummy values, while a typo in
//!   an output variable still fails loudly.
//! - Helpers: the blocks `if`, `unless`, `each`, `with`, and the values `lookup`, `eq`, `ne`,
//!   `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`, `len`. No partials, decorators, inline
//!   partials or raw blocks, and nothing that touches files, the environment or logs.
//!   Unknown helpers and Mustache-style sections (`{{#items}}`) are refused when compiling.
//! - The rendered subject is one header line: a line break in it (header injection) or more
//!   than [`MAX_SUBJECT_CHARS`] characters is a render error.
//! - Bounded: source size, block and subexpression nesting, the parser's work, the output
//!   size and the rendering work (loops over loops over large data) are all limited, so no
//!   template and no variables can exhaust memory, hang a worker or overflow its stack.
//!
//! Inside: `scan` is a pre-pass that bounds what handlebars' parser is given; `compile` and
//! `check` run when a version is created, `engine` and `helpers` when it is rendered.
//! Compiling costs a few microseconds per tag, more than rendering, so callers that render a
//! stored version often can keep its [`CompiledTemplate`].

mod check;
mod compile;
mod engine;
mod helpers;
mod scan;
#[cfg(test)]
mod tests;

use std::fmt;

use handlebars::Template;
use serde_json::{Map, Value};

/// Largest `html` or `text` template source, in bytes.
pub const MAX_SOURCE_BYTES: usize = 1024 * 1024;
/// Largest `subject` template source, in bytes.
pub const MAX_SUBJECT_SOURCE_BYTES: usize = 16 * 1024;
/// Most blocks (`{{#if}}`, `{{#each}}`, ...) that may be nested inside one another.
pub const MAX_BLOCK_DEPTH: usize = 32;
/// Most levels of blocks plus `{{else if}}` links (each link nests one level when rendering).
pub const MAX_NESTING: usize = 128;
/// Most `{{ }}` tags (including comments) in one part.
pub const MAX_TAGS: usize = 20_000;
/// Most subexpressions that may be nested inside one another: `(a (b (c x)))` is 3.
pub const MAX_SUBEXPRESSION_DEPTH: usize = 16;
/// Largest rendered `html` or `text` part, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 5 * 1024 * 1024;
/// Longest rendered subject, in characters (RFC 5322's line length limit).
pub const MAX_SUBJECT_CHARS: usize = 998;

/// Which part of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplatePart {
    /// The subject line.
    Subject,
    /// The HTML body.
    Html,
    /// The plain-text body.
    Text,
}

impl TemplatePart {
    /// The part's JSON field name: `subject`, `html` or `text`.
    pub fn field_name(self) -> &'static str {
        match self {
            Self::Subject => "subject",
            Self::Html => "html",
            Self::Text => "text",
        }
    }

    fn max_source_bytes(self) -> usize {
        match self {
            Self::Subject => MAX_SUBJECT_SOURCE_BYTES,
            Self::Html | Self::Text => MAX_SOURCE_BYTES,
        }
    }
}

impl fmt::Display for TemplatePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field_name())
    }
}

/// The Handlebars sources of a template's parts.
#[derive(Debug, Clone, Copy)]
pub struct TemplateSource<'a> {
    /// Subject line template (required).
    pub subject: &'a str,
    /// HTML body template, if any.
    pub html: Option<&'a str>,
    /// Plain-text body template, if any.
    pub text: Option<&'a str>,
}

/// A rendered template: each part present in the source, rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The subject line (one line, at most [`MAX_SUBJECT_CHARS`] characters).
    pub subject: String,
    /// The HTML body, if the template has one.
    pub html: Option<String>,
    /// The plain-text body, if the template has one.
    pub text: Option<String>,
}

/// Why a template did not compile or render. `Display` is a message for the API client
/// that names the part (and the variable, line and column where known).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The source is not valid (or not allowed) Handlebars.
    #[error("{part}: {}{reason}", position(*line, *column))]
    Syntax {
        /// The part at fault.
        part: TemplatePart,
        /// 1-based line of the error, where known.
        line: Option<usize>,
        /// 1-based column (in characters) of the error, where known.
        column: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// The template uses a variable that was not supplied.
    #[error("missing variable \"{name}\" in {part}")]
    MissingVariable {
        /// The part at fault.
        part: TemplatePart,
        /// The variable's path as written in the template (`user.name`).
        name: String,
    },
    /// Rendering failed for another reason (bad helper arguments, a subject that is not
    /// one line, too much work).
    #[error("{part}: {reason}")]
    Render {
        /// The part at fault.
        part: TemplatePart,
        /// What went wrong.
        reason: String,
    },
    /// The rendered part would exceed its size limit.
    #[error("{part}: the rendered {part} is larger than {limit} bytes")]
    OutputTooLarge {
        /// The part at fault.
        part: TemplatePart,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The source exceeds a size or nesting limit.
    #[error("{part}: the template is too complex: {reason}")]
    TooComplex {
        /// The part at fault.
        part: TemplatePart,
        /// Which limit, and where.
        reason: String,
    },
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("line {line}, column {column}: "),
        (Some(line), None) => format!("line {line}: "),
        _ => String::new(),
    }
}

impl TemplateError {
    /// The part the error is in.
    pub fn part(&self) -> TemplatePart {
        match self {
            Self::Syntax { part, .. }
            | Self::MissingVariable { part, .. }
            | Self::Render { part, .. }
            | Self::OutputTooLarge { part, .. }
            | Self::TooComplex { part, .. } => *part,
        }
    }
}

impl From<TemplateError> for crate::Error {
    fn from(e: TemplateError) -> Self {
        match e {
            TemplateError::Syntax { .. } | TemplateError::TooComplex { .. } => Self::TemplateSyntax(e.to_string()),
            TemplateError::MissingVariable { .. }
            | TemplateError::Render { .. }
            | TemplateError::OutputTooLarge { .. } => Self::TemplateRender(e.to_string()),
        }
    }
}

/// A template whose parts compiled, ready to render any number of times.
#[derive(Debug, Clone)]
pub struct CompiledTemplate {
    subject: Template,
    html: Option<Template>,
    text: Option<Template>,
}

impl CompiledTemplate {
    /// Compiles every part, reporting the first that is invalid or over a limit.
    pub fn compile(src: &TemplateSource<'_>) -> Result<Self, TemplateError> {
        Ok(Self {
            subject: compile::compile_part(TemplatePart::Subject, src.subject)?,
            html: src.html.map(|html| compile::compile_part(TemplatePart::Html, html)).transpose()?,
            text: src.text.map(|text| compile::compile_part(TemplatePart::Text, text)).transpose()?,
        })
    }

    /// Renders every part with `variables`, reporting the first part that fails.
    pub fn render(&self, variables: &Map<String, Value>) -> Result<Rendered, TemplateError> {
        let context = handlebars::Context::from(Value::Object(variables.clone()));
        let engine = engine::Engine::new();
        let subject = engine.render_subject(&self.subject, &context)?;
        let html = self.html.as_ref().map(|t| engine.render_body(TemplatePart::Html, t, &context)).transpose()?;
        let text = self.text.as_ref().map(|t| engine.render_body(TemplatePart::Text, t, &context)).transpose()?;
        Ok(Rendered { subject, html, text })
    }
}

/// Compiles every part of `src`; used when a template version is created.
pub fn check_syntax(src: &TemplateSource<'_>) -> Result<(), TemplateError> {
    CompiledTemplate::compile(src).map(drop)
}

/// Compiles and renders `src` with `variables`.
pub fn render(src: &TemplateSource<'_>, variables: &Map<String, Value>) -> Result<Rendered, TemplateError> {
    CompiledTemplate::compile(src)?.render(variables)
}

/// Cuts client-controlled text (variable names, parameters) that ends up in an error
/// message to a readable length.
fn truncate_for_message(text: &str) -> String {
    const MAX_CHARS: usize = 80;
    match text.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}
