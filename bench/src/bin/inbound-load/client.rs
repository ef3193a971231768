//! The load generator both sides get: `C` SMTP clients on loopback, pipelining off, each
//! sending EHLO once and then MAIL, RCPT, DATA, the message and "." for message after message
//! until all `N` were handed over; and the messages they send, made before the clock starts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tidings_bench::Result;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;

/// The envelope sender of every message (a domain with no records: SPF and DMARC say `none`).
pub const MAIL_FROM: &str = "ann@sender.bench.test";

/// What one side answered to the whole load.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Messages whose end of data got `250`.
    pub accepted: u64,
    /// Replies other than the expected one, by `<command> <code>` (`"DATA-end 451"`,
    /// `"connect error"`), with how many.
    pub refused: BTreeMap<String, u64>,
    /// For each accepted message, "." sent → the reply read.
    pub latencies: Vec<Duration>,
    /// First connect → last reply.
    pub elapsed: Duration,
}

/// Sends `messages[i]` (dot-stuffed, ending in `.\r\n`) to `recipient` over `connections`
/// connections to `addr`, each message once.
pub async fn send_all(addr: SocketAddr, messages: Arc<Vec<Vec<u8>>>, recipient: &str, connections: usize) -> Outcome {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (messages, next, recipient) = (messages.clone(), next.clone(), recipient.to_owned());
        tasks.push(tokio::spawn(async move { connection(addr, &messages, &next, &recipient).await }));
    }
    let mut outcome = Outcome::default();
    for task in tasks {
        let one = task.await.unwrap_or_else(|e| {
            let mut refused = BTreeMap::new();
            refused.insert(format!("client task panicked: {e}"), 1);
            Outcome { refused, ..Outcome::default() }
        });
        outcome.accepted += one.accepted;
        outcome.latencies.extend(one.latencies);
        for (what, n) in one.refused {
            *outcome.refused.entry(what).or_default() += n;
        }
    }
    outcome.elapsed = start.elapsed();
    outcome.latencies.sort();
    outcome
}

/// One client: connects (again after an error) and sends messages until none are left.
async fn connection(addr: SocketAddr, messages: &[Vec<u8>], next: &AtomicUsize, recipient: &str) -> Outcome {
    let mut outcome = Outcome::default();
    while next.load(Ordering::Relaxed) < messages.len() {
        if let Err(e) = session(addr, messages, next, recipient, &mut outcome).await {
            *outcome.refused.entry(format!("connection error: {e}")).or_default() += 1;
            // Not a busy loop against a listener that refuses.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    outcome
}

/// A refusal: the command, and the reply (code and text).
struct Refused(String);

async fn session(
    addr: SocketAddr,
    messages: &[Vec<u8>],
    next: &AtomicUsize,
    recipient: &str,
    outcome: &mut Outcome,
) -> Result<()> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut replies = BufReader::new(read);
    let mut line = String::new();
    expect(&mut replies, &mut line, "greeting", 220).await?.map_err(|r| r.0)?;
    write.write_all(b"EHLO client.bench.test\r\n").await?;
    expect(&mut replies, &mut line, "EHLO", 250).await?.map_err(|r| r.0)?;
    let mail = format!("MAIL FROM:<{MAIL_FROM}>\r\n");
    let rcpt = format!("RCPT TO:<{recipient}>\r\n");
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(message) = messages.get(i) else { break };
        let refused = async {
            write.write_all(mail.as_bytes()).await?;
            if let Err(r) = expect(&mut replies, &mut line, "MAIL", 250).await? {
                return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Some(r));
            }
            write.write_all(rcpt.as_bytes()).await?;
            if let Err(r) = expect(&mut replies, &mut line, "RCPT", 250).await? {
                return Ok(Some(r));
            }
            write.write_all(b"DATA\r\n").await?;
            if let Err(r) = expect(&mut replies, &mut line, "DATA", 354).await? {
                return Ok(Some(r));
            }
            // The reply to "." is the one a sender waits for: time from the last byte sent.
            let (body, dot) = message.split_at(message.len() - 3);
            write.write_all(body).await?;
            let sent = Instant::now();
            write.write_all(dot).await?;
            let reply = expect(&mut replies, &mut line, "end of data", 250).await?;
            if reply.is_ok() {
                outcome.accepted += 1;
                outcome.latencies.push(sent.elapsed());
            }
            Ok(reply.err())
        }
        .await?;
        if let Some(Refused(what)) = refused {
            *outcome.refused.entry(what).or_default() += 1;
            write.write_all(b"RSET\r\n").await?;
            expect(&mut replies, &mut line, "RSET", 250).await?.map_err(|r| r.0)?;
        }
    }
    write.write_all(b"QUIT\r\n").await?;
    let _ = read_reply(&mut replies, &mut line).await;
    Ok(())
}

/// Reads one reply; `Err(Refused)` when its code is not `code`.
async fn expect(
    replies: &mut BufReader<OwnedReadHalf>,
    line: &mut String,
    command: &str,
    code: u16,
) -> Result<Result<(), Refused>> {
    let (got, text) = read_reply(replies, line).await?;
    Ok(if got == code { Ok(()) } else { Err(Refused(format!("{command} {got} {}", text.trim_end()))) })
}

/// Reads a (possibly multiline) reply: its code and its last line.
async fn read_reply(replies: &mut BufReader<OwnedReadHalf>, line: &mut String) -> Result<(u16, String)> {
    loop {
        line.clear();
        if replies.read_line(line).await? == 0 {
            return Err("the server closed the connection".into());
        }
        let code = line.get(..3).and_then(|c| c.parse().ok()).ok_or_else(|| format!("not a reply: {line:?}"))?;
        if line.as_bytes().get(3) != Some(&b'-') {
            return Ok((code, line.clone()));
        }
    }
}

/// Message `i` of the run as it goes on the wire: a reply to an order mail with a text and
/// an HTML part and a small PDF-like attachment, padded with more quoted text to about
/// `size` bytes; CRLF line ends, dot-stuffed, ending in `.\r\n`. Deterministic.
pub fn message(i: usize, recipient: &str, size: usize) -> Vec<u8> {
    // Lines of quoted history to add: measured on the message without and with one.
    let base = message_with(i, recipient, 0).len();
    let per_line = message_with(i, recipient, 1).len() - base;
    message_with(i, recipient, size.saturating_sub(base) / per_line)
}

/// [`message`] with `lines` lines of quoted history in each part.
fn message_with(i: usize, recipient: &str, lines: usize) -> Vec<u8> {
    // A fixed 768-byte attachment of pseudo-random bytes (xorshift from i), base64 in 76-column lines.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ i as u64;
    let attachment: Vec<u8> = (0..768)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let encoded = base64(&attachment);
    let attachment_lines: Vec<&str> =
        encoded.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
    let head = format!(
        "From: Ann Example <{MAIL_FROM}>\r\nTo: Support <{recipient}>\r\nSubject: Re: Your order #{i}\r\n\
         Date: Sat, 05 Dec 2026 10:00:00 +0000\r\nMessage-ID: <{i}.reply@sender.bench.test>\r\n\
         In-Reply-To: <{i}.order@in.bench.test>\r\nReferences: <{i}.order@in.bench.test>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"mixed-{i}\"\r\n\r\n--mixed-{i}\r\n\
         Content-Type: multipart/alternative; boundary=\"alt-{i}\"\r\n\r\n"
    );
    let tail = format!(
        "--mixed-{i}\r\nContent-Type: application/pdf; name=\"receipt-{i}.pdf\"\r\n\
         Content-Disposition: attachment; filename=\"receipt-{i}.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\
         {}\r\n--mixed-{i}--\r\n",
        attachment_lines.join("\r\n")
    );
    let reply =
        format!("Hi,\r\n\r\nthe parcel for order #{i} has not arrived yet. Could you check?\r\n\r\nAnn\r\n\r\n");
    // The quoted history fills the rest, in the text part and (marked up) in the HTML part.
    let quote = "> Thanks for your order. It ships within two working days.\r\n".repeat(lines);
    let html_quote: String =
        (0..lines).map(|_| "<p>Thanks for your order. It ships within two working days.</p>\r\n").collect();
    let text = format!(
        "--alt-{i}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{reply}On Fri, 04 Dec 2026, Shop wrote:\r\n{quote}"
    );
    let html = format!(
        "--alt-{i}\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>{}</p>\r\n<blockquote>\r\n{html_quote}</blockquote>\r\n--alt-{i}--\r\n",
        reply.trim_end().replace("\r\n\r\n", "</p><p>")
    );
    let mut wire = Vec::new();
    for line in [head, text, html, tail].concat().split_terminator("\r\n") {
        if line.starts_with('.') {
            wire.push(b'.');
        }
        wire.extend_from_slice(line.as_bytes());
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b".\r\n");
    wire
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (k, &b)| n | u32::from(b) << (16 - 8 * k));
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * k) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `p`-th percentile (0–100) of sorted `values`.
pub fn percentile(values: &[Duration], p: f64) -> Option<Duration> {
    let last = values.len().checked_sub(1)?;
    Some(values[((last as f64) * p / 100.0).round() as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_base64() {
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
    }

    #[test]
    fn messages_are_about_the_size_asked_and_end_with_the_dot() {
        for size in [4096, 16_384] {
            let m = message(7, "support@in.bench.test", size);
            assert!(m.ends_with(b"\r\n.\r\n"));
            assert!(m.len() > size * 19 / 20 && m.len() <= size + 200, "{size}: {}", m.len());
            assert_eq!(m, message(7, "support@in.bench.test", size), "deterministic");
        }
    }

    #[test]
    fn takes_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_millis(51)));
        assert_eq!(percentile(&v, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
