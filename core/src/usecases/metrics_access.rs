//! Who may read the metrics export when the operator set a token (`TIDINGS_METRICS_TOKEN`):
//! a scraper presenting exactly that token, compared in constant time, with the same
//! failed-authentication throttle per client address as API keys (docs/api.md#authentication),
//! so a short token cannot be guessed faster than a key.

use std::fmt;
use std::net::IpAddr;

use sha2::{Digest, Sha256};

use crate::Result;
use crate::ports::Limits;
use crate::usecases::{Admission, AuthOutcome, AuthRefusal, Tidings};

/// Shortest metrics token, in characters.
pub const MIN_METRICS_TOKEN_CHARS: usize = 16;
/// Longest metrics token, in characters.
pub const MAX_METRICS_TOKEN_CHARS: usize = 256;

/// The token a scraper must present to read the metrics. Only its SHA-256 is kept, so no
/// `Debug` or log line can show it, and comparing two digests of equal length in constant
/// time tells a guesser nothing about the token's length or its first wrong character.
#[derive(Clone, PartialEq, Eq)]
pub struct MetricsToken {
    digest: [u8; 32],
}

/// Why a metrics token was refused (the message never quotes it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "must be {MIN_METRICS_TOKEN_CHARS} to {MAX_METRICS_TOKEN_CHARS} printable ASCII characters without spaces (e.g. `openssl rand -hex 32`)"
)]
pub struct MetricsTokenError;

impl MetricsToken {
    /// Checks the operator's token: 16–256 printable ASCII characters without spaces, which
    /// is what fits a bearer credential as it is.
    pub fn parse(text: &str) -> std::result::Result<Self, MetricsTokenError> {
        let ok = (MIN_METRICS_TOKEN_CHARS..=MAX_METRICS_TOKEN_CHARS).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_graphic());
        if ok { Ok(Self { digest: Sha256::digest(text.as_bytes()).into() }) } else { Err(MetricsTokenError) }
    }

    /// Whether `presented` is the token.
    pub fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        aws_lc_rs::constant_time::verify_slices_are_equal(&digest, &self.digest).is_ok()
    }

    /// The token's SHA-256, which binds what is signed for the token's holder to the token
    /// (operator sessions end when it changes).
    pub(crate) fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

impl fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetricsToken(***)")
    }
}

impl Tidings {
    /// Lets a metrics scraper at `client` in if it presents `token`; a missing or wrong
    /// token counts as a failed authentication in `limits`, and a client blocked by them is
    /// refused whatever it presents. `Err` only when the limits cannot be reached.
    pub async fn authenticate_metrics_scraper(
        &self,
        limits: &dyn Limits,
        client: IpAddr,
        token: &MetricsToken,
        presented: Option<&str>,
    ) -> Result<AuthOutcome<()>> {
        let now = self.clock.now();
        if let Admission::Limited { retry_after } = limits.check_auth(client, now).await? {
            return Ok(AuthOutcome::Refused(AuthRefusal::Blocked(retry_after)));
        }
        let refusal = match presented {
            Some(text) if token.matches(text) => return Ok(AuthOutcome::Admitted(())),
            Some(_) => AuthRefusal::Invalid,
            None => AuthRefusal::Missing,
        };
        match limits.record_auth_failure(client, now).await? {
            Admission::Allowed(()) => Ok(AuthOutcome::Refused(refusal)),
            Admission::Limited { retry_after } => Ok(AuthOutcome::Refused(AuthRefusal::Blocked(retry_after))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches_and_debug_hides_it() {
        let token = MetricsToken::parse("s3cret-scrape-token-0123").unwrap();
        assert!(token.matches("s3cret-scrape-token-0123"));
        for wrong in ["", "s3cret-scrape-token-012", "s3cret-scrape-token-01234", "S3cret-scrape-token-0123"] {
            assert!(!token.matches(wrong), "{wrong:?}");
        }
        assert_eq!(format!("{token:?}"), "MetricsToken(***)");
    }

    #[test]
    fn short_long_spaced_or_non_ascii_tokens_are_refused() {
        for bad in ["short", &"x".repeat(257), "with a space in it!!", "tökentökentökentöken", "tab\tseparated-token-x"]
        {
            assert_eq!(MetricsToken::parse(bad), Err(MetricsTokenError), "{bad:?}");
        }
        assert!(MetricsToken::parse(&"x".repeat(16)).is_ok());
    }
}
