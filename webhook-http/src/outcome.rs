//! Turning what hyper reports into the port's terms: `Retry-After` as a delay, and errors as
//! the short reasons shown in the delivery log.

use std::error::Error as StdError;
use std::io;
use std::time::{Duration, SystemTime};

use hyper::header::HeaderValue;
use tokio_rustls::rustls;

use crate::guard::{ConnectError, NotPublic};

/// `Retry-After` (RFC 9110 §10.2.3) as a delay from `now`: delay-seconds, or an HTTP-date
/// (a past date is zero). Anything unreadable is `None`.
pub(crate) fn retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        // All digits but too large for u64: far in the future all the same.
        return Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `10s`, `300ms`, `1500ms`: how a timeout reads in the delivery log.
pub(crate) fn human_duration(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 && !duration.is_zero() {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// The guard's refusal, when that is why hyper-util made no connection.
pub(crate) fn guard_refusal(error: &hyper_util::client::legacy::Error) -> Option<NotPublic> {
    let mut next = error.source();
    while let Some(current) = next {
        if let Some(ConnectError::NotPublic(refused)) = current.downcast_ref::<ConnectError>() {
            return Some(*refused);
        }
        next = current.source();
    }
    None
}

/// The delivery log's reason for a request hyper-util could not complete: the guard's or the
/// connector's own message when it is in the chain, `TLS error: …` for rustls, else the chain's
/// messages below hyper-util's generic "client error (…)".
pub(crate) fn failure_reason(error: &hyper_util::client::legacy::Error) -> String {
    let mut messages: Vec<String> = Vec::new();
    let mut next = error.source();
    while let Some(current) = next {
        if let Some(connect) = current.downcast_ref::<ConnectError>() {
            return connect.to_string();
        }
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return format!("TLS error: {tls}");
        }
        let message = current.to_string();
        if !messages.iter().any(|seen| seen.contains(&message)) {
            messages.push(message);
        }
        // `io::Error::source` skips the error it wraps; look inside it instead.
        next = match current.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => current.source(),
        };
    }
    if messages.is_empty() {
        return error.to_string();
    }
    let joined = messages.join(": ");
    if error.is_connect() { format!("cannot connect: {joined}") } else { joined }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(retry_after(&header("120"), now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(&header(" 0 "), now), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(retry_after(&header(&later), now), Some(Duration::from_secs(90)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(retry_after(&header(&earlier), now), Some(Duration::ZERO));
        assert_eq!(retry_after(&header("99999999999999999999999"), now), Some(Duration::from_secs(u64::MAX)));
        for unreadable in ["", "-5", "1.5", "soon", "Tue, 99 Foo 2024 00:00:00 GMT"] {
            assert_eq!(retry_after(&header(unreadable), now), None, "{unreadable:?}");
        }
        assert_eq!(retry_after(&HeaderValue::from_bytes(b"\xff12").unwrap(), now), None);
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human_duration(Duration::from_secs(10)), "10s");
        assert_eq!(human_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1500ms");
    }
}
