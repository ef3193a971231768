//! Runs a section's `sh` blocks in one bash process, each command at its own README line
//! number, with the wrappers of `wrappers.py` first on PATH; then checks and stops the
//! servers the blocks started in the background.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::blocks::Block;
use super::hook::marker;

/// Longest one section may run.
const SECTION_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a server a block started may take to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// `set -euo pipefail` for every command; the DEBUG trap tells the wrappers the README line
/// of the command they run; the ERR trap names the line that failed; on the way out, the
/// jobs left in the background are listed for the harness to check and stop.
const PRELUDE: &str = r#"set -euo pipefail
shopt -s expand_aliases
trap 'export README_LINE=$LINENO' DEBUG
trap 'echo "README.md:$LINENO: failed with exit status $?" >&2' ERR
trap 'jobs -p > .background' EXIT
"#;

/// The working directory's `./test`.
const STAND_IN_TEST: &str = "#!/bin/sh\n\
    echo \"README.md:$README_LINE: (readme test) ./test${*:+ $*} is what runs this test; not run again\"\n";

/// Where the blocks run: a working directory with the fixtures they read, and the
/// wrappers' directory.
pub struct Workspace {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl Workspace {
    /// A fresh working directory with the fixtures and wrappers; `env` is the blocks'
    /// whole environment besides PATH, HOME and the harness's own variables.
    pub fn new(env: BTreeMap<String, String>) -> Self {
        let dir = tempfile::tempdir().expect("a working directory");
        let bin = dir.path().join(".bin");
        std::fs::create_dir(&bin).expect("the wrappers' directory");
        let python = String::from_utf8(
            Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().expect("python3").stdout,
        )
        .expect("a path");
        let script = format!("#!{}\n{}", python.trim(), include_str!("wrappers.py"));
        let wrapper = bin.join("readme-wrapper");
        std::fs::write(&wrapper, script).expect("write the wrapper");
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&wrapper, executable).expect("make the wrapper executable");
        for name in ["curl", "tidings-server", "cargo", "npm"] {
            std::os::unix::fs::symlink(&wrapper, bin.join(name)).expect("link a wrapper");
        }
        std::fs::write(dir.path().join(".prelude.sh"), PRELUDE).expect("write the prelude");
        // The one file a block reads and does not make: the nodes' sealing key, in place of the
        // reader's secret (`substitute /run/secrets/tidings-key => tidings-key`).
        std::fs::write(dir.path().join("tidings-key"), format!("{}\n", tidings_e2e::SHARED_SECRET_KEY)).unwrap();
        // `./test`, the README's test command, is what runs this test: its stand-in says so.
        let test = dir.path().join("test");
        std::fs::write(&test, STAND_IN_TEST).expect("write ./test");
        std::fs::set_permissions(&test, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod ./test");
        let real_curl = which("curl").expect("curl on PATH");
        let mut env = env;
        env.insert("README_REAL_CURL".into(), real_curl.display().to_string());
        let path = std::env::var("PATH").unwrap_or_default();
        env.insert("PATH".into(), format!("{}:{path}", bin.display()));
        env.insert("HOME".into(), std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()));
        Self { dir, env }
    }

    /// The working directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `blocks` (one section's, in order) in one bash; the transcript, or an error
    /// with it.
    pub fn run_section(&self, blocks: &[(Block, Vec<String>)]) -> Result<String, String> {
        let mut script = String::from(". ./.prelude.sh\n");
        // The README line the next script line stands for.
        let mut line = 2;
        for (block, lines) in blocks {
            while line < block.fence_line + 1 {
                script.push('\n');
                line += 1;
            }
            for text in lines {
                script.push_str(text);
                script.push('\n');
                line += 1;
            }
        }
        let path = self.path().join(".section.sh");
        std::fs::write(&path, script).expect("write the section's script");
        let out = self.path().join(".out");
        let stdout = std::fs::File::create(&out).expect("a transcript file");
        let stderr = stdout.try_clone().expect("the same file");
        let mut child = Command::new("bash")
            .arg(&path)
            .current_dir(self.path())
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("run bash");
        let deadline = Instant::now() + SECTION_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for bash") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let transcript = std::fs::read_to_string(&out).unwrap_or_default();
        let (servers, problems) = self.stop_servers();
        match status {
            Some(status) if status.success() && problems.is_empty() => Ok(format!("{transcript}\n{servers}")),
            Some(status) => Err(format!("bash {status}:\n{}\n{problems}", tail(&transcript))),
            None => Err(format!("still running after {SECTION_TIMEOUT:?}:\n{}\n{problems}", tail(&transcript))),
        }
    }

    /// Every job the blocks left in the background (`.background`): a server (the wrapper
    /// writes `servers/<pid>.line` before it becomes one) must print its listening line; then
    /// each gets SIGTERM and is waited for. What each did, and what went wrong.
    fn stop_servers(&self) -> (String, String) {
        let dir = self.path().join("servers");
        let (mut notes, mut problems) = (String::new(), String::new());
        let jobs = std::fs::read_to_string(self.path().join(".background")).unwrap_or_default();
        let _ = std::fs::remove_file(self.path().join(".background"));
        let pids: Vec<String> = jobs.split_whitespace().map(str::to_owned).collect();
        for pid in &pids {
            // The wrapper may not have got as far as writing its file when bash left.
            let marked = dir.join(format!("{pid}.line"));
            let deadline = Instant::now() + Duration::from_secs(5);
            while !marked.exists() && alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !marked.exists() {
                if alive(pid) {
                    notes.push_str(&format!("a background job ({pid}) that is no tidings-server: stopped\n"));
                    let _ = Command::new("kill").args(["-TERM", pid]).status();
                }
                continue;
            }
            let line = std::fs::read_to_string(dir.join(format!("{pid}.line"))).unwrap_or_default();
            let log = dir.join(format!("{pid}.log"));
            let deadline = Instant::now() + LISTEN_TIMEOUT;
            let listening = loop {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.contains("listening on https://") {
                    break true;
                }
                if !alive(pid) || Instant::now() >= deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            match text.lines().find_map(|l| l.strip_prefix("listening on ")).filter(|_| listening) {
                Some(url) => {
                    notes.push_str(&format!("README.md:{line}: its tidings-server listened on {url}; stopped\n"))
                }
                None => problems
                    .push_str(&format!("README.md:{line}: the tidings-server it started never listened:\n{text}\n")),
            }
            let _ = Command::new("kill").args(["-TERM", pid]).status();
        }
        for pid in &pids {
            let deadline = Instant::now() + Duration::from_secs(15);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if alive(pid) {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
            let _ = std::fs::remove_file(dir.join(format!("{pid}.line")));
        }
        (notes, problems)
    }
}

/// The end of a long transcript (each response is a line of JSON).
fn tail(transcript: &str) -> &str {
    const KEEP: usize = 6000;
    let mut start = transcript.len().saturating_sub(KEEP);
    while !transcript.is_char_boundary(start) {
        start += 1;
    }
    &transcript[start..]
}

fn alive(pid: &str) -> bool {
    // A zombie (exited, not yet reaped by its new parent) is as good as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// `name`'s path on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// A block's lines as they run: the block's own substitutions, then `table` (the README's
/// names for what the harness started), then `<nameId>` placeholders as markers the
/// wrappers resolve.
pub fn prepare(block: &Block, table: &[(String, String)]) -> Vec<String> {
    let rules = block.directives.substitutions.iter().chain(table);
    let text = rules.fold(block.text(), |text, (from, to)| text.replace(from, to));
    placeholders(&text).split('\n').map(str::to_owned).collect()
}

/// `<domainId>` → `@@domainId@@`: a name ending in `Id`, in angle brackets.
fn placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let name_len = after.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(after.len());
        let name = &after[..name_len];
        if name.ends_with("Id")
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && after[name_len..].starts_with('>')
        {
            out.push_str(&marker(name));
            rest = &after[name_len + 1..];
        } else {
            out.push('<');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_runs_at_its_readme_line() {
        let work = Workspace::new(BTreeMap::new());
        let block = |fence_line: usize, lines: &[&str]| {
            let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            let block = Block {
                lang: "sh".into(),
                fence_line,
                lines: lines.clone(),
                section: String::new(),
                directives: Default::default(),
            };
            (block, lines)
        };
        let section = [
            block(3, &["[ \"$LINENO\" -eq 4 ]", "echo one \\", "  two; [ \"$LINENO\" -eq 6 ]"]),
            block(9, &["[ \"$LINENO\" -eq 10 ]"]),
        ];
        work.run_section(&section).expect("every line where the README has it");
        let failing = [block(20, &["true", "false", "true"])];
        let error = work.run_section(&failing).expect_err("false fails");
        assert!(error.contains("README.md:22: failed with exit status 1"), "{error}");
    }

    #[test]
    fn id_placeholders_become_markers_and_markup_stays() {
        assert_eq!(
            placeholders(r#"c $T/v1/domains/<domainId> -d '{"t":"<templateId>","h":"<p>x</p>","l":"<https://a/u>"}'"#),
            r#"c $T/v1/domains/@@domainId@@ -d '{"t":"@@templateId@@","h":"<p>x</p>","l":"<https://a/u>"}'"#
        );
        assert_eq!(placeholders("data/outbox/<Id>.eml <ID>"), "data/outbox/<Id>.eml <ID>");
    }
}
