//! The SPF, DKIM and DMARC results of an inbound message (contract §13), as RFC 8601 names
//! them. Here, below the ports, because the store keeps them with the message and the
//! `MessageAuth` port answers them.

use serde::{Deserialize, Serialize};

/// One check's result, by its RFC 8601 name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthOutcome {
    /// The check passed.
    Pass,
    /// The check failed.
    Fail,
    /// SPF: probably not authorised (`~all`).
    SoftFail,
    /// SPF: the domain says nothing either way (`?all`).
    Neutral,
    /// Nothing to check: no record, no signature, no policy.
    #[serde(rename = "none")]
    Absent,
    /// A transient error (DNS did not answer): the same message may pass later.
    TempError,
    /// A permanent error in what the domain published.
    PermError,
}

impl AuthOutcome {
    /// The RFC 8601 name: `pass`, `softfail`, `none`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::SoftFail => "softfail",
            Self::Neutral => "neutral",
            Self::Absent => "none",
            Self::TempError => "temperror",
            Self::PermError => "permerror",
        }
    }
}

impl std::fmt::Display for AuthOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check: its result and what it was about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthCheck {
    /// The result.
    pub result: AuthOutcome,
    /// SPF: the domain checked (`MAIL FROM`'s, or `HELO`'s for a null sender); DKIM: the
    /// `d=` of the signature reported; DMARC: the `From` domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// DKIM only: the `s=` selector of the signature reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// DMARC only: the published policy `p=` (`none`, `quarantine`, `reject`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl AuthCheck {
    /// Nothing checked.
    pub fn absent() -> Self {
        Self::of(AuthOutcome::Absent)
    }

    /// A result about no particular domain (a DNS failure before any domain was known).
    pub fn of(result: AuthOutcome) -> Self {
        Self { result, domain: None, selector: None, policy: None }
    }
}

/// The three checks of one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthResults {
    /// SPF (RFC 7208) of the envelope sender from the client's address.
    pub spf: AuthCheck,
    /// DKIM (RFC 6376): the first passing signature, else the first one.
    pub dkim: AuthCheck,
    /// DMARC (RFC 7489) of the `From` domain.
    pub dmarc: AuthCheck,
}

impl AuthResults {
    /// Every result `none`: nothing was checked.
    pub fn unchecked() -> Self {
        Self { spf: AuthCheck::absent(), dkim: AuthCheck::absent(), dmarc: AuthCheck::absent() }
    }
}
