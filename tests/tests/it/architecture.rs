//! ARCHITECTURE.md stays true: every path it names in backticks exists in the repository,
//! every crate it names is a member, and every Rust item it names (`Type`, `Type::method`,
//! `snake_case_function`) is defined somewhere in the workspace's sources. A rename or a
//! move that forgets the map fails here, naming what the map still cites.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The text of every `.rs` file under `dir`, skipping build output and hidden directories.
fn sources(dir: &Path, out: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            sources(&path, out);
        } else if name.ends_with(".rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            out.push('\n');
        }
    }
}

/// The spans of `text` between backticks, outside fenced blocks.
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            spans.push(span.to_owned());
        }
    }
    spans
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether the sources define `name` as a type, trait, variant, function or method.
fn defined(all: &str, name: &str) -> bool {
    let starts_upper = name.starts_with(|c: char| c.is_ascii_uppercase());
    if starts_upper {
        ["struct ", "enum ", "trait ", "type "].iter().any(|k| all.contains(&format!("{k}{name}")))
            || all.contains(&format!("    {name},"))
            || all.contains(&format!("    {name} {{"))
            || all.contains(&format!("    {name}("))
    } else {
        all.contains(&format!("fn {name}(")) || all.contains(&format!("fn {name}<"))
    }
}

#[test]
fn every_path_crate_and_item_architecture_md_names_exists() {
    let root = root();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root");
    let mut all = String::new();
    sources(&root, &mut all);
    let manifests: String = ["core", "storage-sled", "storage-postgres", "transport-smtp", "http-adapter", "dashboard"]
        .iter()
        .chain(
            ["inbound-smtp", "dns-hickory", "webhook-http", "testing", "tests", "examples/server", "examples/embed"]
                .iter(),
        )
        .map(|c| std::fs::read_to_string(root.join(c).join("Cargo.toml")).unwrap_or_default())
        .collect();

    let mut missing = BTreeSet::new();
    let mut checked = 0;
    for span in code_spans(&map) {
        let span = span.trim();
        if span.starts_with("../") || span.starts_with('/') || span.contains(' ') {
            continue; // outside the repository, a URL path, or prose (`POST /v1/messages`)
        }
        if span.contains('/') {
            checked += 1;
            if !root.join(span.trim_end_matches('/')).exists() {
                missing.insert(format!("path {span}"));
            }
        } else if let Some(krate) = span.strip_prefix("tidings-") {
            checked += 1;
            if !manifests.contains(&format!("name = \"tidings-{krate}\"")) {
                missing.insert(format!("crate {span}"));
            }
        } else if let Some((owner, item)) = span.split_once("::") {
            if is_ident(owner) && is_ident(item) {
                checked += 1;
                if !defined(&all, owner) || !defined(&all, item) {
                    missing.insert(format!("item {span}"));
                }
            }
        } else if is_ident(span) && (span.contains('_') || span.chars().any(|c| c.is_ascii_uppercase())) {
            checked += 1;
            if !defined(&all, span) {
                missing.insert(format!("item {span}"));
            }
        }
    }
    assert!(checked > 80, "the check found only {checked} names to check: is the parsing broken?");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}
