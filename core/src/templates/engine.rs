//! Rendering compiled parts: a strict Handlebars registry that holds only our helpers, an
//! output that refuses to grow past the part's limit, and a work budget.
//!
//! The helpers are our own rather than handlebars' built-ins for two reasons. The built-in
//! `each` and `with` fail on a missing variable in strict mode, where we want the `{{else}}`
//! branch (see the module doc of `templates`). And output size alone does not bound the
//! time a render takes: `{{#each a}}{{#each ../a}}{{#each ../../a}}{{/each}}...` writes
//! nothing and loops |a|^3 times. So every helper charges a shared budget for the work it
//! causes (the elements of the blocks it renders, per iteration, and the values it copies or
//! compares) before doing it; the template's top level runs once and is bounded by its size.

use std::cmp::Ordering;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use handlebars::template::{Parameter, TemplateElement};
use handlebars::{
    BlockContext, BlockParams, Context, Handlebars, Helper, HelperDef, HelperResult, JsonTruthy, Output, Path,
    PathAndJson, RenderContext, RenderError, RenderErrorReason, Renderable, ScopedJson, Template, no_escape,
};
use serde_json::Value as Json;

use super::{MAX_OUTPUT_BYTES, MAX_SUBJECT_CHARS, TemplateError, TemplatePart, truncate_for_message};

/// Work units one part may use: a unit is an element rendered, a value copied or compared,
/// or 32 bytes of a name looked up; a few tenths of a second at most.
const RENDER_WORK_BUDGET: u64 = 20_000_000;

/// Message of the error reported if handlebars panics while rendering; tests check that no
/// input gets here.
pub(super) const INTERNAL_RENDER_ERROR: &str = "the template could not be rendered (internal error)";

const BUILT_IN_HELPERS: [&str; 17] = [
    "if", "unless", "each", "with", "lookup", "raw", "log", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not",
    "len",
];

/// Whether `name` is one of our block helpers.
pub(super) fn is_block_helper(name: &str) -> bool {
    BlockKind::ALL.iter().any(|k| k.name() == name)
}

/// Whether `name` is one of our value helpers.
pub(super) fn is_value_helper(name: &str) -> bool {
    ValueKind::ALL.iter().any(|k| k.name() == name)
}

/// Renders the parts of one template.
pub(super) struct Engine {
    budget: Arc<Budget>,
    plain: Handlebars<'static>,
    html: Handlebars<'static>,
}

impl Engine {
    pub(super) fn new() -> Self {
        let budget = Arc::new(Budget(AtomicU64::new(0)));
        let plain = registry(&budget, false);
        let html = registry(&budget, true);
        Self { budget, plain, html }
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
        self.budget.0.store(RENDER_WORK_BUDGET, AtomicOrdering::Relaxed);
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
    for kind in BlockKind::ALL {
        registry.register_helper(kind.name(), Box::new(BlockHelper { kind, budget: budget.clone() }));
    }
    for kind in ValueKind::ALL {
        registry.register_helper(kind.name(), Box::new(ValueHelper { kind, budget: budget.clone() }));
    }
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
enum Limit {
    #[error("the rendered output is too large")]
    Output,
    #[error("rendering needs too much work")]
    Work,
}

/// Work units left for the part being rendered; shared by its helpers.
struct Budget(AtomicU64);

impl Budget {
    fn remaining(&self) -> u64 {
        self.0.load(AtomicOrdering::Relaxed)
    }

    fn charge(&self, units: u64) -> Result<(), RenderError> {
        // One render at a time per engine, so load-then-store does not race.
        let left = self.remaining();
        if units > left {
            self.0.store(0, AtomicOrdering::Relaxed);
            return Err(RenderErrorReason::NestedError(Box::new(Limit::Work)).into());
        }
        self.0.store(left - units, AtomicOrdering::Relaxed);
        Ok(())
    }

    /// What copying or comparing `value` costs, counted up to just past what is left.
    fn cost_of(&self, value: &Json) -> u64 {
        let cap = self.remaining().saturating_add(1);
        let mut cost = 0u64;
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            cost += 1;
            match value {
                Json::String(s) => cost += s.len() as u64 / 32,
                Json::Array(items) => {
                    cost += items.len() as u64;
                    if cost <= cap {
                        stack.extend(items);
                    }
                }
                Json::Object(fields) => {
                    cost += fields.len() as u64;
                    if cost <= cap {
                        for (key, value) in fields {
                            cost += key.len() as u64 / 32;
                            stack.push(value);
                        }
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
}

/// What rendering the top level of `template` once costs: its elements and the names they
/// look up. Nested blocks are charged by their own helper.
fn weight(template: Option<&Template>) -> u64 {
    template.map_or(0, |t| t.elements.iter().map(element_weight).sum())
}

fn element_weight(element: &TemplateElement) -> u64 {
    match element {
        TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) | TemplateElement::HelperBlock(ht) => {
            let arguments = std::iter::once(&ht.name).chain(&ht.params).chain(ht.hash.values());
            1 + arguments.map(argument_weight).sum::<u64>()
        }
        _ => 1,
    }
}

fn argument_weight(p: &Parameter) -> u64 {
    match p {
        Parameter::Name(name) => name.len() as u64 / 32,
        Parameter::Path(Path::Relative((_, raw)) | Path::Local((_, _, raw))) => raw.len() as u64 / 32,
        // Bounded by the subexpression depth limit.
        Parameter::Subexpression(sub) => element_weight(sub.as_element()),
        _ => 0,
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

fn missing(param: &PathAndJson<'_>) -> RenderError {
    RenderErrorReason::MissingVariable(param.relative_path().cloned()).into()
}

fn render_optional<'reg: 'rc, 'rc>(
    template: Option<&'rc Template>,
    r: &'reg Handlebars<'reg>,
    ctx: &'rc Context,
    rc: &mut RenderContext<'reg, 'rc>,
    out: &mut dyn Output,
) -> HelperResult {
    template.map_or(Ok(()), |t| t.render(r, ctx, rc, out))
}

/// A block whose context is `value` (by path when it comes from the variables, so nothing
/// is copied).
fn block_for<'rc>(value: &PathAndJson<'rc>) -> BlockContext<'rc> {
    let mut block = BlockContext::new();
    match value.context_path() {
        Some(path) => block.base_path_mut().clone_from(path),
        None => block.set_base_value(value.value().clone()),
    }
    block
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    If,
    Unless,
    Each,
    With,
}

impl BlockKind {
    const ALL: [Self; 4] = [Self::If, Self::Unless, Self::Each, Self::With];

    fn name(self) -> &'static str {
        match self {
            Self::If => "if",
            Self::Unless => "unless",
            Self::Each => "each",
            Self::With => "with",
        }
    }
}

/// `if`, `unless`, `each` and `with`, as handlebars' built-ins except that a missing subject
/// is false / empty, and with the work charged to the budget.
struct BlockHelper {
    kind: BlockKind,
    budget: Arc<Budget>,
}

impl HelperDef for BlockHelper {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let value = h.param(0).ok_or(RenderErrorReason::ParamNotFoundForIndex(self.kind.name(), 0))?;
        match self.kind {
            BlockKind::If | BlockKind::Unless => {
                self.budget.charge(1 + weight(h.template()) + weight(h.inverse()))?;
                let include_zero = h.hash_get("includeZero").and_then(|v| v.value().as_bool()).unwrap_or(false);
                let truthy = value.value().is_truthy(include_zero);
                let branch = if truthy == (self.kind == BlockKind::If) { h.template() } else { h.inverse() };
                render_optional(branch, r, ctx, rc, out)
            }
            BlockKind::With => self.with(h, value, r, ctx, rc, out),
            BlockKind::Each => self.each(h, value, r, ctx, rc, out),
        }
    }
}

impl BlockHelper {
    fn with<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        value: &PathAndJson<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        if !value.value().is_truthy(false) {
            self.budget.charge(1 + weight(h.inverse()))?;
            return render_optional(h.inverse(), r, ctx, rc, out);
        }
        let copies = if value.context_path().is_none() { 2 * self.budget.cost_of(value.value()) } else { 0 };
        self.budget.charge(1 + weight(h.template()) + copies)?;
        let mut block = block_for(value);
        // Keep @index and friends of an enclosing `each` visible, as handlebars does.
        if let Some(parent) = rc.block() {
            block.local_variables_mut().clone_from(parent.local_variables());
        }
        if let Some(name) = h.block_param() {
            let mut params = BlockParams::new();
            match value.context_path() {
                Some(_) => params.add_path(name, Vec::new())?,
                None => params.add_value(name, value.value().clone())?,
            }
            block.set_block_params(params);
        }
        rc.push_block(block);
        render_optional(h.template(), r, ctx, rc, out)?;
        rc.pop_block();
        Ok(())
    }

    fn each<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        value: &PathAndJson<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let len = match value.value() {
            Json::Array(items) => items.len(),
            Json::Object(fields) => fields.len(),
            _ => 0,
        };
        let Some(body) = h.template().filter(|_| len > 0) else {
            self.budget.charge(1 + weight(h.inverse()))?;
            return render_optional(h.inverse(), r, ctx, rc, out);
        };
        let base_path = value.context_path();
        // Values not from the variables are copied into each iteration's context.
        let copies = if base_path.is_none() { 2 * self.budget.cost_of(value.value()) } else { 0 };
        self.budget.charge((len as u64).saturating_mul(1 + weight(Some(body))).saturating_add(copies))?;

        let items: Box<dyn Iterator<Item = (Option<&String>, &Json)>> = match value.value() {
            Json::Array(items) => Box::new(items.iter().map(|v| (None, v))),
            Json::Object(fields) => Box::new(fields.iter().map(|(k, v)| (Some(k), v))),
            _ => Box::new(std::iter::empty()),
        };
        rc.push_block(block_for(value));
        for (i, (key, item)) in items.enumerate() {
            if let Some(block) = rc.block_mut() {
                let index = Json::from(i);
                block.set_local_var("first", Json::Bool(i == 0));
                block.set_local_var("last", Json::Bool(i + 1 == len));
                block.set_local_var("index", index.clone());
                if let Some(key) = key {
                    block.set_local_var("key", Json::String(key.clone()));
                }
                match base_path {
                    Some(path) => {
                        let mut path = path.clone();
                        path.push(key.cloned().unwrap_or_else(|| i.to_string()));
                        *block.base_path_mut() = path;
                    }
                    None => block.set_base_value(item.clone()),
                }
                let mut params = BlockParams::new();
                let (value_name, key_name) = match (h.block_param(), h.block_param_pair()) {
                    (Some(name), _) => (Some(name), None),
                    (None, Some((name, key_name))) => (Some(name), Some(key_name)),
                    (None, None) => (None, None),
                };
                if let Some(name) = value_name {
                    match base_path {
                        Some(_) => params.add_path(name, Vec::new())?,
                        None => params.add_value(name, item.clone())?,
                    }
                }
                if let Some(key_name) = key_name {
                    params.add_value(key_name, key.map_or(index, |k| Json::String(k.clone())))?;
                }
                if value_name.is_some() {
                    block.set_block_params(params);
                }
            }
            body.render(r, ctx, rc, out)?;
        }
        rc.pop_block();
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Lookup,
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    And,
    Or,
    Not,
    Len,
}

impl ValueKind {
    const ALL: [Self; 11] = [
        Self::Lookup,
        Self::Eq,
        Self::Ne,
        Self::Gt,
        Self::Gte,
        Self::Lt,
        Self::Lte,
        Self::And,
        Self::Or,
        Self::Not,
        Self::Len,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Lookup => "lookup",
            Self::Eq => "eq",
            Self::Ne => "ne",
            Self::Gt => "gt",
            Self::Gte => "gte",
            Self::Lt => "lt",
            Self::Lte => "lte",
            Self::And => "and",
            Self::Or => "or",
            Self::Not => "not",
            Self::Len => "len",
        }
    }
}

/// Helpers that compute a value: `{{len items}}`, `{{#if (eq status "paid")}}`. Their
/// arguments must be supplied.
struct ValueHelper {
    kind: ValueKind,
    budget: Arc<Budget>,
}

/// Argument `i` of `h`, which must be present and supplied.
fn argument<'a>(h: &'a Helper<'_>, helper: &'static str, i: usize) -> Result<&'a Json, RenderError> {
    let param = h.param(i).ok_or(RenderErrorReason::ParamNotFoundForIndex(helper, i))?;
    if param.is_value_missing() {
        return Err(missing(param));
    }
    Ok(param.value())
}

impl HelperDef for ValueHelper {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, RenderError> {
        let name = self.kind.name();
        self.budget.charge(1)?;
        let result = match self.kind {
            ValueKind::Lookup => return self.lookup(h),
            ValueKind::Eq | ValueKind::Ne => {
                let (a, b) = (argument(h, name, 0)?, argument(h, name, 1)?);
                self.budget.charge(self.budget.cost_of(a).min(self.budget.cost_of(b)))?;
                Json::Bool((a == b) == (self.kind == ValueKind::Eq))
            }
            ValueKind::Gt | ValueKind::Gte | ValueKind::Lt | ValueKind::Lte => {
                let (a, b) = (argument(h, name, 0)?, argument(h, name, 1)?);
                let ordering = match (a, b) {
                    (Json::Number(a), Json::Number(b)) => {
                        a.as_f64().zip(b.as_f64()).and_then(|(a, b)| a.partial_cmp(&b))
                    }
                    (Json::String(a), Json::String(b)) => {
                        self.budget.charge(a.len().min(b.len()) as u64 / 32)?;
                        Some(a.cmp(b))
                    }
                    _ => None,
                };
                Json::Bool(matches!(
                    (self.kind, ordering),
                    (ValueKind::Gt, Some(Ordering::Greater))
                        | (ValueKind::Gte, Some(Ordering::Greater | Ordering::Equal))
                        | (ValueKind::Lt, Some(Ordering::Less))
                        | (ValueKind::Lte, Some(Ordering::Less | Ordering::Equal))
                ))
            }
            ValueKind::And | ValueKind::Or => {
                argument(h, name, 0)?;
                let mut truthy = Vec::with_capacity(h.params().len());
                for i in 0..h.params().len() {
                    truthy.push(argument(h, name, i)?.is_truthy(false));
                }
                let all = self.kind == ValueKind::And;
                Json::Bool(if all { truthy.iter().all(|&t| t) } else { truthy.iter().any(|&t| t) })
            }
            ValueKind::Not => Json::Bool(!argument(h, name, 0)?.is_truthy(false)),
            ValueKind::Len => Json::from(match argument(h, name, 0)? {
                Json::Array(items) => items.len(),
                Json::Object(fields) => fields.len(),
                Json::String(s) => {
                    self.budget.charge(s.len() as u64 / 32)?;
                    s.chars().count()
                }
                _ => 0,
            }),
        };
        Ok(ScopedJson::Derived(result))
    }
}

impl ValueHelper {
    /// `{{lookup collection key}}`: a missing entry is a missing variable, named
    /// `collection.key`.
    fn lookup<'rc>(&self, h: &Helper<'rc>) -> Result<ScopedJson<'rc>, RenderError> {
        let collection = argument(h, "lookup", 0)?;
        let key = argument(h, "lookup", 1)?;
        let found = match collection {
            Json::Array(items) => key.as_u64().and_then(|i| usize::try_from(i).ok()).and_then(|i| items.get(i)),
            Json::Object(fields) => key.as_str().and_then(|k| fields.get(k)),
            _ => None,
        };
        match found {
            Some(value) => {
                self.budget.charge(self.budget.cost_of(value))?;
                Ok(ScopedJson::Derived(value.clone()))
            }
            None => {
                let key = match key {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let name = match h.param(0).and_then(PathAndJson::relative_path) {
                    Some(path) => format!("{path}.{key}"),
                    None => key,
                };
                Err(RenderErrorReason::MissingVariable(Some(name)).into())
            }
        }
    }
}
