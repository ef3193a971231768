//! Checks on a compiled unit that handlebars does not make: every helper used exists and is
//! used the way it works (a block as a block, a value helper as a value), and there are no
//! partials or decorators (which the scan refuses already). Done when a template is created,
//! so that a typo in a helper name is a syntax error then rather than a render error at
//! every send.

use handlebars::template::{HelperTemplate, Parameter, TemplateElement, TemplateMapping};
use handlebars::{Path, Template};

use super::compile::{Position, syntax_error};
use super::{MAX_SUBEXPRESSION_DEPTH, TemplateError, TemplatePart, helpers, truncate_for_message};

/// Checks a compiled unit: helpers that exist and are used the right way, no partials or
/// decorators (the scan refuses those already).
pub(super) struct Checker<'a> {
    /// The part being compiled.
    pub(super) part: TemplatePart,
    /// Where the unit is in the source.
    pub(super) position: Position<'a>,
}

impl Checker<'_> {
    /// Checks `root` and every block in it.
    pub(super) fn check(&self, root: &Template) -> Result<(), TemplateError> {
        // Iterative, although the scan bounds the depth.
        let mut stack = vec![root];
        while let Some(template) = stack.pop() {
            for (i, element) in template.elements.iter().enumerate() {
                let at = template.mapping.get(i);
                match element {
                    TemplateElement::RawString(_) | TemplateElement::Comment(_) => {}
                    TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                        self.check_expression(ht, at)?;
                    }
                    TemplateElement::HelperBlock(ht) => {
                        self.check_block(ht, at)?;
                        stack.extend(ht.template.as_ref());
                        stack.extend(ht.inverse.as_ref());
                    }
                    _ => return Err(self.error_at(at, "partials and decorators are not supported".to_owned())),
                }
            }
        }
        Ok(())
    }

    fn check_expression(&self, ht: &HelperTemplate, at: Option<&TemplateMapping>) -> Result<(), TemplateError> {
        let name = helper_name(&ht.name);
        if ht.params.is_empty() && ht.hash.is_empty() {
            // A value, unless the name is a helper's: handlebars would call the helper.
            if let Some(name) = name.filter(|n| helpers::is_block_helper(n) || helpers::is_value_helper(n)) {
                return Err(self.error_at(at, format!("\"{name}\" is a helper and needs arguments")));
            }
        } else {
            match name {
                Some(name) if helpers::is_value_helper(name) => {}
                Some(name) if helpers::is_block_helper(name) => {
                    return Err(self.error_at(at, format!("\"{name}\" must be used as a block: {{{{#{name} ...}}}}")));
                }
                Some(name) => {
                    let name = truncate_for_message(name);
                    return Err(self.error_at(at, format!("unknown helper \"{name}\"")));
                }
                None => return Err(self.error_at(at, "unknown helper".to_owned())),
            }
        }
        self.check_arguments(ht, at, 0)
    }

    fn check_block(&self, ht: &HelperTemplate, at: Option<&TemplateMapping>) -> Result<(), TemplateError> {
        match helper_name(&ht.name) {
            Some(name) if helpers::is_block_helper(name) => {}
            Some(name) if helpers::is_value_helper(name) => {
                return Err(self.error_at(
                    at,
                    format!("\"{name}\" is not a block helper; use it inside one: {{{{#if ({name} ...)}}}}"),
                ));
            }
            Some(name) => {
                let name = truncate_for_message(name);
                return Err(self.error_at(
                    at,
                    format!(
                        "unknown block helper \"{name}\" (sections are written {{{{#if {name}}}}} or {{{{#each {name}}}}})"
                    ),
                ));
            }
            None => return Err(self.error_at(at, "unknown block helper".to_owned())),
        }
        self.check_arguments(ht, at, 0)
    }

    /// Subexpressions in the arguments must call value helpers.
    fn check_arguments(
        &self,
        ht: &HelperTemplate,
        at: Option<&TemplateMapping>,
        depth: usize,
    ) -> Result<(), TemplateError> {
        if depth > MAX_SUBEXPRESSION_DEPTH {
            return Err(TemplateError::TooComplex {
                part: self.part,
                reason: format!("more than {MAX_SUBEXPRESSION_DEPTH} nested subexpressions"),
            });
        }
        let arguments = std::iter::once(&ht.name).chain(&ht.params).chain(ht.hash.values());
        for argument in arguments {
            let Parameter::Subexpression(sub) = argument else { continue };
            let TemplateElement::Expression(inner) = sub.as_element() else { continue };
            match helper_name(&inner.name) {
                Some(name) if helpers::is_value_helper(name) => {}
                name => {
                    let name = truncate_for_message(name.unwrap_or_default());
                    return Err(self.error_at(at, format!("unknown helper \"{name}\" in a subexpression")));
                }
            }
            self.check_arguments(inner, at, depth + 1)?;
        }
        Ok(())
    }

    fn error_at(&self, at: Option<&TemplateMapping>, reason: String) -> TemplateError {
        let at = at.map(|m| self.position.source_offset(m.0, m.1));
        syntax_error(self.part, self.position.src, at, reason)
    }
}

/// The name an expression or subexpression calls (or, without arguments, looks up).
pub(super) fn helper_name(p: &Parameter) -> Option<&str> {
    match p {
        Parameter::Name(name) => Some(name),
        Parameter::Path(Path::Relative((_, raw)) | Path::Local((_, _, raw))) => Some(raw),
        _ => None,
    }
}
