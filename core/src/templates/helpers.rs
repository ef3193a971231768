//! The helpers templates may use. Our own rather than handlebars' built-ins for two
//! reasons: the built-in `each` and `with` fail on a missing variable in strict mode, where we
//! want the `{{else}}` branch (see the module doc of `templates`); and each helper charges
//! the render's work budget for the work it causes (the elements of the blocks it renders,
//! per iteration, and the values it copies or compares) before doing it.

use std::cmp::Ordering;
use std::sync::Arc;

use handlebars::template::{Parameter, TemplateElement};
use handlebars::{
    BlockContext, BlockParams, Context, Handlebars, Helper, HelperDef, HelperResult, JsonTruthy, Output, Path,
    PathAndJson, RenderContext, RenderError, RenderErrorReason, Renderable, ScopedJson, Template,
};
use serde_json::Value as Json;

use super::engine::Budget;

/// Whether `name` is one of our block helpers.
pub(super) fn is_block_helper(name: &str) -> bool {
    BlockKind::ALL.iter().any(|k| k.name() == name)
}

/// Whether `name` is one of our value helpers.
pub(super) fn is_value_helper(name: &str) -> bool {
    ValueKind::ALL.iter().any(|k| k.name() == name)
}

/// Registers our helpers, charging `budget`.
pub(super) fn register(registry: &mut Handlebars<'static>, budget: &Arc<Budget>) {
    for kind in BlockKind::ALL {
        registry.register_helper(kind.name(), Box::new(BlockHelper { kind, budget: budget.clone() }));
    }
    for kind in ValueKind::ALL {
        registry.register_helper(kind.name(), Box::new(ValueHelper { kind, budget: budget.clone() }));
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
                self.budget.charge(self.budget.comparison_cost(a, b))?;
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
                let truthy = (0..h.params().len().max(1))
                    .map(|i| argument(h, name, i).map(|v| v.is_truthy(false)))
                    .collect::<Result<Vec<_>, _>>()?;
                Json::Bool(if self.kind == ValueKind::And { !truthy.contains(&false) } else { truthy.contains(&true) })
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
