//! The yardstick: a minimal Postfix relay ([`PostfixInstance`]) relaying everything to the
//! sink, fed by `smtp-source`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tidings_bench::Result;
use tidings_bench::postfix::{PostfixInstance, Role, run};

use crate::tools::Tools;

/// A running Postfix relay; stopped when dropped.
#[derive(Debug)]
pub struct Postfix {
    tools: Tools,
    instance: PostfixInstance,
}

impl Postfix {
    /// Starts Postfix on a free loopback port, relaying to `127.0.0.1:<sink_port>`.
    pub fn start(tools: &Tools, sink_port: u16) -> Result<Self> {
        let main_cf = |_: &Path| {
            format!(
                "myhostname = relay.localdomain
smtpd_relay_restrictions = permit_mynetworks, reject
relayhost = [127.0.0.1]:{sink_port}
default_destination_concurrency_limit = 50
"
            )
        };
        let role = Role { prefix: "delivery-load-postfix.", dirs: &[], prepare: &|_| Ok(()), main_cf: &main_cf };
        let instance = PostfixInstance::start(&tools.postfix, &tools.postconf, &role)?;
        Ok(Self { tools: tools.clone(), instance })
    }

    /// Its config dir (for `postfix -c`).
    pub fn config_dir(&self) -> std::path::PathBuf {
        self.instance.config_dir()
    }

    /// The pid of Postfix's `master`.
    pub fn master_pid(&self) -> Option<u32> {
        self.instance.master_pid()
    }

    /// Sends `messages` messages of `bytes` bytes of payload to its smtpd with `smtp-source`
    /// over `sessions` parallel connections, each reused for many messages; returns when all
    /// were accepted (queued).
    pub fn inject(&self, messages: u64, sessions: u32, bytes: usize) -> Result<()> {
        run(Command::new(&self.tools.smtp_source)
            .args(["-d", "-s", &sessions.to_string(), "-m", &messages.to_string(), "-l", &bytes.to_string()])
            .args(["-f", "orders@load.example", "-t", "ann@example.com", "-S", "Your receipt"])
            .arg(format!("127.0.0.1:{}", self.instance.port())))
    }

    /// Its log so far.
    pub fn maillog(&self) -> String {
        self.instance.maillog()
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

    /// Stops it.
    pub fn stop(&mut self) -> Result<()> {
        self.instance.stop()
    }
}

/// The `delay=` values of `status=sent` lines.
fn parse_delays(maillog: &str) -> Vec<f64> {
    maillog
        .lines()
        .filter(|line| line.contains("status=sent"))
        .filter_map(|line| line.split(", ").find_map(|field| field.strip_prefix("delay="))?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_delays_of_deliveries() {
        let log = "Nov 22 15:37:06 relay postfix/smtp[14198]: 5206B992112: to=<ann@example.com>, relay=127.0.0.1[127.0.0.1]:25253, conn_use=12, delay=0.09, delays=0.07/0.01/0/0, dsn=2.0.0, status=sent (250 2.0.0 Ok)
Nov 22 15:37:06 relay postfix/qmgr[1]: 5206B992112: removed
Nov 22 15:37:07 relay postfix/smtp[14198]: 1: to=<ann@example.com>, relay=none, delay=1.5, delays=1/0/0.5/0, dsn=4.4.1, status=deferred (connect refused)";
        assert_eq!(parse_delays(log), vec![0.09]);
    }
}
