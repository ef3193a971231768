//! Reading one command line with a bound, from a buffered reader so that pipelined
//! commands (RFC 2920) stay in the buffer for the next call.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line read from the client.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The line without its ending (CRLF, or a bare LF, which we tolerate in commands).
    Complete(Vec<u8>),
    /// Longer than the limit; it was read to its end and dropped.
    TooLong,
    /// The client closed the connection (a partial last line is dropped).
    Eof,
}

/// Reads up to and including the next LF, keeping at most `max` bytes (ending included).
/// Longer lines are consumed to their end without being buffered.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, max: usize) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::Eof);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = chunk.len();
        reader.consume(used);
        if done {
            break;
        }
    }
    if too_long {
        return Ok(Line::TooLong);
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Line::Complete(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = tokio::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            let line = read_line(&mut reader, max).await.unwrap();
            let eof = line == Line::Eof;
            out.push(line);
            if eof {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn splits_pipelined_lines_and_bounds_each() {
        let got = lines(b"NOOP\r\nTHIS IS TOO LONG\r\nRSET\nQUIT\r\npartial", 8).await;
        assert_eq!(
            got,
            vec![
                Line::Complete(b"NOOP".to_vec()),
                Line::TooLong,
                Line::Complete(b"RSET".to_vec()),
                Line::Complete(b"QUIT".to_vec()),
                Line::Eof
            ]
        );
    }
}
