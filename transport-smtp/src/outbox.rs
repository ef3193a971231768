//! [`OutboxMailer`]: writes each message to `<dir>/<id>.eml` instead of sending it, which is
//! what a new installation does until real delivery is configured (`TIDINGS_DELIVERY=outbox`).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tidings_core::ids::MessageId;
use tidings_core::ports::{Mailer, OutboundEmail, SendError, SendReceipt, SmtpReply};

use crate::config::ConfigError;
use crate::outbox_writes::GroupWriter;

/// Temporary files start with this and end with [`TEMP_SUFFIX`]; leftovers of a crash are
/// removed at start.
const TEMP_PREFIX: &str = ".tidings-";
const TEMP_SUFFIX: &str = ".tmp";

/// Writes each message, byte for byte as it would go on the wire, to
/// `<dir>/<provider message id>.eml` (the message id when the provider id is not a safe file
/// name). Each file appears whole or not at all (temporary file, fsync, rename, fsync of
/// the directory; the files waiting at once are written as a group by one thread, see
/// `outbox_writes.rs`), and sending the same message again replaces its file with identical
/// bytes, so retries are harmless. The receipt is `250` from remote `outbox`.
#[derive(Debug, Clone)]
pub struct OutboxMailer {
    dir: Arc<Path>,
    /// Shared by the clones; its thread stops when the last one is dropped.
    writer: Arc<GroupWriter>,
}

impl OutboxMailer {
    /// Uses `dir`, creating it (and its parents) `700` if needed, and removing temporary
    /// files a crash left behind. Messages are written `600`: they are other people's mail.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        let dir: PathBuf = dir.into();
        let failed = |source| ConfigError::Outbox { path: dir.clone(), source };
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(failed)?;
        for entry in fs::read_dir(&dir).map_err(failed)? {
            let entry = entry.map_err(failed)?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX) {
                // Best effort: a leftover that cannot be removed does no harm.
                let _ = fs::remove_file(entry.path());
            }
        }
        let writer = GroupWriter::start(&dir, TEMP_PREFIX, TEMP_SUFFIX).map_err(failed)?;
        Ok(Self { dir: dir.into(), writer: Arc::new(writer) })
    }

    /// The directory messages are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file `email` is (or would be) written to.
    pub fn path_for(&self, email: &OutboundEmail) -> PathBuf {
        self.dir.join(file_name(email))
    }

    /// The name of the file of the message `message_id` whose `Message-ID` on the wire is
    /// `provider_message_id` (the message's `providerMessageId`): for readers of the outbox,
    /// such as the dashboard's `.eml` download, which must find exactly the file written.
    pub fn file_name(message_id: MessageId, provider_message_id: &str) -> String {
        let id = provider_message_id;
        let safe = !id.is_empty()
            && id.len() <= 200
            && !id.starts_with('.')
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@+=".contains(&b));
        if safe { format!("{id}.eml") } else { format!("{message_id}.eml") }
    }
}

#[async_trait]
impl Mailer for OutboxMailer {
    async fn send(&self, email: &OutboundEmail) -> Result<SendReceipt, SendError> {
        let name = file_name(email);
        match self.writer.write(name.clone(), email.raw.clone()).await {
            Ok(()) => Ok(SendReceipt {
                reply: SmtpReply::new(250, &format!("2.0.0 saved as {name}")),
                remote: "outbox".to_owned(),
                tls: None,
            }),
            Err(error) => {
                let path = self.dir.join(&name);
                Err(SendError::Local { reason: format!("cannot write {}: {error}", path.display()) })
            }
        }
    }

    /// The outbox only writes files: the one transport that may deliver the sandbox domain.
    fn keeps_mail_local(&self) -> bool {
        true
    }
}

/// `<provider message id>.eml` when that id is a plain file name, else `<message id>.eml`.
fn file_name(email: &OutboundEmail) -> String {
    OutboxMailer::file_name(email.message_id, &email.provider_message_id)
}

#[cfg(test)]
mod tests {
    use tidings_core::email::EmailAddress;
    use tidings_core::ids::MessageId;

    use super::*;

    fn email(provider_message_id: &str) -> OutboundEmail {
        OutboundEmail {
            message_id: MessageId::from_bytes([7; 16]),
            provider_message_id: provider_message_id.to_owned(),
            envelope_from: EmailAddress::parse("bounces@acme.test").unwrap(),
            envelope_to: EmailAddress::parse("to@example.com").unwrap(),
            raw: (&b"Subject: hi\r\n\r\nhello\r\n"[..]).into(),
        }
    }

    #[test]
    fn provider_ids_that_are_plain_file_names_name_the_file() {
        assert_eq!(file_name(&email("01HX@acme.test")), "01HX@acme.test.eml");
        let fallback = format!("{}.eml", MessageId::from_bytes([7; 16]));
        for unsafe_id in ["", "../escape@acme.test", ".hidden", "a/b", "sp ace", &"x".repeat(201)] {
            assert_eq!(file_name(&email(unsafe_id)), fallback, "{unsafe_id:?}");
        }
    }

    #[test]
    fn leftover_temporary_files_are_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let leftover = dir.path().join(format!("{TEMP_PREFIX}abc{TEMP_SUFFIX}"));
        let kept = dir.path().join("01HX@acme.test.eml");
        fs::write(&leftover, b"half").unwrap();
        fs::write(&kept, b"whole").unwrap();
        OutboxMailer::new(dir.path()).unwrap();
        assert!(!leftover.exists());
        assert!(kept.exists());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_outbox_and_its_messages_are_readable_by_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let root = tempfile::tempdir().unwrap();
        let outbox = OutboxMailer::new(root.path().join("data/outbox")).unwrap();
        assert_eq!(mode(outbox.dir()), 0o700);
        let message = email("01HX@acme.test");
        outbox.send(&message).await.unwrap();
        assert_eq!(mode(&outbox.path_for(&message)), 0o600);
    }
}
