//! The yardstick of the benchmarks that compare with Postfix (`delivery-load`,
//! `inbound-load`): a private Postfix instance, its config, queue and log under a temp dir,
//! started with `postfix -c <dir>` so the system's Postfix is untouched, its smtpd moved to a
//! free loopback port. Each benchmark adds the `main.cf` lines of its own role (a relay to a
//! sink, delivery to a Maildir) to the ones every instance has (loopback only, no DNS, no
//! aliases, the log in the dir).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Result;

/// A running Postfix instance; stopped (`postfix -c <dir> stop`) when dropped.
#[derive(Debug)]
pub struct PostfixInstance {
    postfix: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    running: bool,
}

/// What an instance is made of besides what every instance has.
pub struct Role<'a> {
    /// The temp dir's name prefix, e.g. `delivery-load-postfix.`.
    pub prefix: &'a str,
    /// Dirs to make under the root besides `etc`, `spool` and `data`.
    pub dirs: &'a [&'a str],
    /// Run on the root once the dirs exist, before Postfix starts (ownership of a Maildir).
    pub prepare: &'a dyn Fn(&Path) -> Result<()>,
    /// The role's `main.cf` lines, given the root.
    pub main_cf: &'a dyn Fn(&Path) -> String,
}

impl PostfixInstance {
    /// Writes main.cf and master.cf under a fresh temp dir and starts Postfix (`postfix`,
    /// with `postconf` to edit master.cf) on a free loopback port, as `role` says.
    pub fn start(postfix: &Path, postconf: &Path, role: &Role<'_>) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix(role.prefix).tempdir()?;
        let root = dir.path();
        // Postfix's daemons run as the `postfix` user and must reach the queue and log.
        set_mode(root, 0o755)?;
        for sub in ["etc", "spool", "data"].iter().chain(role.dirs) {
            std::fs::create_dir(root.join(sub))?;
        }
        run(Command::new("chown").arg("postfix").arg(root.join("data")))?;
        (role.prepare)(root)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let d = root.display();
        let main_cf = format!(
            "compatibility_level = 3.6
queue_directory = {d}/spool
data_directory = {d}/data
mydestination =
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtp_dns_support_level = disabled
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
alias_maps =
alias_database =
biff = no
{}",
            (role.main_cf)(root)
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

    /// Its smtpd's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temp dir everything is under.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Its config dir (for `postfix -c`).
    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("etc")
    }

    /// The pid of Postfix's `master`.
    pub fn master_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join("spool/pid/master.pid")).ok()?.trim().parse().ok()
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

impl Drop for PostfixInstance {
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
pub fn run(command: &mut Command) -> Result<()> {
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
        let cf = "# comment\nsmtp      inet  n       -       y       -       -       smtpd\nsmtp      unix  -       -       y       -       -       smtp\n";
        let moved = with_smtpd_on(cf, 2525).unwrap();
        assert_eq!(
            moved,
            "# comment\n127.0.0.1:2525 inet n - n - - smtpd\nsmtp      unix  -       -       y       -       -       smtp\n"
        );
        assert!(with_smtpd_on("# nothing\n", 1).is_err());
    }
}
