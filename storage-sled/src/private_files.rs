//! The store's directory and the sealing key file are this user's alone, whoever embeds the
//! store: the directory holds every message sent and the sealed secrets, the key file opens
//! those secrets. This is the library's guarantee, not only the server binary's (which also
//! sets its umask and narrows the rest of its data dir).
//!
//! - [`SledStore::open`](crate::SledStore::open) creates its directory `700`, and takes group
//!   and other permissions away from one made earlier by hand or by an older version. The
//!   files sled creates inside (with the process's umask) are then out of others' reach
//!   too: nobody else may enter the directory.
//! - [`load_or_create_sealing_key`] keeps the sealing key in a file created `600` (never
//!   readable by others, even for an instant). A key file made by someone else (a secrets
//!   mount, a file the operator wrote) is read as it is: its permissions are its maker's.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tidings_core::ports::SystemRandom;
use tidings_core::sealing::{SealingKey, SealingKeyError};

/// Permission bits of group and others.
#[cfg(unix)]
const GROUP_AND_OTHERS: u32 = 0o077;

/// Creates `dir` (and its missing parents) `700`; an existing `dir` loses any permission of
/// group and others. Returns the mode it had when it was narrowed (for the caller to log),
/// `None` when there was nothing to change.
pub fn make_private_dir(dir: &Path) -> io::Result<Option<u32>> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    narrow(dir)
}

#[cfg(unix)]
fn narrow(path: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(path)?.permissions().mode() & 0o7777;
    if mode & GROUP_AND_OTHERS == 0 {
        return Ok(None);
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode & !GROUP_AND_OTHERS))?;
    Ok(Some(mode))
}

#[cfg(not(unix))]
fn narrow(_path: &Path) -> io::Result<Option<u32>> {
    Ok(None)
}

/// Where [`load_or_create_sealing_key`] found the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrigin {
    /// The file existed: the key of earlier starts.
    Existing,
    /// The file did not exist: a new key was generated and written. Tell the operator to
    /// keep a copy apart from the store: without it the sealed secrets cannot be opened.
    Generated,
}

/// Why the sealing key file could not be used. Never shows the file's content.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file could not be created, written or read.
    #[error("cannot use the sealing key file {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// The file holds no key (not the base64 of 32 bytes).
    #[error("the sealing key file {path} holds no key: {source}")]
    Invalid {
        /// The key file.
        path: PathBuf,
        /// What is wrong with its content.
        #[source]
        source: SealingKeyError,
    },
}

/// The sealing key kept in `path`: read when the file exists, else generated and written
/// there, `600` and synced before it is used (so a crash cannot leave secrets sealed with a
/// key that was never stored). The file holds the key's base64 and a newline. Two processes
/// starting at once cannot each write a key: the file is created only if absent, and the
/// loser reads the winner's.
pub fn load_or_create_sealing_key(path: &Path) -> Result<(SealingKey, KeyOrigin), KeyFileError> {
    let io = |source| KeyFileError::Io { path: path.to_owned(), source };
    let key = SealingKey::generate(&SystemRandom);
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => {
            file.write_all(format!("{}\n", key.to_base64().expose()).as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
            Ok((key, KeyOrigin::Generated))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok((read_sealing_key(path)?, KeyOrigin::Existing)),
        Err(e) => Err(io(e)),
    }
}

/// The key in the file at `path`: the base64 of 32 bytes, whitespace around it ignored.
pub fn read_sealing_key(path: &Path) -> Result<SealingKey, KeyFileError> {
    let text = fs::read_to_string(path).map_err(|source| KeyFileError::Io { path: path.to_owned(), source })?;
    SealingKey::from_base64(&text).map_err(|source| KeyFileError::Invalid { path: path.to_owned(), source })
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use tidings_core::sealing::Sealer;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_directory_and_its_missing_parents_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data/store");
        assert_eq!(make_private_dir(&dir).unwrap(), None);
        assert_eq!((mode(&dir), mode(&tmp.path().join("data"))), (0o700, 0o700));
    }

    #[test]
    fn an_existing_directory_open_to_others_is_narrowed_and_says_from_what() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(make_private_dir(&dir).unwrap(), Some(0o755));
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(make_private_dir(&dir).unwrap(), None, "nothing left to change");
    }

    #[test]
    fn opening_a_store_makes_its_directory_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let store = crate::SledStore::open(&dir, tidings_testing::fixtures::sealer()).unwrap();
        assert_eq!((store.narrowed_at_open(), mode(&dir)), (Some(0o755), 0o700));
        drop(store);
        let fresh = tmp.path().join("new/store");
        let store = crate::SledStore::open(&fresh, tidings_testing::fixtures::sealer()).unwrap();
        assert_eq!((store.narrowed_at_open(), mode(&fresh), mode(&tmp.path().join("new"))), (None, 0o700, 0o700));
    }

    #[test]
    fn the_key_is_generated_once_then_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sealing.key");
        let (first, origin) = load_or_create_sealing_key(&path).unwrap();
        assert_eq!((origin, mode(&path)), (KeyOrigin::Generated, 0o600));
        let (again, origin) = load_or_create_sealing_key(&path).unwrap();
        assert_eq!(origin, KeyOrigin::Existing);
        let check = Sealer::new(&first).key_check().unwrap();
        assert!(Sealer::new(&again).verify_key_check(&check).is_ok(), "the same key");
    }

    #[test]
    fn a_key_file_that_holds_no_key_is_refused_without_its_content() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sealing.key");
        fs::write(&path, "not a key, secret-ish\n").unwrap();
        let err = load_or_create_sealing_key(&path).unwrap_err();
        assert!(matches!(err, KeyFileError::Invalid { .. }), "{err}");
        assert!(!err.to_string().contains("secret-ish"), "{err}");
    }
}
