//! The top-level modules of `tidings-core` (`core/src/*.rs`, `core/src/*/`) depend on each
//! other without cycles, so that core reads in layers (ARCHITECTURE.md, "Layers of core"):
//! leaf values, the model, the ports, the domain services, the use cases, and the workers and
//! front ends over them. A cycle makes every module in it a dependency of every other, and
//! the layers stop meaning anything.
//!
//! A module depends on another when code in any of its files names `crate::other::...` (also
//! `crate::{other::...}`, a `super::` path that climbs to the crate root, and the root's
//! re-exports such as `crate::Error`, which stand for `crate::error`). Comments, doc links and
//! string literals do not count, nor does code under `#[cfg(test)]` or `#[cfg(doc)]`: a test
//! may reach anywhere, and a doc link is not a dependency. The scan reads the sources as text
//! rather than asking the compiler, so it also checks that it reached every file under
//! `core/src` and understood every root name it met; otherwise it fails rather than pass
//! on a partial graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// For each module, the modules it depends on, each with the files (relative to `src`) that
/// make the dependency.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `text` with the contents of comments and of string and char literals replaced by spaces
/// (newlines kept), so that every byte offset still points at the same place in `text`. A
/// string keeps its quotes, so an attribute's value can be read back from `text`.
fn blank_non_code(text: &str) -> Vec<u8> {
    let src = text.as_bytes();
    let mut out = src.to_vec();
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        let after_ident = i > 0 && is_ident_byte(src[i - 1]);
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&b| b == b'\n').map_or(src.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < src.len() && depth > 0 {
                if src[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(open) = raw_string_opening(src, i).filter(|_| !after_ident) {
            // r"..", r#".."#, br"..": ends at the first quote followed by as many hashes.
            let hashes = open - 2 - usize::from(src[i] == b'b');
            let mut j = i + open;
            while j < src.len()
                && !(src[j] == b'"' && src[j + 1..].iter().take_while(|&&b| b == b'#').count() >= hashes)
            {
                j += 1;
            }
            blank(&mut out, i + open, j);
            i = j + 1 + hashes;
        } else if src[i] == b'"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != b'"' {
                j += if src[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j.min(src.len()));
            i = j + 1;
        } else if src[i] == b'\'' {
            // A char literal ('x', '\n', '\u{1F600}', 'é'), or else a lifetime or label.
            let end = if rest.get(1) == Some(&b'\\') {
                rest.iter().skip(3).position(|&b| b == b'\'').map(|n| i + 3 + n)
            } else {
                let width = rest.get(1).map_or(1, |&b| utf8_width(b));
                (rest.get(1 + width) == Some(&b'\'')).then_some(i + 1 + width)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `code[from..to]` as spaces, newlines kept.
fn blank(code: &mut [u8], from: usize, to: usize) {
    for b in &mut code[from..to] {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// The length of `r"`, `r##"`, `br#"`... if a raw string starts at `i`.
fn raw_string_opening(src: &[u8], i: usize) -> Option<usize> {
    let start = if src[i] == b'b' { i + 1 } else { i };
    if src.get(start) != Some(&b'r') {
        return None;
    }
    let hashes = src[start + 1..].iter().take_while(|&&b| b == b'#').count();
    (src.get(start + 1 + hashes) == Some(&b'"')).then_some(start + 2 + hashes - i)
}

fn utf8_width(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// The end of the item that starts at or after `i` (after any further attributes): just past
/// its `;`, or past the `}` closing its body.
fn item_end(code: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < code.len() {
        match code[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    code.len()
}

/// The end of the attribute that opens at `i` (`#[`), just past its `]`.
fn attribute_end(code: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    for (j, &b) in code.iter().enumerate().skip(i + 1) {
        match b {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// The identifier starting at `i`, if one does.
fn ident_at(code: &[u8], i: usize) -> Option<&str> {
    let len = code[i..].iter().take_while(|&&b| is_ident_byte(b)).count();
    (len > 0).then(|| std::str::from_utf8(&code[i..i + len]).unwrap_or_default())
}

fn skip_space(code: &[u8], mut i: usize) -> usize {
    while code.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Whether the keyword `word` stands at `i` (not inside a longer identifier).
fn keyword_at(code: &[u8], i: usize, word: &str) -> bool {
    code[i..].starts_with(word.as_bytes())
        && (i == 0 || !is_ident_byte(code[i - 1]))
        && !code.get(i + word.len()).copied().is_some_and(is_ident_byte)
}

/// The first segment of each path in the `{...}` group that opens at `i`.
fn group_heads(code: &[u8], i: usize) -> Vec<String> {
    let (mut heads, mut depth, mut expecting) = (Vec::new(), 0usize, true);
    for (j, &b) in code.iter().enumerate().skip(i) {
        match b {
            b'{' => {
                depth += 1;
                expecting = depth == 1;
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => expecting = true,
            _ if expecting && is_ident_byte(b) => {
                heads.extend(ident_at(code, j).map(str::to_owned));
                expecting = false;
            }
            _ => {}
        }
    }
    heads
}

/// One source file: its code outside `#[cfg(test)]`/`#[cfg(doc)]` items, and the module
/// files it declares, split into live ones and test-only ones.
struct Parsed {
    live: Vec<u8>,
    children: Vec<PathBuf>,
    test_children: Vec<PathBuf>,
}

fn parse(file: &Path) -> Parsed {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let mut live = blank_non_code(&text);
    let dir = file.parent().unwrap_or(Path::new("."));
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let child_dir = if matches!(stem, "mod" | "lib") { dir.to_path_buf() } else { dir.join(stem) };
    let (mut children, mut test_children) = (Vec::new(), Vec::new());
    let mut test_items: Vec<(usize, usize)> = Vec::new();
    let (mut i, mut path_attr) = (0, None::<String>);
    while i < live.len() {
        let in_test_item = test_items.last().is_some_and(|&(_, end)| i < end);
        if live[i..].starts_with(b"#[") {
            let end = attribute_end(&live, i);
            let attribute: String =
                String::from_utf8_lossy(&live[i + 2..end - 1]).chars().filter(|c| !c.is_whitespace()).collect();
            if (attribute == "cfg(test)" || attribute == "cfg(doc)") && !in_test_item {
                test_items.push((i, item_end(&live, end)));
            } else if attribute.starts_with("path=\"") {
                // The value was blanked; read it back from the text at the same offsets.
                path_attr = text[i..end].split('"').nth(1).map(str::to_owned);
            }
            i = end;
        } else if keyword_at(&live, i, "mod") {
            let name_at = skip_space(&live, i + 3);
            let name = ident_at(&live, name_at).unwrap_or_default().to_owned();
            let after = skip_space(&live, name_at + name.len());
            if live.get(after) == Some(&b';') {
                let target = match path_attr.take() {
                    Some(path) => dir.join(path),
                    None if child_dir.join(format!("{name}.rs")).exists() => child_dir.join(format!("{name}.rs")),
                    None => child_dir.join(&name).join("mod.rs"),
                };
                if in_test_item {
                    test_children.push(target);
                } else {
                    children.push(target);
                }
            }
            i = after;
        } else {
            if matches!(live[i], b';' | b'{' | b'}') {
                path_attr = None;
            }
            i += 1;
        }
    }
    for (start, end) in test_items {
        blank(&mut live, start, end);
    }
    Parsed { live, children, test_children }
}

/// The root names `crate::...` paths in `live` start with (the root is `depth` modules up
/// from this file, and one more inside each inline `mod name { ... }`).
fn root_names(live: &[u8], depth: usize) -> Vec<String> {
    let mut names = Vec::new();
    let (mut braces, mut inline_mods) = (0usize, Vec::<usize>::new());
    let mut i = 0;
    while i < live.len() {
        match live[i] {
            b'{' => braces += 1,
            b'}' => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            _ => {}
        }
        if keyword_at(live, i, "mod") {
            let name_at = skip_space(live, i + 3);
            let after = skip_space(live, name_at + ident_at(live, name_at).map_or(0, str::len));
            if live.get(after) == Some(&b'{') {
                inline_mods.push(braces);
            }
        }
        let path_from_root = if keyword_at(live, i, "crate") && live[i + 5..].starts_with(b"::") {
            Some(i + 7)
        } else if keyword_at(live, i, "super") && (i < 2 || &live[i - 2..i] != b"::") {
            let mut j = i;
            let mut ups = 0;
            while keyword_at(live, j, "super") && live[j + 5..].starts_with(b"::") {
                ups += 1;
                j += 7;
            }
            (ups > 0 && ups >= depth + inline_mods.len()).then_some(j)
        } else {
            None
        };
        if let Some(at) = path_from_root {
            if live.get(at) == Some(&b'{') {
                names.extend(group_heads(live, at));
            } else {
                names.extend(ident_at(live, at).map(str::to_owned));
            }
            i = at;
            continue;
        }
        i += 1;
    }
    names
}

/// The crate's top-level modules (declared in `lib.rs`, outside test code) and the names the
/// root re-exports, each with the module it comes from.
fn root(src: &Path) -> (BTreeMap<String, PathBuf>, BTreeMap<String, String>) {
    let lib = parse(&src.join("lib.rs"));
    let modules = lib
        .children
        .iter()
        .map(|file| {
            let name =
                if file.ends_with("mod.rs") { file.parent().and_then(Path::file_name) } else { file.file_stem() };
            (name.and_then(|n| n.to_str()).unwrap_or_default().to_owned(), file.clone())
        })
        .collect();
    let mut reexports = BTreeMap::new();
    let code = String::from_utf8_lossy(&lib.live).into_owned();
    for statement in code.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else { continue };
        let Some((module, rest)) = path.split_once("::") else { continue };
        for name in rest.trim_matches(|c| c == '{' || c == '}' || char::is_whitespace(c)).split(',') {
            let name = name.rsplit(" as ").next().unwrap_or_default().rsplit("::").next().unwrap_or_default();
            reexports.insert(name.trim().to_owned(), module.trim().to_owned());
        }
    }
    (modules, reexports)
}

/// The dependency graph of the top-level modules under `src`. Fails if a file under `src`
/// was not reached from `lib.rs`, or a `crate::` name was neither a module nor a re-export.
fn module_graph(src: &Path) -> Graph {
    let (modules, reexports) = root(src);
    let mut graph = Graph::new();
    let mut reached = BTreeSet::from([src.join("lib.rs")]);
    let mut unknown = BTreeSet::new();
    for (module, file) in &modules {
        let edges = graph.entry(module.clone()).or_default();
        let mut pending = vec![(file.clone(), 1)];
        while let Some((file, depth)) = pending.pop() {
            reached.insert(file.clone());
            let parsed = parse(&file);
            let relative = file.strip_prefix(src).unwrap_or(&file).display().to_string();
            for name in root_names(&parsed.live, depth) {
                let target = if modules.contains_key(&name) { Some(&name) } else { reexports.get(&name) };
                match target {
                    Some(target) if target != module => {
                        edges.entry(target.clone()).or_default().insert(relative.clone());
                    }
                    Some(_) => {}
                    None => {
                        unknown.insert(format!("crate::{name} in {relative}"));
                    }
                }
            }
            reached.extend(parsed.test_children);
            pending.extend(parsed.children.into_iter().map(|child| (child, depth + 1)));
        }
    }
    let mut unreached = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !reached.contains(&path) {
                unreached.push(path.display().to_string());
            }
        }
    }
    assert!(unreached.is_empty(), "the scan did not reach these files from lib.rs: {unreached:?}");
    assert!(unknown.is_empty(), "the scan met root names it cannot place: {unknown:?}");
    graph
}

/// The strongly connected components of more than one module (Tarjan's algorithm), each sorted.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            let graph = self.graph;
            for w in graph.get(v).into_iter().flat_map(BTreeMap::keys) {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|&u| u == v).unwrap_or(0);
                let mut component: Vec<String> = self.stack.drain(at..).map(str::to_owned).collect();
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan =
        Tarjan { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !tarjan.index.contains_key(v.as_str()) {
            tarjan.visit(v);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

/// One shortest cycle through the first module of `component`, each step with the files that
/// make it: what to read to break it.
fn describe(graph: &Graph, component: &[String]) -> String {
    let start = component[0].as_str();
    let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for w in graph[v].keys().filter(|w| component.contains(w)) {
            if w == start {
                previous.insert(start, v);
                break 'search;
            }
            if !previous.contains_key(w.as_str()) {
                previous.insert(w.as_str(), v);
                queue.push_back(w.as_str());
            }
        }
    }
    let mut path = vec![start];
    let mut at = previous.get(start).copied();
    while let Some(v) = at.filter(|&v| v != start) {
        path.push(v);
        at = previous.get(v).copied();
    }
    path.push(start);
    path.reverse();
    let steps: Vec<String> =
        path.windows(2).map(|pair| format!("  {} -> {}  ({:?})", pair[0], pair[1], graph[pair[0]][pair[1]])).collect();
    format!("{} modules in a cycle: {}\n  for instance:\n{}", component.len(), component.join(", "), steps.join("\n"))
}

#[test]
fn the_top_level_modules_of_core_depend_on_each_other_without_cycles() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let edges: usize = graph.values().map(BTreeMap::len).sum();
    assert!(
        graph.len() > 20 && edges > 80,
        "only {} modules and {edges} dependencies: is the scan broken?",
        graph.len()
    );
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "core's top-level modules depend on each other in cycles; move what sits on the wrong side \
         down (ARCHITECTURE.md, \"Layers of core\"):\n{}",
        found.iter().map(|c| describe(&graph, c)).collect::<Vec<_>>().join("\n")
    );
}

/// The layers ARCHITECTURE.md lists under "Layers of core": every top-level module its n-th
/// item names (`core/src/name.rs` or `core/src/name/`) is in layer n.
fn documented_layers() -> BTreeMap<String, usize> {
    let map = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md at the root of the workspace");
    let section = map.split("#### Layers of core").nth(1).expect("ARCHITECTURE.md has a \"Layers of core\" section");
    let mut layers = BTreeMap::new();
    let mut layer = None;
    for line in section.lines() {
        let numbered = line.split_once(". ").and_then(|(n, _)| n.parse::<usize>().ok());
        match (numbered, layer) {
            (Some(n), _) => layer = Some(n),
            (None, Some(_)) if line.trim().is_empty() => break,
            _ => {}
        }
        let Some(n) = layer else { continue };
        for span in line.split('`').skip(1).step_by(2) {
            let Some(rest) = span.strip_prefix("core/src/") else { continue };
            let module = match rest.strip_suffix('/') {
                Some(dir) => dir,
                None => rest.strip_suffix(".rs").unwrap_or(rest),
            };
            if !module.contains('/') {
                layers.insert(module.to_owned(), n);
            }
        }
    }
    layers
}

#[test]
fn each_module_depends_only_on_its_own_layer_and_those_below_as_architecture_md_says() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let layers = documented_layers();
    let unplaced: Vec<&String> = graph.keys().filter(|m| !layers.contains_key(*m)).collect();
    assert!(unplaced.is_empty(), "put these modules in a layer of ARCHITECTURE.md's \"Layers of core\": {unplaced:?}");
    let upward: Vec<String> = graph
        .iter()
        .flat_map(|(from, deps)| deps.iter().map(move |(to, files)| (from, to, files)))
        .filter(|(from, to, _)| layers[to.as_str()] > layers[from.as_str()])
        .map(|(from, to, files)| {
            format!("  {from} (layer {}) -> {to} (layer {})  ({files:?})", layers[from.as_str()], layers[to.as_str()])
        })
        .collect();
    assert!(upward.is_empty(), "these modules depend on a higher layer than their own:\n{}", upward.join("\n"));
}

/// The scan on a crate made up for it: a cycle through a grouped `use`, a root re-export and
/// a `super::super` path is found, and comments, strings, test code and doc-only imports are
/// not taken for dependencies.
#[test]
fn the_scan_finds_a_cycle_and_ignores_comments_strings_and_test_code() {
    let src = std::env::temp_dir().join(format!("tidings-module-graph-{}", std::process::id()));
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub use d::{Thing, Other as Renamed};\n"),
        (
            "a.rs",
            "use crate::{b::{X, Y}, Thing};\n// crate::c::Z\nconst S: &str = \"crate::c\";\nconst C: char = '\"';\n",
        ),
        ("b/mod.rs", "mod inner;\n#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod tests;\n"),
        ("b/inner.rs", "fn f() -> u8 { super::super::a::g() }\n"),
        ("b/b_tests.rs", "use crate::c::Z;\n"),
        (
            "c.rs",
            "#[cfg(doc)]\nuse crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n    fn f() { let s = \"}\"; }\n}\nfn g<'a>(x: &'a str) -> &'a str { crate::d::h(x) }\n",
        ),
        ("d.rs", "mod helpers {\n    use super::super::c::Q;\n}\n/* crate::a::A /* nested */ crate::b::B */\n"),
    ];
    for (path, text) in files {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    let graph = module_graph(&src);
    std::fs::remove_dir_all(&src).unwrap();

    let deps = |m: &str| graph[m].keys().cloned().collect::<Vec<_>>();
    assert_eq!(deps("a"), ["b", "d"], "a names b in a grouped use and d through the root's Thing");
    assert_eq!(deps("b"), ["a"], "b/inner.rs climbs to the root with super::super");
    assert_eq!(deps("c"), ["d"], "c's doc-only import and test module do not count");
    assert_eq!(deps("d"), ["c"], "an inline module's super::super reaches the root");
    assert_eq!(graph["b"]["a"], BTreeSet::from(["b/inner.rs".to_owned()]));
    assert_eq!(cycles(&graph), [vec!["a".to_owned(), "b".to_owned()], vec!["c".to_owned(), "d".to_owned()]]);
    assert!(describe(&graph, &cycles(&graph)[0]).contains("a -> b"));
}
