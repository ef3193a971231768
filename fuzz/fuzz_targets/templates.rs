//! Template sources from clients: compiling and rendering never panics (the engine turns a
//! panic inside handlebars into an internal error, which must never happen either) and stays
//! within its limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use tidings_core::templates::{CompiledTemplate, TemplateSource};

fuzz_target!(|src: &str| {
    let source = TemplateSource { subject: src, html: Some(src), text: Some(src) };
    let Ok(compiled) = CompiledTemplate::compile(&source) else { return };
    let variables = json!({"name": "Ann <b>", "items": [1, 2, {"a": "b"}], "n": 3, "nested": {"x": [true, null]}});
    if let Err(e) = compiled.render(variables.as_object().unwrap()) {
        assert!(!e.to_string().contains("internal error"), "{e}");
    }
});
