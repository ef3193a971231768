//! The SMTP sink both sides deliver to: Postfix's `smtp-sink -c` on a free loopback port.
//!
//! With `-c` it writes its counters (`sess=N quit=N mesg=N`, separated by carriage returns)
//! to stdout each time a session ends or a message's final "." arrives, also into a pipe; a
//! thread reads them and notes the wall-clock time at which the message count last grew.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tidings_bench::Result;

/// Messages counted so far and when the count last grew.
#[derive(Debug, Clone, Copy)]
pub struct Count {
    /// Messages received (final "." seen).
    pub messages: u64,
    /// When `messages` last grew.
    pub at: SystemTime,
}

/// A running `smtp-sink`; killed when dropped.
#[derive(Debug)]
pub struct Sink {
    child: Child,
    port: u16,
    count: Arc<Mutex<Count>>,
}

impl Sink {
    /// Starts `smtp-sink -c` on a free loopback port and waits until it accepts connections.
    /// With `dump`, it also writes every message into that directory (slow: for looking at
    /// what was sent, not for measuring).
    pub fn start(program: &Path, dump: Option<&Path>) -> Result<Self> {
        // smtp-sink takes a port, not port 0: ask the kernel for a free one and hand it over.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = Command::new(program);
        // It refuses to run as root without a user to switch to.
        command.args(["-c", "-u", "nobody"]);
        if let Some(dir) = dump {
            let template: PathBuf = dir.join("%H%M%S.");
            command.arg("-d").arg(template);
        }
        let mut child = command
            .arg(format!("127.0.0.1:{port}"))
            .arg("1024")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", program.display()))?;
        let count = Arc::new(Mutex::new(Count { messages: 0, at: SystemTime::now() }));
        let stdout = child.stdout.take().ok_or("smtp-sink's stdout")?;
        let counter = Arc::clone(&count);
        std::thread::spawn(move || read_counters(stdout, &counter));

        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait()? {
                return Err(format!("smtp-sink exited with {status} on port {port}").into());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("smtp-sink did not listen on port {port} within 10 s").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { child, port, count })
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The count now.
    pub fn count(&self) -> Count {
        *self.count.lock().unwrap()
    }

    /// Waits until at least `target` messages were counted; the count then. Gives up with
    /// the count reached when it did not grow for `stall`.
    pub fn wait_for(&self, target: u64, stall: Duration) -> Result<Count, Count> {
        let mut last = self.count();
        let mut last_growth = Instant::now();
        loop {
            let now = self.count();
            if now.messages >= target {
                return Ok(now);
            }
            if now.messages > last.messages {
                last = now;
                last_growth = Instant::now();
            } else if last_growth.elapsed() > stall {
                return Err(now);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `sess=.. quit=.. mesg=N` records until the pipe closes.
fn read_counters(mut stdout: impl Read, count: &Mutex<Count>) {
    let mut buffer = [0u8; 4096];
    let mut record = Vec::new();
    loop {
        let n = match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let at = SystemTime::now();
        for &byte in &buffer[..n] {
            if byte != b'\r' && byte != b'\n' {
                record.push(byte);
                continue;
            }
            if let Some(messages) = parse_messages(&record) {
                let mut count = count.lock().unwrap();
                if messages > count.messages {
                    *count = Count { messages, at };
                }
            }
            record.clear();
        }
    }
}

/// The `mesg=` figure of one counter record.
fn parse_messages(record: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(record).ok()?;
    text.split_whitespace().find_map(|word| word.strip_prefix("mesg="))?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_message_count_of_a_record() {
        assert_eq!(parse_messages(b"sess=590 quit=556 mesg=2000"), Some(2000));
        assert_eq!(parse_messages(b"sess=1 quit=1"), None);
        let count = Mutex::new(Count { messages: 0, at: SystemTime::UNIX_EPOCH });
        read_counters(&b"sess=1 quit=1 mesg=1\rsess=2 quit=2 mesg=2\rsess=3 quit=3 mesg=2\r"[..], &count);
        assert_eq!(count.lock().unwrap().messages, 2);
    }
}
