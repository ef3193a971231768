//! The binary's command line, without serving: `--help` documents the configuration (the
//! same variables and defaults as the README's table) and a bad setting stops it before
//! anything starts. (Having an integration test here also makes `cargo test` build the
//! `tidings-server` binary that `tidings-e2e` runs.)

use std::collections::BTreeMap;
use std::process::Command;

use tidings_server::config::Settings;

fn server() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tidings-server"));
    command.env_clear();
    command
}

fn help() -> String {
    let output = server().arg("--help").output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

/// Each variable `--help` names, with its `[default: …]` if it shows one.
fn help_defaults(help: &str) -> BTreeMap<String, Option<String>> {
    let mut vars = BTreeMap::new();
    let mut lines = help.lines().map(str::trim).peekable();
    while let Some(line) = lines.next() {
        let Some(env) = line.strip_prefix("[env: ") else { continue };
        let var = env.trim_end_matches(']').split('=').next().unwrap().to_owned();
        let default =
            lines.peek().and_then(|l| l.strip_prefix("[default: ")).map(|d| d.trim_end_matches(']').to_owned());
        assert!(vars.insert(var.clone(), default).is_none(), "{var} twice in --help");
    }
    vars
}

/// Each variable of the README's configuration table, with its default cell.
fn readme_defaults() -> BTreeMap<String, String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = readme.split("\n## Configuration\n").nth(1).expect("a Configuration section");
    let section = section.split("\n## ").next().unwrap();
    let mut vars = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `TIDINGS_")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        // A row may name several variables: `TIDINGS_TLS_CERT`, `TIDINGS_TLS_KEY`.
        for var in cells[0].split('`').filter(|p| p.starts_with("TIDINGS_")) {
            assert!(vars.insert(var.to_owned(), cells[1].to_owned()).is_none(), "{var} twice in the README");
        }
    }
    vars
}

#[test]
fn help_lists_every_setting_with_its_variable() {
    let help = help();
    let listed = help_defaults(&help);
    for var in Settings::variables().iter().chain([&"TIDINGS_CONFIG".to_owned()]) {
        assert!(listed.contains_key(var), "{var} missing from --help");
    }
    assert_eq!(listed.len(), Settings::variables().len() + 1, "{listed:?}");
    assert!(help.contains("workspace") && help.contains("key") && help.contains("migrate"));
}

#[test]
fn the_readme_table_has_the_variables_and_defaults_of_help() {
    let help = help_defaults(&help());
    let readme = readme_defaults();
    assert_eq!(help.keys().collect::<Vec<_>>(), readme.keys().collect::<Vec<_>>(), "the same variables");
    for (var, default) in help {
        let cell = &readme[&var];
        match default {
            Some(default) => assert_eq!(*cell, format!("`{default}`"), "{var}: README default differs from --help"),
            None => assert!(cell.starts_with("unset"), "{var} has no default in --help but `{cell}` in the README"),
        }
    }
}

#[test]
fn help_never_shows_a_secret_from_the_environment() {
    let secrets = [
        ("TIDINGS_SECRET_KEY", "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio="),
        ("TIDINGS_PREVIOUS_SECRET_KEY", "CgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgo="),
        ("TIDINGS_BOOTSTRAP_KEY", "tid_aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd"),
        ("TIDINGS_SMTP_RELAY", "smtp://user:hunter2@relay.example:587"),
        ("TIDINGS_METRICS_TOKEN", "scrape-me-if-you-can-0123456789"),
        ("TIDINGS_DATABASE_URL", "postgres://tidings:hunter3@db/tidings"),
    ];
    let output = server().envs(secrets).arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    for (var, secret) in secrets {
        assert!(help.contains(&format!("[env: {var}]")), "{var}");
        assert!(!help.contains(secret), "{var}'s value shown");
    }
}

#[test]
fn a_flag_sets_a_setting_and_its_errors_name_the_variable() {
    let output = server().args(["--idle-timeout", "soon"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("TIDINGS_IDLE_TIMEOUT (from command line --idle-timeout)"), "{stderr}");
}

#[test]
fn a_bad_setting_in_the_file_exits_2_naming_the_variable_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidings.toml");
    std::fs::write(&path, "max_body_bytes = \"lots\"\n").unwrap();
    let output = server().env("TIDINGS_CONFIG", &path).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains(&format!("TIDINGS_MAX_BODY_BYTES (from config file {})", path.display())), "{stderr}");
}

#[test]
fn a_bad_setting_exits_2_naming_the_variable() {
    let output = server().env("TIDINGS_IDEMPOTENCY_WINDOW", "a while").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("TIDINGS_IDEMPOTENCY_WINDOW"), "{stderr}");
}
