//! `OutboxMailer`: messages become `.eml` files, whole, once per message.

use std::fs;

use crate::common::email;
use tidings_core::ports::{Mailer, SendError};
use tidings_transport_smtp::OutboxMailer;

fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn each_message_becomes_an_eml_file_with_its_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = OutboxMailer::new(dir.path()).unwrap();
    let message = email(1);

    let receipt = outbox.send(&message).await.unwrap();

    assert_eq!(receipt.remote, "outbox");
    assert_eq!(receipt.reply.to_string(), "250 2.0.0 saved as msg1@acme.test.eml");
    assert_eq!(files_in(dir.path()), ["msg1@acme.test.eml"], "no temporary file left behind");
    assert_eq!(fs::read(outbox.path_for(&message)).unwrap(), &message.raw[..]);
}

#[tokio::test]
async fn sending_a_message_again_leaves_one_identical_file() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = OutboxMailer::new(dir.path()).unwrap();
    let message = email(1);

    outbox.send(&message).await.unwrap();
    outbox.send(&message).await.unwrap();
    outbox.send(&email(2)).await.unwrap();

    assert_eq!(files_in(dir.path()), ["msg1@acme.test.eml", "msg2@acme.test.eml"]);
    assert_eq!(fs::read(outbox.path_for(&message)).unwrap(), &message.raw[..]);
}

#[tokio::test]
async fn the_outbox_directory_is_created_when_missing() {
    let dir = tempfile::tempdir().unwrap();
    let outbox_dir = dir.path().join("data").join("outbox");

    let outbox = OutboxMailer::new(&outbox_dir).unwrap();
    outbox.send(&email(1)).await.unwrap();

    assert_eq!(files_in(&outbox_dir), ["msg1@acme.test.eml"]);
}

#[tokio::test]
async fn an_outbox_that_cannot_be_written_is_a_local_error() {
    let dir = tempfile::tempdir().unwrap();
    let outbox_dir = dir.path().join("outbox");
    let outbox = OutboxMailer::new(&outbox_dir).unwrap();
    fs::remove_dir(&outbox_dir).unwrap();

    let error = outbox.send(&email(1)).await.unwrap_err();

    let SendError::Local { reason } = &error else { panic!("{error:?}") };
    assert!(
        reason.starts_with(&format!("cannot write {}", outbox_dir.join("msg1@acme.test.eml").display())),
        "{reason}"
    );
}

#[test]
fn an_outbox_path_that_is_a_file_is_a_config_error() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let error = OutboxMailer::new(file.path()).unwrap_err();
    assert!(error.to_string().starts_with("cannot use the outbox directory"), "{error}");
}
