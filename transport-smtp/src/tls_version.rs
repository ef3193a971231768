//! The TLS version a STARTTLS handshake negotiated, read off the wire: [`Watched`] wraps the
//! TCP stream we hand lettre and passes every byte through unchanged, and after the client's
//! first TLS record (its ClientHello) it reads the server's ServerHello as it passes and
//! keeps the version it chose in a [`Negotiated`] the session reads after STARTTLS.
//!
//! lettre 0.11 keeps its rustls connection private, so this is the only place the version
//! can be seen (docs/decisions.md, "MTA-STS as built"). The ServerHello is parsed by hand:
//! the few fields before `supported_versions` are all it takes, and a parser crate
//! (tls-parser) would bring nom and its own types for that.
//!
//! The watch is bounded: it keeps at most [`MAX_WATCHED`] bytes of what the server sends
//! and stops at the first record that is not a handshake, or when the ServerHello is read.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use lettre::transport::smtp::client::AsyncTokioStream;
use tidings_core::model::TlsVersion;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Most bytes of the server's TLS flight kept while looking for its ServerHello. A
/// ServerHello is about a hundred bytes and the first message the server sends; 4 KiB
/// leaves room for one split across many small records.
const MAX_WATCHED: usize = 4096;

/// TLS record content type of a handshake (RFC 8446 §5.1).
const HANDSHAKE_RECORD: u8 = 0x16;
/// Handshake message type of a ServerHello (RFC 8446 §4).
const SERVER_HELLO: u8 = 2;
/// Extension type of `supported_versions` (RFC 8446 §4.2.1).
const SUPPORTED_VERSIONS: u16 = 0x002b;

/// The version a connection's TLS handshake negotiated, once its ServerHello has passed;
/// shared between a [`Watched`] stream and the session that reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Negotiated(Arc<OnceLock<TlsVersion>>);

impl Negotiated {
    /// The version, once the server chose one that names a TLS version.
    pub(crate) fn version(&self) -> Option<TlsVersion> {
        self.0.get().copied()
    }
}

/// A TCP stream that records the TLS version its STARTTLS handshake negotiates.
#[derive(Debug)]
pub(crate) struct Watched {
    inner: TcpStream,
    watch: Watch,
    negotiated: Negotiated,
}

impl Watched {
    /// `tcp`, recording into `negotiated`.
    pub(crate) fn new(tcp: TcpStream, negotiated: Negotiated) -> Self {
        Self { inner: tcp, watch: Watch::default(), negotiated }
    }
}

/// Where the watch is.
#[derive(Debug, Default)]
enum Watch {
    /// SMTP in plaintext: waiting for the client to start TLS.
    #[default]
    BeforeClientHello,
    /// The ClientHello is out: what the server has sent since.
    AfterClientHello(Vec<u8>),
    /// Found, or given up: bytes only pass.
    Done,
}

impl Watch {
    /// The client wrote `written` (non-empty).
    fn wrote(&mut self, written: &[u8]) {
        // SMTP commands are text and never start with 0x16, so the first write that does
        // is the ClientHello (lettre writes a TLS record with one write).
        if matches!(self, Self::BeforeClientHello) && written.first() == Some(&HANDSHAKE_RECORD) {
            *self = Self::AfterClientHello(Vec::new());
        }
    }

    /// The server sent `read`; the version once its ServerHello is complete.
    fn read(&mut self, read: &[u8]) -> Option<TlsVersion> {
        let Self::AfterClientHello(seen) = self else { return None };
        let room = MAX_WATCHED - seen.len();
        seen.extend_from_slice(&read[..read.len().min(room)]);
        match server_hello_version(seen) {
            Scan::NeedMore if seen.len() < MAX_WATCHED => None,
            Scan::NeedMore | Scan::NotFound => {
                *self = Self::Done;
                None
            }
            Scan::Found(version) => {
                *self = Self::Done;
                Some(version)
            }
        }
    }
}

/// What the bytes so far say.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// Not enough of them yet.
    NeedMore,
    /// The ServerHello, and the version it chose.
    Found(TlsVersion),
    /// Not a ServerHello, or one naming no TLS version: stop looking.
    NotFound,
}

/// The version chosen by the ServerHello at the start of `flight`, the bytes a server sent
/// after the ClientHello: TLS records whose handshake fragments are joined before parsing,
/// since a handshake message may span records (RFC 8446 §5.1). The handshake records end
/// at the first other record (TLS 1.3's compatibility ChangeCipherSpec, encrypted data, an
/// alert).
fn server_hello_version(flight: &[u8]) -> Scan {
    let mut handshake = Vec::new();
    let mut records = flight;
    let mut ended = false;
    while let Some((header, rest)) = records.split_first_chunk::<5>() {
        if header[0] != HANDSHAKE_RECORD {
            ended = true;
            break;
        }
        let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let Some((fragment, rest)) = rest.split_at_checked(length) else {
            handshake.extend_from_slice(rest);
            break;
        };
        handshake.extend_from_slice(fragment);
        records = rest;
    }
    let need_more = if ended { Scan::NotFound } else { Scan::NeedMore };
    let Some(([kind, l0, l1, l2], body)) = handshake.split_first_chunk::<4>().map(|(h, b)| (*h, b)) else {
        return need_more;
    };
    if kind != SERVER_HELLO {
        return Scan::NotFound;
    }
    let length = (usize::from(l0) << 16) | (usize::from(l1) << 8) | usize::from(l2);
    match body.get(..length) {
        None => need_more,
        Some(hello) => match parse_server_hello(hello).and_then(TlsVersion::from_wire) {
            Some(version) => Scan::Found(version),
            None => Scan::NotFound,
        },
    }
}

/// The protocol number a complete ServerHello body chooses: its `supported_versions`
/// extension's (TLS 1.3), or else its `legacy_version` (RFC 8446 §4.1.3). `None` when
/// the body is malformed.
fn parse_server_hello(hello: &[u8]) -> Option<u16> {
    let mut r = Reader(hello);
    let legacy_version = r.u16()?;
    r.take(32)?; // random
    let session_id = r.u8()?;
    r.take(usize::from(session_id))?;
    r.u16()?; // cipher suite
    r.u8()?; // compression method
    if r.0.is_empty() {
        // Before TLS 1.3, a ServerHello may end without extensions.
        return Some(legacy_version);
    }
    let extensions_length = r.u16()?;
    let mut extensions = Reader(r.take(usize::from(extensions_length))?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let length = extensions.u16()?;
        let data = extensions.take(usize::from(length))?;
        if kind == SUPPORTED_VERSIONS {
            let [hi, lo] = data else { return None };
            return Some(u16::from_be_bytes([*hi, *lo]));
        }
    }
    Some(legacy_version)
}

/// Big-endian fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        let [hi, lo] = self.take(2)? else { return None };
        Some(u16::from_be_bytes([*hi, *lo]))
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled
            && let Some(version) = this.watch.read(&buf.filled()[before..])
        {
            let _ = this.negotiated.0.set(version);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = &polled
            && *written > 0
        {
            this.watch.wrote(&buf[..*written]);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(written)) = &polled
            && *written > 0
            && let Some(first) = bufs.iter().find(|b| !b.is_empty())
        {
            this.watch.wrote(&first[..first.len().min(*written)]);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl AsyncTokioStream for Watched {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A ServerHello body choosing `legacy_version`, with `extensions` (type, data) when
    /// given; `None` leaves the extensions block out, as a TLS 1.2 server may.
    fn server_hello(legacy_version: u16, session_id: &[u8], extensions: Option<&[(u16, Vec<u8>)]>) -> Vec<u8> {
        let mut body = legacy_version.to_be_bytes().to_vec();
        body.extend_from_slice(&[0x5a; 32]);
        body.push(session_id.len() as u8);
        body.extend_from_slice(session_id);
        body.extend_from_slice(&[0x13, 0x01, 0x00]);
        if let Some(extensions) = extensions {
            let mut block = Vec::new();
            for (kind, data) in extensions {
                block.extend_from_slice(&kind.to_be_bytes());
                block.extend_from_slice(&(data.len() as u16).to_be_bytes());
                block.extend_from_slice(data);
            }
            body.extend_from_slice(&(block.len() as u16).to_be_bytes());
            body.extend_from_slice(&block);
        }
        let mut message = vec![SERVER_HELLO, 0, (body.len() >> 8) as u8, body.len() as u8];
        message.extend_from_slice(&body);
        message
    }

    /// `message` in handshake records of at most `fragment` bytes each.
    fn in_records(message: &[u8], fragment: usize) -> Vec<u8> {
        let mut flight = Vec::new();
        for chunk in message.chunks(fragment) {
            flight.extend_from_slice(&[HANDSHAKE_RECORD, 0x03, 0x03]);
            flight.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            flight.extend_from_slice(chunk);
        }
        flight
    }

    /// Feeds `flight` to a watch past the ClientHello, cut at `cuts`; what it found.
    fn watch_reads(flight: &[u8], cuts: &[usize]) -> Option<TlsVersion> {
        let mut watch = Watch::default();
        watch.wrote(b"EHLO x\r\n");
        watch.wrote(&[HANDSHAKE_RECORD, 0x03, 0x01]);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (flight.len() + 1)).collect();
        cuts.sort_unstable();
        let mut found = None;
        let mut from = 0;
        for to in cuts.into_iter().chain([flight.len()]) {
            if let Some(version) = watch.read(&flight[from..to]) {
                assert!(found.is_none(), "found twice");
                found = Some(version);
            }
            from = to;
        }
        found
    }

    fn other_extensions() -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
        let kind = any::<u16>().prop_filter("not supported_versions", |k| *k != SUPPORTED_VERSIONS);
        prop::collection::vec((kind, prop::collection::vec(any::<u8>(), 0..40)), 0..6)
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(written in prop::collection::vec(any::<u8>(), 1..8),
                                       flight in prop::collection::vec(any::<u8>(), 0..6000),
                                       cuts in prop::collection::vec(any::<usize>(), 0..8)) {
            let mut watch = Watch::default();
            watch.wrote(&written);
            let mut from = 0;
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (flight.len() + 1)).collect();
            cuts.sort_unstable();
            for to in cuts.into_iter().chain([flight.len()]) {
                watch.read(&flight[from..to]);
                from = to;
            }
        }

        #[test]
        fn a_tls_1_3_server_hello_names_its_version_in_supported_versions(
            session_id in prop::collection::vec(any::<u8>(), 0..=32),
            before in other_extensions(),
            after in other_extensions(),
            fragment in 1usize..200,
            cuts in prop::collection::vec(any::<usize>(), 0..10),
            encrypted in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut extensions = before;
            extensions.push((SUPPORTED_VERSIONS, vec![0x03, 0x04]));
            extensions.extend(after);
            let mut flight = in_records(&server_hello(0x0303, &session_id, Some(&extensions)), fragment);
            // What follows in the same flight: the compatibility ChangeCipherSpec, then
            // encrypted records.
            flight.extend_from_slice(&[0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x17, 0x03, 0x03]);
            flight.extend_from_slice(&(encrypted.len() as u16).to_be_bytes());
            flight.extend_from_slice(&encrypted);
            prop_assert_eq!(watch_reads(&flight, &cuts), Some(TlsVersion::Tls1_3));
        }

        #[test]
        fn a_tls_1_2_server_hello_names_its_version_in_legacy_version(
            session_id in prop::collection::vec(any::<u8>(), 0..=32),
            extensions in prop::option::of(other_extensions()),
            fragment in 1usize..200,
            cuts in prop::collection::vec(any::<usize>(), 0..10),
        ) {
            let hello = server_hello(0x0303, &session_id, extensions.as_deref());
            let flight = in_records(&hello, fragment);
            prop_assert_eq!(watch_reads(&flight, &cuts), Some(TlsVersion::Tls1_2));
        }
    }

    #[test]
    fn nothing_is_read_before_the_client_hello() {
        let flight = in_records(&server_hello(0x0303, &[], None), 500);
        let mut watch = Watch::default();
        watch.wrote(b"STARTTLS\r\n");
        assert_eq!(watch.read(&flight), None, "the server's bytes before a ClientHello are SMTP");
    }

    #[test]
    fn an_alert_or_another_handshake_message_ends_the_watch() {
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28];
        assert_eq!(server_hello_version(&alert), Scan::NotFound);
        let mut cut_short = in_records(&[SERVER_HELLO, 0, 0, 80, 0x03, 0x03], 500);
        cut_short.extend_from_slice(&alert);
        assert_eq!(server_hello_version(&cut_short), Scan::NotFound, "a hello cut short by an alert");
        let certificate = in_records(&[11, 0, 0, 0], 500);
        assert_eq!(server_hello_version(&certificate), Scan::NotFound);
        let unassigned = in_records(&server_hello(0x0303, &[], Some(&[(SUPPORTED_VERSIONS, vec![0x7f, 0x1c])])), 500);
        assert_eq!(server_hello_version(&unassigned), Scan::NotFound);
    }

    #[test]
    fn a_server_that_never_finishes_its_hello_is_watched_no_further_than_the_bound() {
        // A record header promising more than the bound, then filler.
        let mut watch = Watch::default();
        watch.wrote(&[HANDSHAKE_RECORD]);
        assert_eq!(watch.read(&[HANDSHAKE_RECORD, 0x03, 0x03, 0xff, 0xff, SERVER_HELLO, 0x00, 0xff, 0xff]), None);
        assert!(matches!(watch, Watch::AfterClientHello(_)));
        assert_eq!(watch.read(&vec![0; 2 * MAX_WATCHED]), None);
        assert!(matches!(watch, Watch::Done));
    }
}
