//! The yardstick: a minimal Postfix relay in a private config and queue directory (started
//! with `postfix -c <dir>`, so the system's Postfix is untouched), relaying everything to the
//! sink, fed by `smtp-source`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tidings_bench::Result;

use crate::tools::Tools;

/// A running Postfix instance; stopped (`postfix -c <dir> stop`) when dropped.
#[derive(Debug)]
pub struct Postfix {
    tools: Tools,
    dir: tempfile::TempDir,
    port: u16,
    running: bool,
}

impl Postfix {
    /// Writes main.cf and master.cf under a fresh temp dir and starts Postfix on a free
    /// loopback port, relaying to `127.0.0.1:<sink_port>`.
    pub fn start(tools: &Tools, sink_port: u16) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("delivery-load-postfix.").tempdir()?;
        let root = dir.path();
        // Postfix's daemons run as the `postfix` user and must reach the queue and log.
        set_mode(root, 0o755)?;
        for sub in ["etc", "spool", "data"] {
            std::fs::create_dir(root.join(sub))?;
        }
        run(Command::new("chown").arg("postfix").arg(root.join("data")))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let d = root.display();
        let main_cf = format!(
            "compatibility_level = 3.6
queue_directory = {d}/spool
data_directory = {d}/data
myhostname = relay.localdomain
mydestination =
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
relayhost = [127.0.0.1]:{sink_port}
smtp_dns_support_level = disabled
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
default_destination_concurrency_limit = 50
alias_maps =
alias_database =
biff = no
"
        );
        std::fs::write(root.join("etc/main.cf"), main_cf)?;
        let master_cf = std::fs::read_to_string("/etc/postfix/master.cf")
            .map_err(|e| format!("reading /etc/postfix/master.cf (installed with the postfix package): {e}"))?;
        std::fs::write(root.join("etc/master.cf"), with_smtpd_on(&master_cf, port)?)?;

        let mut postfix = Self { tools: tools.clone(), dir, port, running: false };
        let config = postfix.config_dir();
        run(Command::new(&tools.postconf).arg("-c").arg(&config).args(["-F", "*/*/chroot = n"]))?;
        run(Command::new(&tools.postfix).arg("-c").arg(&config).arg("start"))
            .map_err(|e| format!("{e}\nmaillog:\n{}", postfix.maillog()))?;
        postfix.running = true;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("Postfix's smtpd did not listen on port {port}:\n{}", postfix.maillog()).into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(postfix)
    }

    /// Its config dir (for `postfix -c`).
    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("etc")
    }

    /// The pid of Postfix's `master`.
    pub fn master_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join("spool/pid/master.pid")).ok()?.trim().parse().ok()
    }

    /// Sends `messages` messages of `bytes` bytes of payload to its smtpd with `smtp-source`
    /// over `sessions` parallel connections, each reused for many messages; returns when all
    /// were accepted (queued).
    pub fn inject(&self, messages: u64, sessions: u32, bytes: usize) -> Result<()> {
        run(Command::new(&self.tools.smtp_source)
            .args(["-d", "-s", &sessions.to_string(), "-m", &messages.to_string(), "-l", &bytes.to_string()])
            .args(["-f", "orders@load.example", "-t", "ann@example.com", "-S", "Your receipt"])
            .arg(format!("127.0.0.1:{}", self.port)))
    }

    /// Its log so far.
    pub fn maillog(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("maillog")).unwrap_or_default()
    }

    /// `delay=` (seconds from arrival to delivery) of every delivery in the maillog, waiting
    /// up to 10 s for `expected` of them (postlogd writes asynchronously).
    pub fn delivery_delays(&self, expected: usize) -> Vec<f64> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let delays = parse_delays(&self.maillog());
            if delays.len() >= expected || Instant::now() > deadline {
                return delays;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops it (`postfix -c <dir> stop`; `abort` if that fails).
    pub fn stop(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.running) {
            return Ok(());
        }
        let config = self.config_dir();
        run(Command::new(&self.tools.postfix).arg("-c").arg(&config).arg("stop"))
            .or_else(|e| run(Command::new(&self.tools.postfix).arg("-c").arg(&config).arg("abort")).map_err(|_| e))?;
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

/// The `delay=` values of `status=sent` lines.
fn parse_delays(maillog: &str) -> Vec<f64> {
    maillog
        .lines()
        .filter(|line| line.contains("status=sent"))
        .filter_map(|line| line.split(", ").find_map(|field| field.strip_prefix("delay="))?.parse().ok())
        .collect()
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
        let cf = "# comment\nsmtp      inet  n       -       y       -       -       smtpd\nsmtp      unix  -       -       y       -       -       smtp\n";
        let moved = with_smtpd_on(cf, 2525).unwrap();
        assert_eq!(
            moved,
            "# comment\n127.0.0.1:2525 inet n - n - - smtpd\nsmtp      unix  -       -       y       -       -       smtp\n"
        );
        assert!(with_smtpd_on("# nothing\n", 1).is_err());
    }

    #[test]
    fn reads_delays_of_deliveries() {
        let log = "Nov 22 15:37:06 relay postfix/smtp[14198]: 5206B992112: to=<ann@example.com>, relay=127.0.0.1[127.0.0.1]:25253, conn_use=12, delay=0.09, delays=0.07/0.01/0/0, dsn=2.0.0, status=sent (250 2.0.0 Ok)
Nov 22 15:37:06 relay postfix/qmgr[1]: 5206B992112: removed
Nov 22 15:37:07 relay postfix/smtp[14198]: 1: to=<ann@example.com>, relay=none, delay=1.5, delays=1/0/0.5/0, dsn=4.4.1, status=deferred (connect refused)";
        assert_eq!(parse_delays(log), vec![0.09]);
    }
}
