//! The API's envelope (docs/api.md#errors) on the answers hyper writes itself.
//!
//! When an HTTP/1 request head cannot be parsed (an invalid byte in a header, a request line
//! over hyper's 65,534-byte URI limit, a head over its read buffer or over 100 headers),
//! hyper answers on its own, before any service sees a request: a bare `400`, `414` or `431`
//! with `content-length: 0`, then closes the connection. hyper has no hook for that answer,
//! so [`EnvelopeParseErrors`] sits between hyper and the TLS stream and, when hyper writes
//! exactly such a head (nothing our router sends looks like it: every answer of ours has a
//! JSON body), writes the same status with the envelope instead.
//!
//! HTTP/2 needs none of this: a URI or header list too long for our router's limits reaches
//! the router, which answers in the envelope; what the h2 library refuses itself (a header
//! list over `MAX_HEADER_LIST_BYTES`, an invalid header byte) is a stream error or a bare 431
//! inside HPACK-encoded frames that no byte-level rewrite can reach (docs/decisions.md).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// An I/O stream whose writes of hyper's own parse-error answers are replaced by the
/// envelope; everything else passes through.
#[derive(Debug)]
pub struct EnvelopeParseErrors<S> {
    inner: S,
    replacing: Option<Replacement>,
}

#[derive(Debug)]
struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// What hyper asked to write, reported as written once the replacement is out.
    original_len: usize,
}

impl<S> EnvelopeParseErrors<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner, replacing: None }
    }
}

/// The envelope answer replacing `head`, if `head` is one of hyper's own parse-error answers.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?.strip_suffix("\r\n\r\n")?;
    let mut lines = rest.split("\r\n");
    let status: u16 = lines.next()?.get(..3)?.parse().ok()?;
    let mut empty_body = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" if value.trim() == "0" => empty_body = true,
            "date" | "connection" => {}
            _ => return None,
        }
    }
    let (code, message) = match status {
        400 => ("bad_request", "the request could not be parsed: malformed request line or header"),
        414 => ("uri_too_long", "the request URI is too long"),
        431 => ("headers_too_large", "the request headers are too large"),
        _ => return None,
    };
    if !empty_body {
        return None;
    }
    let status = StatusCode::from_u16(status).ok()?;
    let body = tidings_http::failure_body(status, code, message);
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{}: {}\r\n\r\n",
        body.len(),
        tidings_http::REQUEST_ID,
        ulid::Ulid::new()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    Some(out)
}

impl<S: AsyncWrite + Unpin> EnvelopeParseErrors<S> {
    /// Writes the pending replacement out; `Ready(Ok(n))` with hyper's length when done.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Some(r) = self.replacing.as_mut() else { return Poll::Ready(Ok(0)) };
        while r.written < r.bytes.len() {
            match ready!(Pin::new(&mut self.inner).poll_write(cx, &r.bytes[r.written..]))? {
                0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                n => r.written += n,
            }
        }
        let n = r.original_len;
        self.replacing = None;
        Poll::Ready(Ok(n))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for EnvelopeParseErrors<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for EnvelopeParseErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.replacing.is_none() {
            match replacement(buf) {
                Some(bytes) => self.replacing = Some(Replacement { bytes, written: 0, original_len: buf.len() }),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        // A write after `Pending` repeats the same buffer: go on with its replacement.
        self.drain(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.replacing.is_none() {
            // hyper writes its error head as one slice, with no body after it.
            let mut slices = bufs.iter().filter(|b| !b.is_empty());
            let only = match (slices.next(), slices.next()) {
                (Some(only), None) => replacement(only).map(|bytes| (bytes, only.len())),
                _ => None,
            };
            match only {
                Some((bytes, original_len)) => self.replacing = Some(Replacement { bytes, written: 0, original_len }),
                None => return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
            }
        }
        self.drain(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bare_error_heads_are_replaced() {
        let hyper_414 =
            b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: Thu, 26 Nov 2026 23:50:00 GMT\r\n\r\n";
        let replaced = String::from_utf8(replacement(hyper_414).expect("replaced")).unwrap();
        assert!(replaced.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{replaced}");
        let body = replaced.split_once("\r\n\r\n").unwrap().1;
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "uri_too_long");
        assert_eq!(json["statusCode"], 414);
        assert!(replaced.contains(&format!("content-length: {}\r\n", body.len())));

        for kept in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"{\"success\":false}",
            b"\x00\x00\x12\x04\x00\x00\x00\x00\x00",
        ] {
            assert!(replacement(kept).is_none(), "{}", String::from_utf8_lossy(kept));
        }
        assert!(replacement(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n").is_some());
        assert!(replacement(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n").is_some());
    }
}
