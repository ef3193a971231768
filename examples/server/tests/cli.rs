//! The binary's command line, without serving: `--help` documents the configuration and a
//! bad setting stops it before anything starts. (Having an integration test here also makes
//! `cargo test` build the `tidings-server` binary that `tidings-e2e` runs.)

use std::process::Command;

fn server() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tidings-server"));
    command.env_clear();
    command
}

#[test]
fn help_lists_every_setting() {
    let output = server().arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for var in [
        "TIDINGS_LISTEN",
        "TIDINGS_DATA_DIR",
        "TIDINGS_SPF_INCLUDE",
        "TIDINGS_RETURN_PATH_DOMAIN",
        "TIDINGS_SECRET_KEY",
        "TIDINGS_SECRET_KEY_FILE",
    ] {
        assert!(help.contains(var), "{var} missing from --help");
    }
    assert!(help.contains("workspace") && help.contains("key"));
}

#[test]
fn a_bad_setting_exits_2_naming_the_variable() {
    let output = server().env("TIDINGS_IDEMPOTENCY_WINDOW", "a while").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("TIDINGS_IDEMPOTENCY_WINDOW"), "{stderr}");
}
