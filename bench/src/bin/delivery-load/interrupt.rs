//! Leaves nothing running when the benchmark is interrupted (SIGINT, SIGTERM): Drop does not
//! run then, Postfix's master runs detached, and wrk, the sink and the server would be
//! orphaned.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// What to stop on an interrupt; shared with the task that waits for the signals.
#[derive(Debug, Clone, Default)]
pub struct OnInterrupt(Arc<Mutex<Registered>>);

#[derive(Debug, Default)]
struct Registered {
    pids: Vec<u32>,
    /// `postfix` and the config dir of the running yardstick.
    postfix: Option<(PathBuf, PathBuf)>,
}

impl OnInterrupt {
    /// Starts the task that, on SIGINT or SIGTERM, stops what is registered and exits (130).
    pub fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let this = Self::default();
        let registered = this.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            registered.stop_all();
            std::process::exit(130);
        });
        Ok(this)
    }

    /// Kill `pid` on an interrupt (until [`Self::forget`]).
    pub fn kill(&self, pid: u32) {
        self.0.lock().unwrap().pids.push(pid);
    }

    /// No longer kill `pid` (it was waited for; its number may be reused).
    pub fn forget(&self, pid: u32) {
        self.0.lock().unwrap().pids.retain(|&p| p != pid);
    }

    /// Run `postfix -c <config> stop` on an interrupt; `None` once it was stopped.
    pub fn postfix(&self, postfix: Option<(PathBuf, PathBuf)>) {
        self.0.lock().unwrap().postfix = postfix;
    }

    fn stop_all(&self) {
        let registered = self.0.lock().unwrap();
        eprintln!("interrupted: stopping what the benchmark started");
        for pid in &registered.pids {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        if let Some((postfix, config)) = &registered.postfix {
            let _ = Command::new(postfix).arg("-c").arg(config).arg("stop").status();
        }
    }
}
