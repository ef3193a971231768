//! The README stays true: every code block in it is run, or checked, against the real
//! `tidings-server` binary.
//!
//! # What each block gets
//! - `sh`: run by bash, `set -euo pipefail`, the blocks of one `## ` section in one bash
//!   process in README order (so the API section's `c` alias holds for its later blocks),
//!   each command at its own README line number: a failing command fails the test naming
//!   `README.md:N`. The server is the harness's, started once before the first block on a
//!   fresh store (sled, or PostgreSQL with `TIDINGS_E2E_STORE=postgres`), with the test DNS
//!   server, the SMTP submission listener and `TIDINGS_WEBHOOK_ALLOW_PRIVATE=true` (as the
//!   README tells a reader to start it to try webhooks); the blocks see `T` (its URL) and `K`
//!   and `TIDINGS_KEY` (the bootstrap key it printed), and run in a directory where `data` is
//!   the server's data dir, as `./data` is for a reader who ran `cargo run` there. On PATH
//!   first (`readme/wrappers.py`):
//!   - `curl`: the real one, with `<nameId>` placeholders filled in; it must answer 2xx,
//!     unless the command's line ends in a comment that starts with a status
//!     (`c -X POST $T/v1/… # 409 conflict`): then exactly that one.
//!   - `tidings-server`: the real binary; operator commands (`workspace`, `key`, `migrate`)
//!     on a second data dir no server runs on (on sled they need the server stopped), a
//!     `migrate` without `TIDINGS_DATABASE_URL` on a scratch database; a server in the
//!     background (its output in `servers/<pid>.log`): after the section it must have
//!     printed its listening line, and it is stopped. The block's own `TIDINGS_*` win.
//!   - `cargo`: `cargo run … -p tidings-server` is the harness's server (no second build),
//!     `cargo test …` is what runs this test; anything else fails.
//!   - `./test` (the README's test command) is a stand-in that says it runs this test.
//!   - `npm install resend@<version>` links the Resend SDK that `tests/sdk/resend-node` pins
//!     (`npm ci` there first if needed) instead of downloading it; `node` is the real one.
//!   - `swaks` is the real one (`./test` installs it; plain `cargo test` skips a block that
//!     calls it when it is missing, saying so, as `tool_available` does for every test).
//! - `text`: a Prometheus sample: every `# HELP`/`# TYPE` line and every sample's series
//!   (values aside; `...` lines skipped) must be in the server's real `/metrics` after the
//!   blocks ran (it has delivered mail; one message is also read by id, as in the sample).
//! - `python`: must parse (`ast.parse`); `ruby`: `ruby -c` where ruby is installed, else
//!   the output says it was not checked.
//! - `rust`: must be an `examples/*/src/main.rs` as it is (the workspace builds them).
//! - Any other language, `ignore`, or none: the test fails.
//!
//! # Substitutions
//! Only what a reader substitutes too. In every `sh` block: `https://127.0.0.1:8443` → the
//! server's URL (the reader's is that one; the harness's is on a free port), `tid_...` → its
//! key (the reader copies the one printed at first start). `<nameId>` (`<domainId>`,
//! `<messageId>`, …) → the id last seen for that name, as a reader copies it from the answer
//! above: a response's `data.id` (`data[0].id` for a list) fills the name of the last
//! collection in its path (`/v1/domains/{id}`: `domainId`, `/v1/webhooks/{id}/deliveries`:
//! `deliveryId`; actions such as `/verify` or `/test` fill none); `workspace create` fills
//! `workspaceId`, `key create` `keyId`. Nothing else: dates are computed by the blocks
//! (`date -u -d '+1 hour'`), the files they send are made by them, and nothing is published
//! in DNS for them (a domain the README adds stays unverified, as it does for a reader).
//!
//! A block that cannot run as written says how it runs in an HTML comment right above it,
//! which the reader of the rendered README does not see:
//! ```text
//! <!-- readme-test: prose for the maintainer (any lines), then directives:
//! substitute db.internal:5432 => 127.0.0.1:5432
//! needs postgres
//! -->
//! ```
//! `substitute FROM => TO` replaces text before the harness's own substitutions (TO may use
//! the harness's variables: `$README_DATABASE_URL`, a scratch database; `$README_DATA_DIR`,
//! the server's data dir; `$README_SUBMISSION_ADDR`, its SMTP submission listener); `needs
//! postgres` skips the block, saying so, where no PostgreSQL answers. Such a substitution
//! must be one the reader makes too (their database, their secret's path) or the port of a
//! listener the harness started on a free one.
//!
//! # The world outside
//! Domain checks ask the test DNS server, which knows no name: a domain the README adds is
//! checked and stays unverified, and mail goes from the sandbox to the outbox (the default
//! transport), as for a reader on a fresh server. The webhook receiver is the README's own
//! (on loopback). The one file a block reads that it does not make, the nodes' sealing key
//! (`tidings-key`, in place of the reader's secret), is written in their working directory.

mod blocks;
mod checks;
mod hook;
mod shell;

use crate::common;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use blocks::Block;
use hook::Hook;
use tidings_e2e::{DataDir, Options, ScratchDatabase, on_postgres};

/// CI (`.ci/run`) runs the README's test command: the line of the opening block that starts
/// with `./test`, as written there, is a line of `.ci/run` that is not a comment.
#[test]
fn ci_runs_the_readmes_test_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let opening = blocks::parse(&readme).into_iter().find(|b| b.lang == "sh").expect("the opening sh block");
    let command =
        opening.lines.iter().find(|l| l.starts_with("./test")).expect("the test command in the opening block");
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(|l| l == command.as_str()),
        ".ci/run does not run the README's test command as written: {command:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_readme_block_runs_or_is_checked() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let all = blocks::parse(&readme);
    let mut failures: Vec<String> = all
        .iter()
        .filter(|b| !matches!(b.lang.as_str(), "sh" | "text" | "python" | "ruby" | "rust"))
        .map(|b| format!("{}: a `{}` block: the readme test knows sh, text, python, ruby and rust", b.at(), b.lang))
        .collect();

    // The server every sh block talks to, and what the operator commands run on.
    let env = vec![("TIDINGS_WEBHOOK_ALLOW_PRIVATE".to_owned(), "true".to_owned())];
    let options = Options { submission: true, bootstrap_key: None, env, ..Options::default() };
    let (server, dns) = common::start_with_dns(options).await;
    assert!(
        server.stdout_lines().iter().any(|l| l.starts_with("bootstrap key: tid_")),
        "a fresh server prints its bootstrap key (README's first block)"
    );
    let cli_data = DataDir::new();
    let admin_url = std::env::var("TIDINGS_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let scratch = ScratchDatabase::create_on(&admin_url, "tidings_readme")
        .map_err(|e| println!("no PostgreSQL at {admin_url} ({e}): `needs postgres` blocks are skipped"))
        .ok();

    let expected: HashMap<usize, u16> = all
        .iter()
        .filter(|b| b.lang == "sh")
        .flat_map(|b| b.lines.iter().enumerate().map(move |(i, l)| (b.fence_line + 1 + i, l)))
        .filter_map(|(n, l)| Some((n, blocks::expected_status(l)?)))
        .collect();
    let hook = Hook::start(expected).await;
    let mut env = BTreeMap::from([
        ("T".to_owned(), server.url("")),
        ("K".to_owned(), server.key().to_owned()),
        ("TIDINGS_KEY".to_owned(), server.key().to_owned()),
        ("README_HOOK".to_owned(), hook.url()),
        ("README_SERVER_BIN".to_owned(), tidings_e2e::server_binary().display().to_string()),
        ("README_DNS_SERVER".to_owned(), dns.addr().to_string()),
        ("README_CLI_DATA_DIR".to_owned(), cli_data.path().display().to_string()),
        ("README_DATA_DIR".to_owned(), server.data_dir().path().display().to_string()),
        ("README_SUBMISSION_ADDR".to_owned(), server.submission_addr().to_string()),
        ("README_RESEND_SDK_DIR".to_owned(), root.join("tests/sdk/resend-node").display().to_string()),
    ]);
    if let Some(url) = cli_data.database_url() {
        env.insert("README_CLI_DATABASE_URL".to_owned(), url);
    }
    if let Some(scratch) = &scratch {
        env.insert("README_DATABASE_URL".to_owned(), scratch.url());
    }
    let work = shell::Workspace::new(env);
    // `./data` of the blocks is the server's data dir, as for a reader who ran it there.
    std::os::unix::fs::symlink(server.data_dir().path(), work.path().join("data")).expect("link ./data");
    let table =
        vec![("https://127.0.0.1:8443".to_owned(), server.url("")), ("tid_...".to_owned(), server.key().to_owned())];

    // The sh blocks, a section at a time, in README order.
    let mut sections: Vec<Vec<(Block, Vec<String>)>> = Vec::new();
    // The programs beyond bash, curl and python3 that blocks call, and where they come from.
    let tools = [("swaks", "apt-get install swaks"), ("npm", "install Node.js 20 and npm (Debian: nodejs, npm)")];
    for block in all.iter().filter(|b| b.lang == "sh") {
        let calls = |tool: &str| block.lines.iter().any(|l| l.trim_start().starts_with(&format!("{tool} ")));
        if let Some((tool, _)) = tools.iter().find(|(tool, install)| {
            calls(tool) && !tidings_e2e::tool_available("readme", Command::new(tool).arg("--version"), install)
        }) {
            println!("{}: skipped: `{tool}` is not installed", block.at());
            continue;
        }
        if block.directives.needs_postgres && scratch.is_none() {
            println!("{}: skipped: it needs PostgreSQL, and none answers at {admin_url}", block.at());
            continue;
        }
        let lines = shell::prepare(block, &table);
        match sections.last_mut() {
            Some(section) if section[0].0.section == block.section => section.push((block.clone(), lines)),
            _ => sections.push(vec![(block.clone(), lines)]),
        }
    }
    for section in &sections {
        let name = &section[0].0.section;
        let run = {
            let section = section.clone();
            let work = &work;
            tokio::task::block_in_place(move || work.run_section(&section))
        };
        match run {
            Ok(transcript) => println!("## {name}: ran {} block(s)\n{transcript}", section.len()),
            Err(error) => failures.push(format!("## {name}: {error}")),
        }
    }
    println!("commands judged:\n{}", hook.log().join("\n"));

    // The metrics sample, against this server after all that: it has delivered a message
    // (the sample's latency histogram needs one) and, as in the sample, read one by id.
    match delivered_message(&server).await {
        Some(id) => {
            let (status, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
            assert_eq!(status, 200, "GET /v1/messages/{id}: {body}");
        }
        None => failures.push("the blocks got no message delivered within 10 s".to_owned()),
    }
    let metrics = server.request(reqwest::Method::GET, "/metrics").send().await.expect("GET /metrics");
    let metrics = metrics.text().await.expect("the metrics");
    for block in all.iter().filter(|b| b.lang == "text") {
        failures.extend(checks::metrics_sample(block, &metrics));
    }
    for block in all.iter().filter(|b| matches!(b.lang.as_str(), "python" | "ruby")) {
        match checks::syntax(block) {
            Ok(true) => println!("{}: {} parses", block.at(), block.lang),
            Ok(false) => println!("{}: not checked: {} is not installed", block.at(), block.lang),
            Err(error) => failures.push(error),
        }
    }
    for block in all.iter().filter(|b| b.lang == "rust") {
        match checks::rust_example(block, root) {
            Ok(file) => println!("{}: is {file}", block.at()),
            Err(error) => failures.push(error),
        }
    }
    if on_postgres() {
        println!("(store: PostgreSQL)");
    }
    assert!(failures.is_empty(), "README.md is not true:\n\n{}", failures.join("\n\n"));
}

/// The id of a message the server has delivered, waiting up to 10 s for one.
async fn delivered_message(server: &tidings_e2e::TestServer) -> Option<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, body) = server.get("/v1/messages?status=Delivered&limit=1", server.key()).await;
        assert_eq!(status, 200, "list delivered messages: {body}");
        if let Some(id) = body["data"][0]["id"].as_str() {
            return Some(id.to_owned());
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
