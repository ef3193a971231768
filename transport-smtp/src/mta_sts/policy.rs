//! The policy file (RFC 8461 §3.2) and MX host matching (§4.1).

use std::fmt;

/// The longest `max_age` RFC 8461 allows: one year, in seconds.
pub const MAX_AGE_LIMIT: u32 = 31_557_600;

/// What the domain asks of senders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Deliver only over TLS, with a valid certificate, to an MX host the policy lists.
    Enforce,
    /// Deliver as without a policy, and report what `enforce` would have refused.
    Testing,
    /// No policy (how a domain withdraws one while caches still hold it).
    None,
}

impl Mode {
    /// The mode as the policy file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Testing => "testing",
            Self::None => "none",
        }
    }
}

/// One `mx:` line: a host name, or `*.` and a domain, which matches one more label on the
/// left (`*.example.com` matches `mx1.example.com`, not `example.com` nor `a.b.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MxPattern {
    wildcard: bool,
    /// Lower case, without a trailing dot.
    name: String,
}

impl MxPattern {
    /// Parses `["*."] domain`; the name is kept in lower case, without a trailing dot.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let (wildcard, name) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        if !is_host_name(name) {
            return Err(PolicyError::BadMx(text.to_owned()));
        }
        Ok(Self { wildcard, name: name.to_ascii_lowercase() })
    }

    /// Whether the MX host `host` matches, ignoring case and a trailing dot.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host);
        if !self.wildcard {
            return host.eq_ignore_ascii_case(&self.name);
        }
        // `<one label>.<name>`: the label is what precedes the name's length plus its dot.
        let Some(split) = host.len().checked_sub(self.name.len() + 1) else {
            return false;
        };
        let (Some(label), Some(dot_and_name)) = (host.get(..split), host.get(split..)) else {
            return false;
        };
        !label.is_empty()
            && !label.contains('.')
            && dot_and_name.starts_with('.')
            && dot_and_name[1..].eq_ignore_ascii_case(&self.name)
    }
}

impl fmt::Display for MxPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.name)
    }
}

/// A parsed policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// What the domain asks.
    pub mode: Mode,
    /// The MX hosts allowed; empty only in mode `none`.
    pub mx: Vec<MxPattern>,
    /// How long, in seconds from the fetch, the policy may be cached; at most
    /// [`MAX_AGE_LIMIT`].
    pub max_age: u32,
}

/// Why a policy file is not a valid policy. Each means the domain has no usable policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The file is not UTF-8 text.
    #[error("the policy is not UTF-8 text")]
    NotText,
    /// A line is not `key: value`.
    #[error("line {0} is not `key: value`")]
    Line(usize),
    /// A required key is missing.
    #[error("the policy has no {0}")]
    Missing(&'static str),
    /// A key that must appear once appears again.
    #[error("{0} appears more than once")]
    Repeated(&'static str),
    /// `version` is not `STSv1`.
    #[error("the version is {0:?}, not STSv1")]
    Version(String),
    /// `mode` is not one of `enforce`, `testing`, `none`.
    #[error("the mode {0:?} is not enforce, testing or none")]
    Mode(String),
    /// `max_age` is not a number of seconds up to [`MAX_AGE_LIMIT`].
    #[error("max_age {0:?} is not a number of seconds up to 31557600")]
    MaxAge(String),
    /// An `mx` value is not a host name or `*.` and a domain.
    #[error("mx {0:?} is not a host name or *. followed by a domain")]
    BadMx(String),
}

impl Policy {
    /// Parses a policy file as fetched (bytes, which must be UTF-8).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PolicyError> {
        std::str::from_utf8(bytes).map_err(|_| PolicyError::NotText).and_then(Self::parse)
    }

    /// Parses a policy file: `key: value` lines ending in CRLF or LF (the last line's end
    /// optional, blank lines skipped); `version: STSv1`, `mode` and `max_age` exactly once;
    /// `mx` at least once unless the mode is `none`; other keys ignored.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let mut version = None;
        let mut mode = None;
        let mut max_age = None;
        let mut mx = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim_matches(is_wsp).is_empty() {
                continue;
            }
            let (key, value) = line.split_once(':').ok_or(PolicyError::Line(index + 1))?;
            if !super::record::is_extension_name(key) {
                return Err(PolicyError::Line(index + 1));
            }
            let value = value.trim_matches(is_wsp);
            match key {
                "version" => set_once(&mut version, "version", value)?,
                "mode" => set_once(&mut mode, "mode", value)?,
                "max_age" => set_once(&mut max_age, "max_age", value)?,
                "mx" => mx.push(MxPattern::parse(value)?),
                _ => {}
            }
        }
        let version = version.ok_or(PolicyError::Missing("version"))?;
        if version != "STSv1" {
            return Err(PolicyError::Version(version.to_owned()));
        }
        let mode = match mode.ok_or(PolicyError::Missing("mode"))? {
            "enforce" => Mode::Enforce,
            "testing" => Mode::Testing,
            "none" => Mode::None,
            other => return Err(PolicyError::Mode(other.to_owned())),
        };
        let max_age = max_age.ok_or(PolicyError::Missing("max_age"))?;
        let seconds = Some(max_age)
            .filter(|text| !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|text| text.parse::<u32>().ok())
            .filter(|&seconds| seconds <= MAX_AGE_LIMIT)
            .ok_or_else(|| PolicyError::MaxAge(max_age.to_owned()))?;
        if mx.is_empty() && mode != Mode::None {
            return Err(PolicyError::Missing("mx"));
        }
        Ok(Self { mode, mx, max_age: seconds })
    }

    /// Whether the MX host `host` is one the policy lists (case-insensitive, a trailing dot
    /// ignored).
    pub fn allows(&self, host: &str) -> bool {
        self.mx.iter().any(|pattern| pattern.matches(host))
    }
}

/// The policy as a file, CRLF line ends, keys in RFC 8461's order.
impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "version: STSv1\r\nmode: {}\r\n", self.mode.as_str())?;
        for pattern in &self.mx {
            write!(f, "mx: {pattern}\r\n")?;
        }
        write!(f, "max_age: {}\r\n", self.max_age)
    }
}

fn set_once<'a>(slot: &mut Option<&'a str>, key: &'static str, value: &'a str) -> Result<(), PolicyError> {
    if slot.replace(value).is_some() { Err(PolicyError::Repeated(key)) } else { Ok(()) }
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Labels of letters, digits and inner hyphens, 1 to 63 characters each, 253 in all.
fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests;
