//! The independent verifiers: scripts in `tests/interop/` run over every delivered message in
//! one invocation each (dkimpy and Python's `email` package, Perl's Mail::DKIM, checkdmarc,
//! SpamAssassin), their verdicts gathered into one table of items × checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// What to install when a verifier is missing (`./test` does).
pub const INSTALL: &str = "install the interop verifiers: `pip install dkimpy==1.1.8 dnspython==2.9.2 checkdmarc==6.0.4` \
     and `apt-get install libmail-dkim-perl libnet-dns-perl`";

/// What to install when SpamAssassin is missing (`./test` does).
pub const SPAM_INSTALL: &str = "install SpamAssassin: `apt-get install spamassassin`";

/// The columns of the message table, in order, as the scripts name them (mail-auth's, the
/// signing library's own verdict, are the test's).
pub const MESSAGE_CHECKS: [&str; 16] = [
    "delivered",
    "mail-auth rsa-sha256",
    "mail-auth ed25519-sha256",
    "dkimpy rsa-sha256",
    "dkimpy ed25519-sha256",
    "Mail::DKIM rsa-sha256",
    "d= is the From domain",
    "signed headers",
    "CRLF only",
    "no NUL",
    "lines <= 998",
    "transfer encoding",
    "parser defects",
    "text alternative",
    "file names",
    "text charset",
];

/// One verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Whether the check passed.
    pub ok: bool,
    /// The verifier's reason (its error on a failure).
    pub reason: String,
}

/// Verdicts by item, then by check.
pub type Verdicts = BTreeMap<String, BTreeMap<String, Verdict>>;

/// Whether every verifier can run (see [`tidings_e2e::tool_available`]).
pub fn installed(test: &str) -> bool {
    let python = "import dkim, dns.resolver, nacl, checkdmarc";
    tidings_e2e::tool_available(test, Command::new("python3").args(["-c", python]), INSTALL)
        && tidings_e2e::tool_available(
            test,
            Command::new("perl").args(["-MMail::DKIM::Verifier", "-MNet::DNS::Resolver", "-e", "1"]),
            INSTALL,
        )
}

/// Whether SpamAssassin's Perl modules load (see [`tidings_e2e::tool_available`]).
pub fn spamassassin_installed(test: &str) -> bool {
    tidings_e2e::tool_available(
        test,
        Command::new("perl").args(["-MMail::SpamAssassin", "-MJSON::PP", "-e", "1"]),
        SPAM_INSTALL,
    )
}

/// One message's SpamAssassin result.
#[derive(Debug, Clone, Default)]
pub struct SpamScore {
    /// The total.
    pub score: f64,
    /// Each rule hit and its points.
    pub rules: BTreeMap<String, f64>,
}

impl SpamScore {
    /// `RULE=points` of every rule hit that scores (not the informational ±0.001 ones).
    pub fn scoring_rules(&self) -> String {
        let hits: Vec<String> =
            self.rules.iter().filter(|(_, p)| p.abs() >= 0.01).map(|(r, p)| format!("{r}={p}")).collect();
        if hits.is_empty() { "-".to_owned() } else { hits.join(" ") }
    }
}

/// SpamAssassin's local-rules score of each of `files` (`spam_score.pl`, one process for
/// all), by file. Panics, saying what to install, when it cannot run.
pub fn spam_scores(files: &[String]) -> BTreeMap<String, SpamScore> {
    let output = Command::new("perl")
        .arg(script("spam_score.pl"))
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("cannot run perl ({e}): {SPAM_INSTALL}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(3) => panic!("spam_score.pl: {stderr}\n{SPAM_INSTALL}"),
        _ => panic!("spam_score.pl failed ({}):\n{stderr}", output.status),
    }
    let mut scores = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("spam_score.pl printed a line that is not JSON ({e}): {line}"));
        let item = v["item"].as_str().unwrap_or_else(|| panic!("no item in {line}")).to_owned();
        let score = v["score"].as_f64().unwrap_or_else(|| panic!("no score in {line}"));
        let rules = v["rules"]
            .as_object()
            .map(|o| o.iter().map(|(k, p)| (k.clone(), p.as_f64().unwrap_or(0.0))).collect())
            .unwrap_or_default();
        scores.insert(item, SpamScore { score, rules });
    }
    scores
}

/// `tests/interop/<script>`.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop").join(name)
}

/// Runs `program script args…` and reads its JSON lines into `verdicts`, the item renamed by
/// `name_of`. Panics, saying what to install, when the program or a module is missing, and
/// with its output when it fails otherwise.
pub fn run(program: &str, name: &str, args: &[String], name_of: &dyn Fn(&str) -> String, verdicts: &mut Verdicts) {
    let output = Command::new(program)
        .arg(script(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): {INSTALL}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(3) => panic!("{name}: {stderr}\n{INSTALL}"),
        _ => panic!("{name} failed ({}):\n{stderr}\n{}", output.status, String::from_utf8_lossy(&output.stdout)),
    }
    for line in String::from_utf8_lossy(&output.stdout).lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name} printed a line that is not JSON ({e}): {line}"));
        let field = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("{name}: no `{k}` in {line}")).to_owned();
        let ok = v["ok"].as_bool().unwrap_or_else(|| panic!("{name}: no `ok` in {line}"));
        verdicts
            .entry(name_of(&field("item")))
            .or_default()
            .insert(field("check"), Verdict { ok, reason: field("reason") });
    }
}

/// The table of `items` (under `header`) × `checks` (`ok`, `FAIL`, `-` for no verdict), then every failure
/// with its reason; and the failures as `(item, check, reason)`. A missing verdict is a
/// failure too: a verifier that said nothing did not pass the message.
pub fn table(
    header: &str,
    items: &[String],
    checks: &[&str],
    verdicts: &Verdicts,
) -> (String, Vec<(String, String, String)>) {
    let width = items.iter().map(|i| i.chars().count()).max().unwrap_or(0).max(header.chars().count());
    let mut out = format!("{header:width$}");
    for n in 1..=checks.len() {
        out.push_str(&format!(" | {n:>2}"));
    }
    out.push('\n');
    let mut failures = Vec::new();
    for item in items {
        out.push_str(&format!("{item:width$}"));
        for check in checks {
            match verdicts.get(item).and_then(|v| v.get(*check)) {
                Some(verdict) if verdict.ok => out.push_str(" | ok"),
                Some(verdict) => {
                    out.push_str(" | XX");
                    failures.push((item.clone(), (*check).to_owned(), verdict.reason.clone()));
                }
                None => {
                    out.push_str(" |  -");
                    failures.push((item.clone(), (*check).to_owned(), "no verdict".to_owned()));
                }
            }
        }
        out.push('\n');
    }
    out.push_str("columns:");
    for (n, check) in checks.iter().enumerate() {
        out.push_str(&format!(" {}={check};", n + 1));
    }
    let passed = items.len() * checks.len() - failures.len();
    out.push_str(&format!(
        "\n{} items × {} checks: {passed} passed, {} failed\n",
        items.len(),
        checks.len(),
        failures.len()
    ));
    for (item, check, reason) in &failures {
        out.push_str(&format!("FAIL {item} × {check}: {reason}\n"));
    }
    (out, failures)
}
