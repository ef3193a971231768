//! The yardstick: a private Postfix instance ([`PostfixInstance`]) whose smtpd delivers mail
//! for [`crate::DOMAIN`] to one Maildir with `virtual`.

use std::path::Path;
use std::process::Command;

use tidings_bench::Result;
use tidings_bench::postfix::{PostfixInstance, Role, run};

/// The uid and gid the `virtual` agent writes the Maildir as (`nobody`, `nogroup`): it
/// refuses uids below `virtual_minimum_uid` (100), so not root.
const MAILDIR_OWNER: u32 = 65_534;

/// A running Postfix instance delivering to a Maildir; stopped when dropped.
#[derive(Debug)]
pub struct Postfix {
    instance: PostfixInstance,
}

impl Postfix {
    /// Starts Postfix on a free loopback port, delivering to `<dir>/mail`.
    pub fn start(postfix: &Path, postconf: &Path) -> Result<Self> {
        let prepare = |root: &Path| {
            run(Command::new("chown").arg(format!("{MAILDIR_OWNER}:{MAILDIR_OWNER}")).arg(root.join("mail")))
        };
        // No DNS anywhere: no lookups of the client's name, no checks of the sender's domain.
        let main_cf = |root: &Path| {
            let (d, domain) = (root.display(), crate::DOMAIN);
            format!(
                "myhostname = mx.bench.test
smtpd_relay_restrictions = permit_mynetworks, permit_auth_destination, reject
smtpd_peername_lookup = no
virtual_mailbox_domains = {domain}
virtual_mailbox_base = {d}/mail
virtual_mailbox_maps = static:{domain}/
virtual_uid_maps = static:{MAILDIR_OWNER}
virtual_gid_maps = static:{MAILDIR_OWNER}
virtual_destination_concurrency_limit = 20
"
            )
        };
        let role = Role { prefix: "inbound-load-postfix.", dirs: &["mail"], prepare: &prepare, main_cf: &main_cf };
        Ok(Self { instance: PostfixInstance::start(postfix, postconf, &role)? })
    }

    /// Its smtpd's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.instance.port()).into()
    }

    /// Its config dir (for `postfix -c`).
    pub fn config_dir(&self) -> std::path::PathBuf {
        self.instance.config_dir()
    }

    /// The pid of Postfix's `master`.
    pub fn master_pid(&self) -> Option<u32> {
        self.instance.master_pid()
    }

    /// Messages delivered to the Maildir (files in its `new/` and `cur/`).
    pub fn delivered(&self) -> usize {
        let maildir = self.instance.root().join("mail").join(crate::DOMAIN);
        ["new", "cur"].iter().filter_map(|sub| std::fs::read_dir(maildir.join(sub)).ok()).map(Iterator::count).sum()
    }

    /// Its log so far.
    pub fn maillog(&self) -> String {
        self.instance.maillog()
    }

    /// Stops it.
    pub fn stop(&mut self) -> Result<()> {
        self.instance.stop()
    }
}
