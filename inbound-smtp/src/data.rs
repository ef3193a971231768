//! Message data after `354`: RFC 5321 §4.5.2 transparency, streamed so that an oversized
//! message is counted and dropped rather than buffered, and kept in a buffer that grows only
//! as far as the [`Budget`] allows.
//!
//! Lines are CRLF-terminated: only `<CRLF>.<CRLF>` ends the data and only a dot after CRLF
//! is unstuffed. A bare LF is an ordinary byte, so `<LF>.<CRLF>` cannot end a message
//! early (the "SMTP smuggling" ambiguity never arises).

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::budget::Shortage;

/// The smallest step by which the buffer grows; it also grows by a quarter of what it has,
/// so a large message is not copied once per step.
const GROWTH: usize = 64 * 1024;

/// The memory message data may use, asked before the buffer grows.
pub(crate) trait Budget {
    /// Makes room for `bytes` in all; `Ok` with the bytes now granted (at least `bytes`).
    async fn reserve(&mut self, bytes: usize) -> Result<usize, Shortage>;
    /// The buffer was dropped (the message is over the size limit): give it all back.
    fn release(&mut self);
}

/// The message data read up to the final dot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Data {
    /// The message, unstuffed, including the CRLF before the final dot.
    Complete(Vec<u8>),
    /// Over the limit; read to the end and discarded.
    TooBig,
    /// The connection ended before the final dot.
    Eof,
    /// The budget could not cover the message; reading stopped where it was.
    NoBudget(Shortage),
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// After CRLF, or at the very start.
    LineStart,
    /// Inside a line; `cr` when the last byte was CR.
    Text { cr: bool },
    /// A dot at the start of a line.
    Dot,
    /// `.` CR at the start of a line: LF now ends the data.
    DotCr,
}

/// Unstuffs bytes into a buffer capped at a limit.
struct Decoder {
    state: State,
    out: Vec<u8>,
    len: usize,
    max: usize,
}

impl Decoder {
    fn push(&mut self, byte: u8) {
        self.len = self.len.saturating_add(1);
        if self.len <= self.max {
            self.out.push(byte);
        } else if !self.out.is_empty() {
            self.out = Vec::new();
        }
    }

    fn text(&mut self, byte: u8, cr: bool) {
        self.push(byte);
        self.state = if cr && byte == b'\n' { State::LineStart } else { State::Text { cr: byte == b'\r' } };
    }

    /// Feeds `input`; returns how many bytes were used when they completed the data.
    fn feed(&mut self, input: &[u8]) -> Option<usize> {
        for (i, &byte) in input.iter().enumerate() {
            match (self.state, byte) {
                (State::Text { cr }, _) => self.text(byte, cr),
                (State::LineStart, b'.') => self.state = State::Dot,
                (State::LineStart, _) => self.text(byte, false),
                (State::Dot, b'\r') => self.state = State::DotCr,
                // A stuffed dot: drop it.
                (State::Dot, _) => self.text(byte, false),
                (State::DotCr, b'\n') => return Some(i + 1),
                (State::DotCr, _) => {
                    self.push(b'\r');
                    self.text(byte, true);
                }
            }
        }
        None
    }
}

/// Reads the data up to `<CRLF>.<CRLF>` (the CRLF that ended the DATA command counts as the
/// first), keeping at most `max` bytes in a buffer whose capacity `budget` grants first.
/// Bytes after the dot stay in the reader.
pub(crate) async fn read_data<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    budget: &mut impl Budget,
) -> io::Result<Data> {
    let mut decoder = Decoder { state: State::LineStart, out: Vec::new(), len: 0, max };
    loop {
        let arrived = reader.fill_buf().await?.len();
        if arrived == 0 {
            return Ok(Data::Eof);
        }
        // Feeding never keeps more than what arrived, nor more than `max` in all.
        let needed = decoder.out.len().saturating_add(arrived).min(max);
        if decoder.len <= max && needed > decoder.out.capacity() {
            let step = GROWTH.max(decoder.out.capacity() / 4);
            let wanted = needed.max(decoder.out.capacity().saturating_add(step)).min(max);
            match budget.reserve(wanted).await {
                Ok(granted) => decoder.out.reserve_exact(granted.saturating_sub(decoder.out.len())),
                Err(shortage) => return Ok(Data::NoBudget(shortage)),
            }
        }
        let available = reader.fill_buf().await?;
        let was_kept = decoder.len <= max;
        let (used, done) = match decoder.feed(available) {
            Some(used) => (used, true),
            None => (available.len(), false),
        };
        reader.consume(used);
        if was_kept && decoder.len > max {
            budget.release();
        }
        if done {
            break;
        }
    }
    Ok(if decoder.len > max { Data::TooBig } else { Data::Complete(decoder.out) })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A budget of `limit` bytes that records what it granted.
    struct Counted {
        limit: usize,
        granted: usize,
        released: bool,
    }

    impl Budget for Counted {
        async fn reserve(&mut self, bytes: usize) -> Result<usize, Shortage> {
            if bytes > self.limit {
                return Err(Shortage::Spent);
            }
            self.granted = self.granted.max(bytes);
            Ok(self.granted)
        }

        fn release(&mut self) {
            self.released = true;
            self.granted = 0;
        }
    }

    fn unlimited() -> Counted {
        Counted { limit: usize::MAX, granted: 0, released: false }
    }

    async fn decode(input: &[u8], max: usize) -> (Data, Vec<u8>) {
        let mut reader = tokio::io::BufReader::with_capacity(3, input);
        let data = read_data(&mut reader, max, &mut unlimited()).await.unwrap();
        let mut rest = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut rest).await.unwrap();
        (data, rest)
    }

    /// Dot-stuffing as a client does it (RFC 5321 §4.5.2), with the terminator.
    fn stuff(message: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut line_start = true;
        for (i, &b) in message.iter().enumerate() {
            if line_start && b == b'.' {
                out.push(b'.');
            }
            out.push(b);
            line_start = b == b'\n' && i > 0 && message[i - 1] == b'\r';
        }
        if !message.is_empty() && !message.ends_with(b"\r\n") {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b".\r\n");
        out
    }

    #[tokio::test]
    async fn unstuffs_and_stops_at_the_final_dot() {
        let (data, rest) = decode(b"a\r\n..x\r\n.\r\nb\n.\r\n.\r\nQUIT\r\n", 100).await;
        assert_eq!(data, Data::Complete(b"a\r\n.x\r\n".to_vec()));
        assert_eq!(rest, b"b\n.\r\n.\r\nQUIT\r\n");
    }

    #[tokio::test]
    async fn a_dot_after_a_bare_lf_is_text() {
        let (data, _) = decode(b"a\n.\r\nb\r\n.\r\n", 100).await;
        assert_eq!(data, Data::Complete(b"a\n.\r\nb\r\n".to_vec()));
    }

    #[tokio::test]
    async fn an_empty_message_and_a_truncated_one() {
        assert_eq!(decode(b".\r\n", 10).await.0, Data::Complete(Vec::new()));
        assert_eq!(decode(b"abc\r\n.", 10).await.0, Data::Eof);
    }

    #[tokio::test]
    async fn over_the_limit_reads_to_the_end_and_keeps_nothing() {
        let (data, rest) = decode(b"0123456789\r\n.\r\nNOOP\r\n", 11).await;
        assert_eq!(data, Data::TooBig);
        assert_eq!(rest, b"NOOP\r\n");
        assert_eq!(decode(b"0123456789\r\n.\r\n", 12).await.0, Data::Complete(b"0123456789\r\n".to_vec()));
    }

    #[tokio::test]
    async fn the_buffer_never_outgrows_what_the_budget_granted() {
        let message = "x".repeat(300_000) + "\r\n.\r\n";
        let mut budget = unlimited();
        let mut reader = tokio::io::BufReader::with_capacity(8192, message.as_bytes());
        let Data::Complete(kept) = read_data(&mut reader, 1_000_000, &mut budget).await.unwrap() else { panic!() };
        assert_eq!(kept.len(), 300_002);
        assert!(kept.capacity() <= budget.granted, "{} > {}", kept.capacity(), budget.granted);
        assert!(budget.granted < 300_002 + 2 * GROWTH, "granted {} for 300 kB", budget.granted);
    }

    #[tokio::test]
    async fn a_budget_that_runs_out_stops_the_reading() {
        let message = "x".repeat(200_000) + "\r\n.\r\nQUIT\r\n";
        let mut budget = Counted { limit: 100_000, granted: 0, released: false };
        let mut reader = tokio::io::BufReader::with_capacity(8192, message.as_bytes());
        let data = read_data(&mut reader, 1_000_000, &mut budget).await.unwrap();
        assert_eq!(data, Data::NoBudget(Shortage::Spent));
        assert!(budget.granted <= 100_000);
    }

    #[tokio::test]
    async fn over_the_limit_the_budget_is_given_back() {
        let mut budget = unlimited();
        let mut reader = tokio::io::BufReader::with_capacity(4, &b"0123456789\r\n.\r\n"[..]);
        assert_eq!(read_data(&mut reader, 5, &mut budget).await.unwrap(), Data::TooBig);
        assert!(budget.released && budget.granted == 0);
    }

    proptest! {
        #[test]
        fn stuffing_then_reading_gives_the_message_back(
            message in proptest::collection::vec(prop_oneof![Just(b'.'), Just(b'\r'), Just(b'\n'), any::<u8>()], 0..200)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (data, rest) = runtime.block_on(decode(&stuff(&message), usize::MAX));
            let mut expected = message.clone();
            if !message.is_empty() && !message.ends_with(b"\r\n") {
                expected.extend_from_slice(b"\r\n");
            }
            prop_assert_eq!(data, Data::Complete(expected));
            prop_assert!(rest.is_empty());
        }
    }
}
