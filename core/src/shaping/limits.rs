//! What one site may take: connections, messages per connection, messages per period, and
//! whether TLS is required. The built-in table and the operator's file give these per site
//! as patches over the default ([`LimitsPatch`]), so a file that sets one field of a site
//! keeps the others.

use std::fmt;

use super::rate::MessageRate;

/// Whether delivery to a site may go without TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlsRequirement {
    /// STARTTLS when the host offers it, plain text otherwise (`"opportunistic"`).
    Opportunistic,
    /// TLS or no delivery: a host without STARTTLS, or whose handshake fails, is a failed
    /// attempt (`"required"`).
    Required,
}

impl TlsRequirement {
    /// Reads `opportunistic` or `required`, in any case.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "opportunistic" => Some(Self::Opportunistic),
            "required" => Some(Self::Required),
            _ => None,
        }
    }
}

impl fmt::Display for TlsRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Opportunistic => "opportunistic",
            Self::Required => "required",
        })
    }
}

/// The limits of one site. Counts are never zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteLimits {
    /// Most connections open to the site at once, every node together.
    pub connection_limit: u32,
    /// Most messages sent over one connection before it is closed.
    pub max_deliveries_per_connection: u32,
    /// Most messages per second, minute or hour.
    pub max_message_rate: MessageRate,
    /// Whether TLS is required.
    pub tls: TlsRequirement,
}

/// Some of a site's limits: those a layer (the built-in table, the operator's file) sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LimitsPatch {
    pub connection_limit: Option<u32>,
    pub max_deliveries_per_connection: Option<u32>,
    pub max_message_rate: Option<MessageRate>,
    pub tls: Option<TlsRequirement>,
}

impl LimitsPatch {
    /// `base` with the fields this patch sets replaced.
    pub fn over(&self, base: &SiteLimits) -> SiteLimits {
        SiteLimits {
            connection_limit: self.connection_limit.unwrap_or(base.connection_limit),
            max_deliveries_per_connection: self
                .max_deliveries_per_connection
                .unwrap_or(base.max_deliveries_per_connection),
            max_message_rate: self.max_message_rate.unwrap_or(base.max_message_rate),
            tls: self.tls.unwrap_or(base.tls),
        }
    }
}
