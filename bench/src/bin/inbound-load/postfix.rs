//! The yardstick: a private Postfix instance (config, queue and Maildir under a temp dir,
//! started with `postfix -c <dir>`, the system's Postfix untouched) whose smtpd listens on a
//! free loopback port and delivers mail for [`crate::DOMAIN`] to one Maildir with `virtual`.
//! The same layout as delivery-load's relay.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tidings_bench::Result;

/// The uid and gid the `virtual` agent writes the Maildir as (`nobody`, `nogroup`): it
/// refuses uids below `virtual_minimum_uid` (100), so not root.
const MAILDIR_OWNER: u32 = 65_534;

/// A running Postfix instance; stopped (`postfix -c <dir> stop`) when dropped.
#[derive(Debug)]
pub struct Postfix {
    postfix: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    running: bool,
}

impl Postfix {
    /// Writes main.cf and master.cf under a fresh temp dir and starts Postfix on a free
    /// loopback port.
    pub fn start(postfix: &Path, postconf: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("inbound-load-postfix.").tempdir()?;
        let root = dir.path();
        // Postfix's daemons run as `postfix` (queue, log) and `nobody` (the Maildir).
        set_mode(root, 0o755)?;
        for sub in ["etc", "spool", "data", "mail"] {
            std::fs::create_dir(root.join(sub))?;
        }
        run(Command::new("chown").arg("postfix").arg(root.join("data")))?;
        run(Command::new("chown").arg(format!("{MAILDIR_OWNER}:{MAILDIR_OWNER}")).arg(root.join("mail")))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let d = root.display();
        let domain = crate::DOMAIN;
        // No DNS anywhere: no lookups of the client's name, no checks of the sender's domain.
        let main_cf = format!(
            "compatibility_level = 3.6
queue_directory = {d}/spool
data_directory = {d}/data
myhostname = mx.bench.test
mydestination =
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, permit_auth_destination, reject
smtpd_peername_lookup = no
smtp_dns_support_level = disabled
virtual_mailbox_domains = {domain}
virtual_mailbox_base = {d}/mail
virtual_mailbox_maps = static:{domain}/
virtual_uid_maps = static:{MAILDIR_OWNER}
virtual_gid_maps = static:{MAILDIR_OWNER}
virtual_destination_concurrency_limit = 20
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
alias_maps =
alias_database =
biff = no
"
        );
        std::fs::write(root.join("etc/main.cf"), main_cf)?;
        let master_cf = std::fs::read_to_string("/etc/postfix/master.cf")
            .map_err(|e| format!("reading /etc/postfix/master.cf (installed with the postfix package): {e}"))?;
        std::fs::write(root.join("etc/master.cf"), with_smtpd_on(&master_cf, port)?)?;

        let mut this = Self { postfix: postfix.to_owned(), dir, port, running: false };
        let config = this.config_dir();
        run(Command::new(postconf).arg("-c").arg(&config).args(["-F", "*/*/chroot = n"]))?;
        run(Command::new(postfix).arg("-c").arg(&config).arg("start"))
            .map_err(|e| format!("{e}\nmaillog:\n{}", this.maillog()))?;
        this.running = true;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("Postfix's smtpd did not listen on port {port}:\n{}", this.maillog()).into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(this)
    }

    /// Its smtpd's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// Its config dir (for `postfix -c`).
    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("etc")
    }

    /// The pid of Postfix's `master`.
    pub fn master_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join("spool/pid/master.pid")).ok()?.trim().parse().ok()
    }

    /// Messages delivered to the Maildir (files in its `new/` and `cur/`).
    pub fn delivered(&self) -> usize {
        let maildir = self.dir.path().join("mail").join(crate::DOMAIN);
        ["new", "cur"].iter().filter_map(|sub| std::fs::read_dir(maildir.join(sub)).ok()).map(Iterator::count).sum()
    }

    /// Its log so far.
    pub fn maillog(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("maillog")).unwrap_or_default()
    }

    /// Stops it (`postfix -c <dir> stop`; `abort` if that fails).
    pub fn stop(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.running) {
            return Ok(());
        }
        let config = self.config_dir();
        run(Command::new(&self.postfix).arg("-c").arg(&config).arg("stop"))
            .or_else(|e| run(Command::new(&self.postfix).arg("-c").arg(&config).arg("abort")).map_err(|_| e))?;
        // `stop` returns once master was told; wait for it to go before the dir is removed.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.master_pid().is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists()) {
            if Instant::now() > deadline {
                return Err("Postfix's master did not exit within 10 s of `postfix stop`".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Postfix {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("stopping the yardstick Postfix: {e}");
        }
    }
}

/// master.cf with its `smtp inet` listener replaced by one on `127.0.0.1:<port>`.
fn with_smtpd_on(master_cf: &str, port: u16) -> Result<String> {
    let mut found = false;
    let lines: Vec<String> = master_cf
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.get(..2) == Some(&["smtp", "inet"]) {
                found = true;
                format!("127.0.0.1:{port} inet n - n - - smtpd")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if !found {
        return Err("/etc/postfix/master.cf has no `smtp inet` line to move".into());
    }
    Ok(lines.join("\n") + "\n")
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Runs `command` to completion; an error with its output when it fails.
fn run(command: &mut Command) -> Result<()> {
    let output = command.output().map_err(|e| format!("running {command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{command:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_the_smtpd_listener() {
        let cf = "smtp      inet  n       -       y       -       -       smtpd\nsmtp      unix  -       -       y       -       -       smtp\n";
        let moved = with_smtpd_on(cf, 2525).unwrap();
        assert_eq!(
            moved,
            "127.0.0.1:2525 inet n - n - - smtpd\nsmtp      unix  -       -       y       -       -       smtp\n"
        );
        assert!(with_smtpd_on("# nothing\n", 1).is_err());
    }
}
