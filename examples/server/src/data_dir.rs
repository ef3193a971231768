//! The data dir is the server's alone: it holds the store, the sealing key file, the TLS key
//! and the outbox, so nobody but the server's user may read it.
//!
//! - [`restrict_new_files`] sets the process umask to `077` (done first in `cli::main`), so
//!   that what libraries create later (sled's files and snapshots) is `600`/`700`.
//! - [`prepare`] creates the data dir `700` and, for a data dir made by an older version or
//!   by hand, takes every permission of group and others away from it and from everything
//!   the server keeps in it ([`SERVER_ENTRIES`]; not following symbolic links), logging once
//!   what it changed. Other files an operator put there are left alone: a data dir set to a
//!   home directory must not have the whole home narrowed.
//!
//! What the server creates itself is created with its mode set explicitly (`700` directories
//! with [`create_private_dir`], `600` files with [`write_private`]), whatever the umask.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};

/// What the server keeps in the data dir: the sled store, the key file, the generated TLS
/// files, the outbox, and the tracking key file of earlier versions.
pub const SERVER_ENTRIES: [&str; 5] = ["store", "secret.key", "tls", "outbox", "tracking.key"];

/// Permissions of group and others.
#[cfg(unix)]
const GROUP_AND_OTHERS: u32 = 0o077;

/// Sets the process umask to `077`: files and directories anything in this process creates
/// from now on are its user's only. Does nothing where there is no umask.
pub fn restrict_new_files() {
    #[cfg(unix)]
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(GROUP_AND_OTHERS));
}

/// `dir` and its missing parents, created `700` (an existing `dir` is left as it is).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Writes `contents` to `path` (replacing it), the file `600` whatever the umask; with
/// `new_only`, fails if `path` exists. Synced to disk before returning.
pub fn write_private(path: &Path, contents: &[u8], new_only: bool) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true);
    if new_only {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// A path whose permissions were narrowed, with its mode before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    /// The file or directory.
    pub path: PathBuf,
    /// Its mode before (permission bits).
    pub from: u32,
    /// Its mode now.
    pub to: u32,
}

/// Creates the data dir (`700`) if needed and takes group and other permissions away from it
/// and from everything the server keeps in it; logs once what changed and warns about what
/// could not be changed.
pub fn prepare(config: &Config) -> Result<(), ConfigError> {
    let dir = &config.data_dir;
    create_private_dir(dir)
        .map_err(|e| ConfigError::new("TIDINGS_DATA_DIR", None, format!("cannot create {}: {e}", dir.display())))?;
    let mut failed = Vec::new();
    let mut tightened = Vec::new();
    narrow(dir, &mut tightened, &mut failed);
    for entry in SERVER_ENTRIES {
        let path = dir.join(entry);
        if fs::symlink_metadata(&path).is_ok() {
            tightened.extend(tighten(&path, &mut failed));
        }
    }
    if !tightened.is_empty() {
        let shown: Vec<String> =
            tightened.iter().take(20).map(|t| format!("{} ({:o} -> {:o})", t.path.display(), t.from, t.to)).collect();
        let more = tightened.len().saturating_sub(shown.len());
        tracing::warn!(
            dir = %dir.display(),
            changed = tightened.len(),
            "the data dir was readable by other users: took group and other permissions away from {}{}",
            shown.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    for (path, e) in failed.iter().take(20) {
        tracing::warn!(path = %path.display(), "cannot take group and other permissions away: {e}");
    }
    Ok(())
}

/// Narrows `path` and, for a directory, everything under it; returns what changed and adds
/// what could not be read or changed to `failed`. Symbolic links are neither followed nor
/// changed.
pub fn tighten(path: &Path, failed: &mut Vec<(PathBuf, io::Error)>) -> Vec<Tightened> {
    let mut changed = Vec::new();
    tighten_into(path, &mut changed, failed);
    changed
}

/// Narrows `path` alone (not what a directory holds); whether it is a directory to walk (a
/// symbolic link is neither changed nor walked).
#[cfg(unix)]
fn narrow(path: &Path, changed: &mut Vec<Tightened>, failed: &mut Vec<(PathBuf, io::Error)>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) => {
            failed.push((path.to_owned(), e));
            return false;
        }
    };
    if meta.file_type().is_symlink() {
        return false;
    }
    let from = meta.permissions().mode() & 0o7777;
    if from & GROUP_AND_OTHERS != 0 {
        let to = from & !GROUP_AND_OTHERS;
        match fs::set_permissions(path, fs::Permissions::from_mode(to)) {
            Ok(()) => changed.push(Tightened { path: path.to_owned(), from, to }),
            Err(e) => failed.push((path.to_owned(), e)),
        }
    }
    meta.is_dir()
}

#[cfg(not(unix))]
fn narrow(_path: &Path, _changed: &mut Vec<Tightened>, _failed: &mut Vec<(PathBuf, io::Error)>) -> bool {
    false
}

fn tighten_into(path: &Path, changed: &mut Vec<Tightened>, failed: &mut Vec<(PathBuf, io::Error)>) {
    if narrow(path, changed, failed) {
        match fs::read_dir(path) {
            Ok(entries) => {
                for entry in entries {
                    match entry {
                        Ok(entry) => tighten_into(&entry.path(), changed, failed),
                        Err(e) => failed.push((path.to_owned(), e)),
                    }
                }
            }
            Err(e) => failed.push((path.to_owned(), e)),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn everything_under_the_dir_loses_group_and_other_permissions_and_links_are_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        fs::write(&outside, b"x").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).unwrap();
        let data = root.path().join("data");
        fs::create_dir_all(data.join("store/blobs")).unwrap();
        fs::write(data.join("store/db"), b"x").unwrap();
        fs::write(data.join("store/blobs/1"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, data.join("link")).unwrap();
        for (path, m) in [(&data, 0o755), (&data.join("store"), 0o750), (&data.join("store/blobs"), 0o700)] {
            fs::set_permissions(path, fs::Permissions::from_mode(m)).unwrap();
        }
        fs::set_permissions(data.join("store/db"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(data.join("store/blobs/1"), fs::Permissions::from_mode(0o600)).unwrap();

        let mut failed = Vec::new();
        let changed = tighten(&data, &mut failed);
        assert!(failed.is_empty(), "{failed:?}");
        let mut paths: Vec<_> = changed.iter().map(|t| (t.path.clone(), t.from, t.to)).collect();
        paths.sort();
        assert_eq!(
            paths,
            vec![
                (data.clone(), 0o755, 0o700),
                (data.join("store"), 0o750, 0o700),
                (data.join("store/db"), 0o644, 0o600)
            ]
        );
        assert_eq!(mode(&outside), 0o644, "a link's target outside is not touched");
        assert!(tighten(&data, &mut failed).is_empty(), "nothing left to change");
    }

    #[test]
    fn prepare_narrows_the_data_dir_and_the_servers_entries_and_leaves_the_rest_alone() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        fs::create_dir_all(data.join("store")).unwrap();
        fs::create_dir_all(data.join("notes")).unwrap();
        for (path, m) in [(data.join("secret.key"), 0o644), (data.join("store/db"), 0o644), (data.join("mine"), 0o644)]
        {
            fs::write(&path, b"x").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(m)).unwrap();
        }
        for dir in [&data, &data.join("store"), &data.join("notes")] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let text = data.display().to_string();
        let config = Config::load(None, |k| (k == "TIDINGS_DATA_DIR").then(|| text.clone())).unwrap();
        prepare(&config).unwrap();
        for (path, m) in [
            (data.clone(), 0o700),
            (data.join("store"), 0o700),
            (data.join("store/db"), 0o600),
            (data.join("secret.key"), 0o600),
            (data.join("mine"), 0o644),
            (data.join("notes"), 0o755),
        ] {
            assert_eq!(mode(&path), m, "{}", path.display());
        }
        let fresh = root.path().join("fresh/data");
        let text = fresh.display().to_string();
        prepare(&Config::load(None, |k| (k == "TIDINGS_DATA_DIR").then(|| text.clone())).unwrap()).unwrap();
        assert_eq!(mode(&fresh), 0o700, "a new data dir is made 700");
    }

    #[test]
    fn private_files_and_dirs_are_made_private_whatever_the_umask() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        write_private(&dir.join("f"), b"x", true).unwrap();
        assert_eq!(mode(&dir.join("f")), 0o600);
        assert!(write_private(&dir.join("f"), b"y", true).is_err(), "new_only refuses an existing file");
        write_private(&dir.join("f"), b"y", false).unwrap();
        assert_eq!(fs::read(dir.join("f")).unwrap(), b"y");
    }
}
