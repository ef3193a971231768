//! The sink's side of one connection: bounded reading of lines and message data, writing
//! replies, and switching to TLS.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_rustls::TlsAcceptor;

/// Any byte stream the sink talks over: TCP, or TLS over TCP.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// What one bounded line read found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A complete line, CRLF (or LF) removed.
    Text(String),
    /// A line longer than the limit; it was read to its end and discarded.
    TooLong,
    /// The client closed the connection (a partial last line is discarded).
    Closed,
}

/// The message after DATA.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Data {
    /// Complete, dot-unstuffed, without the final dot line.
    Complete(Vec<u8>),
    /// Read to the final dot and discarded: larger than allowed.
    TooBig,
    /// Read to the final dot and discarded: a line was longer than allowed.
    LineTooLong,
    /// The client closed the connection before the final dot.
    Closed,
}

/// One client connection.
pub(super) struct Conn {
    io: BufReader<Box<dyn Stream>>,
    /// Whether TLS is on.
    pub(super) tls: bool,
    max_line: usize,
    max_message: usize,
}

impl Conn {
    /// Wraps `stream`.
    pub(super) fn new(stream: Box<dyn Stream>, tls: bool, max_line: usize, max_message: usize) -> Self {
        Self { io: BufReader::new(stream), tls, max_line, max_message }
    }

    /// Sends a reply; each line of `text` becomes a line of a multi-line reply.
    pub(super) async fn reply(&mut self, code: u16, text: &str) -> io::Result<()> {
        let lines: Vec<&str> = text.lines().collect();
        self.reply_lines(code, &lines).await
    }

    /// Sends a multi-line reply (`250-a`, `250 b`); no lines sends just the code.
    pub(super) async fn reply_lines(&mut self, code: u16, lines: &[&str]) -> io::Result<()> {
        let mut out = String::new();
        if lines.is_empty() {
            out.push_str(&format!("{code} \r\n"));
        }
        for (index, line) in lines.iter().enumerate() {
            let separator = if index + 1 == lines.len() { ' ' } else { '-' };
            out.push_str(&format!("{code}{separator}{line}\r\n"));
        }
        let stream = self.io.get_mut();
        stream.write_all(out.as_bytes()).await?;
        stream.flush().await
    }

    /// Writes raw bytes (the broken STARTTLS).
    pub(super) async fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        let stream = self.io.get_mut();
        stream.write_all(bytes).await?;
        stream.flush().await
    }

    /// Reads one command line.
    pub(super) async fn line(&mut self) -> io::Result<Line> {
        let mut buffer = Vec::new();
        Ok(match read_line(&mut self.io, self.max_line, &mut buffer).await? {
            LineEnd::Complete => Line::Text(String::from_utf8_lossy(trim_eol(&buffer)).into_owned()),
            LineEnd::TooLong => Line::TooLong,
            LineEnd::Closed => Line::Closed,
        })
    }

    /// Reads the message up to the final dot, within the limits.
    pub(super) async fn data(&mut self) -> io::Result<Data> {
        let mut message = Vec::new();
        let mut line = Vec::new();
        let (mut too_big, mut too_long) = (false, false);
        loop {
            match read_line(&mut self.io, self.max_line, &mut line).await? {
                LineEnd::Closed => return Ok(Data::Closed),
                LineEnd::TooLong => too_long = true,
                LineEnd::Complete => {
                    if trim_eol(&line) == b"." {
                        break;
                    }
                    let unstuffed = line.strip_prefix(b".").unwrap_or(&line);
                    if message.len() + unstuffed.len() > self.max_message {
                        too_big = true;
                    }
                    if !too_big && !too_long {
                        message.extend_from_slice(unstuffed);
                    }
                }
            }
        }
        Ok(if too_long {
            Data::LineTooLong
        } else if too_big {
            Data::TooBig
        } else {
            Data::Complete(message)
        })
    }

    /// Reads one line of the message and forgets it: enough to be "in the middle of DATA".
    pub(super) async fn skip_line(&mut self) -> io::Result<()> {
        let mut line = Vec::new();
        read_line(&mut self.io, self.max_line, &mut line).await.map(drop)
    }

    /// Reads and discards everything until the client closes.
    pub(super) async fn drain(&mut self) -> io::Result<()> {
        tokio::io::copy(&mut self.io, &mut tokio::io::sink()).await.map(drop)
    }

    /// Switches to TLS after STARTTLS. Anything the client sent after the STARTTLS command
    /// and before the handshake is dropped, as RFC 3207 §4.2 requires.
    pub(super) async fn start_tls(self, acceptor: &TlsAcceptor) -> io::Result<Self> {
        let Self { io, max_line, max_message, .. } = self;
        let stream = acceptor.accept(io.into_inner()).await?;
        Ok(Self::new(Box::new(stream), true, max_line, max_message))
    }
}

/// How a line read ended.
enum LineEnd {
    Complete,
    TooLong,
    Closed,
}

/// Reads up to and including LF into `out`, never holding more than `max` bytes: a longer
/// line is consumed to its end and reported as too long.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, max: usize, out: &mut Vec<u8>) -> io::Result<LineEnd> {
    out.clear();
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(LineEnd::Closed);
        }
        let (taken, complete) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        if !too_long {
            if out.len() + taken > max {
                too_long = true;
                out.clear();
            } else {
                out.extend_from_slice(&buffer[..taken]);
            }
        }
        reader.consume(taken);
        if complete {
            return Ok(if too_long { LineEnd::TooLong } else { LineEnd::Complete });
        }
    }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        let mut seen = Vec::new();
        loop {
            match read_line(&mut reader, max, &mut out).await.unwrap() {
                LineEnd::Complete => seen.push(String::from_utf8(out.clone()).unwrap()),
                LineEnd::TooLong => seen.push("<too long>".to_owned()),
                LineEnd::Closed => return seen,
            }
        }
    }

    #[tokio::test]
    async fn long_lines_are_consumed_and_reported_without_being_kept() {
        let seen = lines(b"short\r\nthis one is too long\r\nok\r\npartial", 8).await;
        assert_eq!(seen, ["short\r\n", "<too long>", "ok\r\n"]);
    }

    #[tokio::test]
    async fn data_is_unstuffed_and_ends_at_the_dot() {
        let input: &[u8] = b"Subject: x\r\n\r\n..leading dot\r\n.\r\nQUIT\r\n";
        let mut conn = Conn::new(Box::new(tokio::io::join(input, tokio::io::sink())), false, 100, 1000);
        assert_eq!(conn.data().await.unwrap(), Data::Complete(b"Subject: x\r\n\r\n.leading dot\r\n".to_vec()));
        assert_eq!(conn.line().await.unwrap(), Line::Text("QUIT".to_owned()));
    }

    #[tokio::test]
    async fn oversized_data_is_read_to_the_dot_and_refused() {
        let input: &[u8] = b"0123456789\r\n0123456789\r\n.\r\nNOOP\r\n";
        let mut conn = Conn::new(Box::new(tokio::io::join(input, tokio::io::sink())), false, 100, 15);
        assert_eq!(conn.data().await.unwrap(), Data::TooBig);
        assert_eq!(conn.line().await.unwrap(), Line::Text("NOOP".to_owned()));
    }
}
