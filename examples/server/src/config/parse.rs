//! Parsers of the setting texts: each returns the value or the reason it is unusable (the
//! caller adds the variable's name and origin).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tidings_core::delivery::RetrySchedule;
use tidings_core::domain_name::{DnsName, DomainName};
use tidings_core::shaping::ShapingTable;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use url::Url;

use super::{CaFile, Delivery};

pub(super) fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("`{text}` is not an IP address and port such as 127.0.0.1:8443 or [::1]:8443"))
}

/// The public host name the return paths' `MX` records point to: a domain name (an MX names
/// a host, never an address, RFC 5321 §5.1 and RFC 7505 aside).
pub(super) fn mx_host(text: &str) -> Result<DnsName, String> {
    DomainName::parse(text)
        .map(|name| DnsName::from(&name))
        .map_err(|e| format!("`{text}` is not a host name for an MX record: {e}"))
}

pub(super) fn port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("`{text}` is not a port number (1-65535)")),
    }
}

/// A connection count for the database pool: 1–1000 (PostgreSQL's own limit is usually
/// 100 for all clients together).
pub(super) fn pool_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!("`{text}` is not a connection count (1-1000)")),
    }
}

/// A count from 1 to `max`.
pub(super) fn count(text: &str, max: usize) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("`{text}` is not a whole number from 1 to {max}")),
    }
}

pub(super) fn boolean(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean (true or false)")),
    }
}

/// A duration longer than zero in humantime's syntax: `500ms`, `90s`, `15m`, `24h`, `30d`,
/// `1h30m` (or `1h 30m`, `2 days`).
pub fn duration(text: &str) -> Result<Duration, String> {
    let total = any_duration(text)?;
    if total.is_zero() {
        return Err(format!("`{text}` must be longer than zero"));
    }
    Ok(total)
}

fn any_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration such as 500ms, 90s, 15m, 24h or 1h30m ({e})"))
}

/// A duration that may be zero (`0`, `0s`): for a delay that may be none.
pub(super) fn delay(text: &str) -> Result<Duration, String> {
    any_duration(text)
}

/// A retention period ([`duration`]), or `off` (`None`): keep everything.
pub(super) fn retention(text: &str) -> Result<Option<Duration>, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    duration(text).map(Some).map_err(|e| format!("{e}, or off"))
}

/// Comma-separated durations, at least one, each whole seconds.
pub(super) fn retry_schedule(text: &str) -> Result<RetrySchedule, String> {
    let delays = text.split(',').map(|part| duration(part.trim())).collect::<Result<_, _>>()?;
    RetrySchedule::new(delays).map_err(|e| e.to_string())
}

/// The shaping file at `path`, read over the built-in table; an error names the file, and
/// the line and field when the text is at fault.
pub(super) fn shaping_file(path: &str) -> Result<ShapingTable, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the shaping file {path}: {e}"))?;
    ShapingTable::from_toml(&text).map_err(|e| format!("{path}: {e}"))
}

/// The CA certificates in the PEM file at `path` (at least one); an error names the file.
pub(super) fn ca_file(path: &str) -> Result<CaFile, String> {
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read PEM certificates from {path}: {e}"))?;
    if certificates.is_empty() {
        return Err(format!("{path} holds no PEM certificate"));
    }
    Ok(CaFile { path: PathBuf::from(path), certificates })
}

/// A size in bytesize's syntax, more than zero: a byte count, or a number with an IEC unit
/// (`512KiB`, `10MiB`, `1GiB`: powers of 1024) or an SI one (`10MB`: powers of 1000).
pub(super) fn byte_size(text: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize =
        text.parse().map_err(|_| format!("`{text}` is not a size in bytes such as 1048576, 512KiB or 10MiB"))?;
    match usize::try_from(size.as_u64()) {
        Ok(0) => Err(format!("`{text}` must be more than zero")),
        Ok(n) if n < usize::MAX => Ok(n),
        // bytesize saturates instead of failing on overflow.
        _ => Err(format!("`{text}` is too large")),
    }
}

/// SPF terms the generated record asks for. Core appends `~all`, so a qualifier-only
/// `all` here would end the record early; `v=spf1` would duplicate the version.
pub(super) fn spf_terms(text: &str) -> Result<String, String> {
    const MECHANISMS: &[&str] = &["ip4", "ip6", "include", "a", "mx", "exists", "ptr"];
    for term in text.split_whitespace() {
        let bare = term.trim_start_matches(['+', '-', '~', '?']);
        let name = bare.split([':', '/']).next().unwrap_or_default();
        let known = MECHANISMS.iter().any(|m| m.eq_ignore_ascii_case(name));
        if !known || !term.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "`{term}` is not an SPF mechanism such as include:_spf.example.net, ip4:192.0.2.0/24 or ip6:2001:db8::/32"
            ));
        }
    }
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A tracing `EnvFilter` whose every directive is a level (`info`) or names one
/// (`tidings_http=debug`). `EnvFilter` also takes a bare word as a target to log at every
/// level (`verbose` = everything from a target named `verbose`, and nothing else): a mistyped
/// level would silently turn logging off, so a bare word must be a level.
pub(super) fn log_filter(text: &str) -> Result<String, String> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let hint = "a log filter such as info or info,tidings_http=debug";
    tracing_subscriber::EnvFilter::try_new(text).map_err(|e| format!("`{text}` is not {hint}: {e}"))?;
    for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, level)| level);
        if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level.trim())) {
            return Err(format!(
                "`{text}` is not {hint}: `{directive}` is no level (trace, debug, info, warn, error, off) \
                 nor target=level"
            ));
        }
    }
    Ok(text.to_owned())
}

pub(super) fn delivery(text: &str) -> Result<Delivery, String> {
    match text.to_ascii_lowercase().as_str() {
        "relay" => Ok(Delivery::Relay),
        "mx" => Ok(Delivery::Mx),
        "outbox" => Ok(Delivery::Outbox),
        "hold" => Ok(Delivery::Hold),
        _ => Err(format!("`{text}` is not one of relay, mx, outbox, hold")),
    }
}

/// The relay URL may carry a password, so errors describe it without quoting it.
pub(super) fn smtp_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("not a URL such as smtp://user:pass@host:587 ({e})"))?;
    if !matches!(url.scheme(), "smtp" | "smtps") {
        return Err(format!("scheme must be smtp or smtps, not {}", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host, as in smtp://host:587".to_owned());
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err("must be only smtp[s]://[user:pass@]host[:port]".to_owned());
    }
    Ok(url)
}

pub(super) fn public_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(format!("`{text}` must be an http(s) URL with a host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` must not have a query or fragment"));
    }
    Ok(url)
}
