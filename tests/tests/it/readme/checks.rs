//! The blocks that are not run: a metrics sample compared with a real `/metrics`, framework
//! settings parsed by their language, the embedding example compared with its file.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::blocks::Block;

/// Every line of a Prometheus sample (`text` block) that names something, against the real
/// exposition `actual`: `# HELP` and `# TYPE` lines as they are, each sample's series
/// (name and labels, not the value) as the start of one of its lines. `...` lines stand for
/// what was left out. The failures, one per line.
pub fn metrics_sample(block: &Block, actual: &str) -> Vec<String> {
    let actual: Vec<&str> = actual.lines().collect();
    let mut failures = Vec::new();
    for (offset, line) in block.lines.iter().enumerate() {
        let number = block.fence_line + 1 + offset;
        let line = line.trim();
        if line.is_empty() || line == "..." {
            continue;
        }
        let found = if line.starts_with('#') {
            actual.contains(&line)
        } else {
            let Some((series, _value)) = line.rsplit_once(' ') else {
                failures.push(format!("README.md:{number}: `{line}` is not a sample (series value)"));
                continue;
            };
            actual.iter().any(|l| l.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')))
        };
        if !found {
            failures.push(format!("README.md:{number}: `{line}` is not in the server's /metrics (a `text` block is read as a Prometheus sample)"));
        }
    }
    failures
}

/// The block parses as `lang` (`python`: `ast.parse`; `ruby`: `ruby -c`). `Ok(false)` when
/// the language's tool is not installed (said, not failed).
pub fn syntax(block: &Block) -> Result<bool, String> {
    let (program, args): (&str, &[&str]) = match block.lang.as_str() {
        "python" => ("python3", &["-c", "import ast, sys; ast.parse(sys.stdin.read())"]),
        "ruby" => ("ruby", &["-c"]),
        other => return Err(format!("{}: no syntax check for `{other}`", block.at())),
    };
    if super::shell::which(program).is_none() {
        return Ok(false);
    }
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: run {program}: {e}", block.at()))?;
    child.stdin.take().expect("piped stdin").write_all(block.text().as_bytes()).expect("write the block");
    let output = child.wait_with_output().expect("wait for the syntax check");
    if output.status.success() {
        Ok(true)
    } else {
        Err(format!("{}: not valid {}: {}", block.at(), block.lang, String::from_utf8_lossy(&output.stderr)))
    }
}

/// A `rust` block is one of the workspace's examples, `examples/*/src/main.rs`, as it is
/// (which the workspace builds and `.ci/run` runs): the file's path, or why not.
pub fn rust_example(block: &Block, workspace: &Path) -> Result<String, String> {
    let text = format!("{}\n", block.text());
    let examples = std::fs::read_dir(workspace.join("examples")).map_err(|e| format!("read examples/: {e}"))?;
    for example in examples.flatten() {
        let main = example.path().join("src/main.rs");
        if std::fs::read_to_string(&main).is_ok_and(|file| file == text) {
            return Ok(main.strip_prefix(workspace).unwrap_or(&main).display().to_string());
        }
    }
    Err(format!("{}: this rust block is no examples/*/src/main.rs as it is: make it one, so it is built", block.at()))
}
