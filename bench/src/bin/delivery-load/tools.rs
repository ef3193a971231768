//! The external programs of the benchmark: Postfix's test tools and wrk, found on `PATH` or
//! in `/usr/sbin` (root's `PATH` has it, a user's often not).

use std::path::PathBuf;

use tidings_bench::Result;

/// How to get Postfix's programs.
const INSTALL_POSTFIX: &str = "install Postfix: `DEBIAN_FRONTEND=noninteractive apt-get install -y postfix` \
                               (it installs with \"No configuration\" and does not start)";

/// Absolute paths of the programs the benchmark runs.
#[derive(Debug, Clone)]
pub struct Tools {
    /// `postfix` (start/stop of the yardstick instance).
    pub postfix: PathBuf,
    /// `postconf` (edits the yardstick's master.cf).
    pub postconf: PathBuf,
    /// `smtp-sink`, the sink both sides deliver to.
    pub smtp_sink: PathBuf,
    /// `smtp-source`, which injects the yardstick's messages.
    pub smtp_source: PathBuf,
    /// `wrk`, which sends through the API.
    pub wrk: PathBuf,
}

impl Tools {
    /// Finds every program, or says how to install what is missing.
    pub fn find() -> Result<Self> {
        let postfix = |name: &str| find(name).ok_or_else(|| format!("`{name}` not found: {INSTALL_POSTFIX}"));
        Ok(Self {
            postfix: postfix("postfix")?,
            postconf: postfix("postconf")?,
            smtp_sink: postfix("smtp-sink")?,
            smtp_source: postfix("smtp-source")?,
            wrk: find("wrk").ok_or("`wrk` not found: `apt-get install -y wrk`")?,
        })
    }
}

fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
