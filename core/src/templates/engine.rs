//! Rendering compiled parts: a strict Handlebars registry that holds only our helpers
//! (`helpers.rs`), an output that refuses to grow past the part's limit, and a work budget.
//!
//! Output size alone does not bound the time a render takes:
//! `{{#each a}}{{#each ../a}}{{#each ../../a}}{{/each}}{{/each}}{{/each}}` writes nothing and
//! loops |a|^3 times. So the helpers charge a budget for the work they cause before doing
//! it; the template's top level runs once and is bounded by its size.

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use handlebars::{
    Context, Handlebars, Output, RenderContext, RenderError, RenderErrorReason, Renderable, Template, no_escape,
};
use serde_json::Value as Json;

use super::{MAX_OUTPUT_BYTES, MAX_SUBJECT_CHARS, TemplateError, TemplatePart, helpers, truncate_for_message};

/// Work units one render may use, all its parts together: a unit is an element rendered, a
/// value copied or compared, or 32 bytes of a name looked up. Using it all up takes about half
/// a second of one core in a debug build (it was 20 M per part, ≈ 2 s each, before); a
/// 10,000-row table with five fields per row needs under a quarter of it.
const RENDER_WORK_BUDGET: u64 = 1_000_000;

/// Message of the error reported if handlebars panics while rendering; tests check that no
/// input gets here.
pub(super) const INTERNAL_RENDER_ERROR: &str = "the template could not be rendered (internal error)";

/// What `Handlebars::new` registers: replaced by ours, except `raw` (for raw blocks, which we
/// refuse) and `log` (which would let a template write to the server's log).
const BUILT_IN_HELPERS: [&str; 17] = [
    "if", "unless", "each", "with", "lookup", "raw", "log", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not",
    "len",
];

/// Renders the parts of one template.
pub(super) struct Engine {
    plain: Handlebars<'static>,
    html: Handlebars<'static>,
}

impl Engine {
    /// An engine with its own registries and budget (for every part it renders); renders one
    /// part at a time.
    pub(super) fn new() -> Self {
        // One budget for all the parts of a render: a template cannot triple it by putting
        // the same loop in its subject, html and text.
        let budget = Arc::new(Budget(AtomicU64::new(RENDER_WORK_BUDGET)));
        let plain = registry(&budget, false);
        let html = registry(&budget, true);
        Self { plain, html }
    }

    /// Renders the subject: one line, at most [`MAX_SUBJECT_CHARS`] characters.
    pub(super) fn render_subject(&self, template: &Template, context: &Context) -> Result<String, TemplateError> {
        let part = TemplatePart::Subject;
        let too_long = || TemplateError::Render {
            part,
            reason: format!("the rendered subject is longer than {MAX_SUBJECT_CHARS} characters"),
        };
        // A character is at most 4 bytes, so this bound never cuts a subject that fits.
        let subject =
            self.render(part, &self.plain, template, context, MAX_SUBJECT_CHARS * 4).map_err(|e| match e {
                TemplateError::OutputTooLarge { .. } => too_long(),
                e => e,
            })?;
        if subject.contains(['\r', '\n']) {
            return Err(TemplateError::Render {
                part,
                reason: "the rendered subject contains a line break (a subject must be one line)".to_owned(),
            });
        }
        if subject.chars().count() > MAX_SUBJECT_CHARS {
            return Err(too_long());
        }
        Ok(subject)
    }

    /// Renders the `html` (escaping `{{ }}` output) or `text` part.
    pub(super) fn render_body(
        &self,
        part: TemplatePart,
        template: &Template,
        context: &Context,
    ) -> Result<String, TemplateError> {
        let registry = if part == TemplatePart::Html { &self.html } else { &self.plain };
        self.render(part, registry, template, context, MAX_OUTPUT_BYTES)
    }

    fn render(
        &self,
        part: TemplatePart,
        registry: &Handlebars<'static>,
        template: &Template,
        context: &Context,
        limit: usize,
    ) -> Result<String, TemplateError> {
        // handlebars has `unwrap`s on its own invariants; a bug there must not take the
        // worker down.
        let rendered = catch_unwind(AssertUnwindSafe(|| {
            let mut out = BoundedOutput { buf: String::new(), limit };
            let mut rc = RenderContext::new(None);
            template.render(registry, context, &mut rc, &mut out).map(|()| out.buf)
        }));
        match rendered {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(e)) => Err(render_error(part, limit, &e)),
            Err(_) => Err(TemplateError::Render { part, reason: INTERNAL_RENDER_ERROR.to_owned() }),
        }
    }
}

fn registry(budget: &Arc<Budget>, html: bool) -> Handlebars<'static> {
    let mut registry = Handlebars::new();
    registry.set_strict_mode(true);
    registry.set_dev_mode(false);
    for name in BUILT_IN_HELPERS {
        registry.unregister_helper(name);
    }
    helpers::register(&mut registry, budget);
    if !html {
        registry.register_escape_fn(no_escape);
    }
    registry
}

fn render_error(part: TemplatePart, limit: usize, e: &RenderError) -> TemplateError {
    match e.reason() {
        RenderErrorReason::MissingVariable(Some(name)) => {
            TemplateError::MissingVariable { part, name: truncate_for_message(name) }
        }
        RenderErrorReason::IOError(io)
            if io.get_ref().and_then(|e| e.downcast_ref::<Limit>()).is_some_and(|l| *l == Limit::Output) =>
        {
            TemplateError::OutputTooLarge { part, limit }
        }
        RenderErrorReason::NestedError(inner) if inner.downcast_ref::<Limit>() == Some(&Limit::Work) => {
            TemplateError::Render {
                part,
                reason: "rendering needs too much work (loops over too much data, or loops nested too deeply)"
                    .to_owned(),
            }
        }
        RenderErrorReason::MissingVariable(None) => {
            TemplateError::Render { part, reason: "a variable it uses was not supplied".to_owned() }
        }
        RenderErrorReason::ParamNotFoundForIndex(helper, index) => {
            TemplateError::Render { part, reason: format!("\"{helper}\" needs an argument at position {}", index + 1) }
        }
        RenderErrorReason::HelperNotFound(name) => {
            TemplateError::Render { part, reason: format!("unknown helper \"{}\"", truncate_for_message(name)) }
        }
        other => TemplateError::Render { part, reason: truncate_for_message(&other.to_string()) },
    }
}

/// Which limit stopped a render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Limit {
    #[error("the rendered output is too large")]
    Output,
    #[error("rendering needs too much work")]
    Work,
}

/// Work units left for the part being rendered; shared by its helpers.
pub(super) struct Budget(AtomicU64);

impl Budget {
    /// Units left.
    pub(super) fn remaining(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Takes `units`, or fails the render if fewer are left.
    pub(super) fn charge(&self, units: u64) -> Result<(), RenderError> {
        // One render at a time per engine, so load-then-store does not race.
        let left = self.remaining();
        if units > left {
            self.0.store(0, Ordering::Relaxed);
            return Err(RenderErrorReason::NestedError(Box::new(Limit::Work)).into());
        }
        self.0.store(left - units, Ordering::Relaxed);
        Ok(())
    }

    /// What copying `value` costs, counted up to just past what is left.
    pub(super) fn cost_of(&self, value: &Json) -> u64 {
        let cap = self.remaining().saturating_add(1);
        let mut cost = 0u64;
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            cost += 1;
            match value {
                Json::String(s) => cost += s.len() as u64 / 32,
                Json::Array(items) => stack.extend(items),
                Json::Object(fields) => {
                    for (key, value) in fields {
                        cost += key.len() as u64 / 32;
                        stack.push(value);
                    }
                }
                _ => {}
            }
            if cost > cap {
                break;
            }
        }
        cost
    }

    /// What `a == b` costs, counted up to just past what is left. Like `==`, it only goes into
    /// values of the same type and length, so comparing a large value with a small one is
    /// cheap, and so is measuring it.
    pub(super) fn comparison_cost(&self, a: &Json, b: &Json) -> u64 {
        let cap = self.remaining().saturating_add(1);
        let mut cost = 0u64;
        let mut stack = vec![(a, b)];
        while let Some(pair) = stack.pop() {
            cost += 1;
            match pair {
                (Json::String(a), Json::String(b)) if a.len() == b.len() => cost += a.len() as u64 / 32,
                (Json::Array(a), Json::Array(b)) if a.len() == b.len() => stack.extend(a.iter().zip(b)),
                (Json::Object(a), Json::Object(b)) if a.len() == b.len() => {
                    stack.extend(a.iter().filter_map(|(key, value)| Some((value, b.get(key)?))));
                }
                _ => {}
            }
            if cost > cap {
                break;
            }
        }
        cost
    }
}

/// Output that fails once the part would exceed its limit, so a template cannot build an
/// unbounded string first and be checked after.
struct BoundedOutput {
    buf: String,
    limit: usize,
}

impl Output for BoundedOutput {
    fn write(&mut self, seg: &str) -> Result<(), io::Error> {
        if seg.len() > self.limit - self.buf.len() {
            return Err(io::Error::other(Limit::Output));
        }
        self.buf.push_str(seg);
        Ok(())
    }
}
