//! The RFC 5321 command grammar this listener needs: one line in, one [`Command`] or a
//! [`CommandError`] that names the reply. Pure, so it can be property-tested on any bytes.

use tidings_core::email::EmailAddress;

/// One parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `EHLO <name>`.
    Ehlo(String),
    /// `HELO <name>`.
    Helo(String),
    /// `MAIL FROM:<path>`; `from` is `None` for `<>`.
    Mail { from: Option<EmailAddress>, size: Option<u64> },
    /// `RCPT TO:<path>`.
    Rcpt(ForwardPath),
    /// `DATA`.
    Data,
    /// `RSET`.
    Rset,
    /// `NOOP`, with or without an argument.
    Noop,
    /// `QUIT`.
    Quit,
    /// `VRFY <anything>`: answered 252 without looking anything up.
    Vrfy,
    /// `HELP`, with or without an argument.
    Help,
    /// `STARTTLS` (RFC 3207).
    StartTls,
    /// `AUTH` with its arguments, parsed by [`crate::sasl`] where AUTH is offered.
    Auth(String),
    /// A real SMTP verb this listener does not offer (`EXPN`, `BDAT`, ...).
    NotImplemented,
}

/// The target of `RCPT TO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ForwardPath {
    /// `<Postmaster>` without a domain, which RFC 5321 §4.5.1 says must be accepted.
    Postmaster,
    /// An address.
    Address(EmailAddress),
}

/// Why a line is not a command we can act on. Each maps to one fixed reply, so nothing the
/// client sent is ever echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CommandError {
    /// Not a verb we know: `500 5.5.1`.
    #[error("command unrecognized")]
    Unrecognized,
    /// A control or non-ASCII byte, or a malformed command: `500 5.5.2`.
    #[error("syntax error")]
    Syntax,
    /// A known verb with wrong or missing arguments: `501 5.5.4`.
    #[error("syntax error in parameters")]
    Arguments,
    /// A path without angle brackets, or an address core refuses: `501 5.1.3`.
    #[error("bad address syntax")]
    Address,
    /// A `MAIL`/`RCPT` parameter we did not advertise: `555 5.5.4`.
    #[error("parameter not recognized")]
    Parameter,
}

/// Parses one command line, without its line ending.
pub(crate) fn parse_command(line: &[u8]) -> Result<Command, CommandError> {
    // Commands are ASCII; SMTPUTF8 is not advertised. Tabs count as spaces for leniency.
    if !line.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b)) {
        return Err(CommandError::Syntax);
    }
    let line = std::str::from_utf8(line).map_err(|_| CommandError::Syntax)?;
    let line = line.trim_matches([' ', '\t']);
    let (verb, rest) = match line.split_once([' ', '\t']) {
        Some((verb, rest)) => (verb, rest.trim_start_matches([' ', '\t'])),
        None => (line, ""),
    };
    let no_argument = |command: Command| if rest.is_empty() { Ok(command) } else { Err(CommandError::Arguments) };
    match verb.to_ascii_uppercase().as_str() {
        "EHLO" => parse_helo(rest).map(Command::Ehlo),
        "HELO" => parse_helo(rest).map(Command::Helo),
        "MAIL" => parse_mail(rest),
        "RCPT" => parse_rcpt(rest),
        "DATA" => no_argument(Command::Data),
        "RSET" => no_argument(Command::Rset),
        "QUIT" => no_argument(Command::Quit),
        "NOOP" => Ok(Command::Noop),
        "HELP" => Ok(Command::Help),
        "VRFY" if rest.is_empty() => Err(CommandError::Arguments),
        "VRFY" => Ok(Command::Vrfy),
        "STARTTLS" => no_argument(Command::StartTls),
        "AUTH" => Ok(Command::Auth(rest.to_owned())),
        "EXPN" | "TURN" | "ETRN" | "BDAT" | "SEND" | "SOML" | "SAML" => Ok(Command::NotImplemented),
        _ => Err(CommandError::Unrecognized),
    }
}

/// The EHLO/HELO argument: a domain or address literal, taken as one printable token. We
/// do not check it against DNS; it is only recorded.
fn parse_helo(rest: &str) -> Result<String, CommandError> {
    if rest.is_empty() || rest.len() > 255 || rest.contains([' ', '\t']) {
        return Err(CommandError::Arguments);
    }
    Ok(rest.to_owned())
}

fn parse_mail(rest: &str) -> Result<Command, CommandError> {
    let after = strip_prefix_ignore_case(rest, "FROM:").ok_or(CommandError::Arguments)?;
    let (path, params) = split_path(after)?;
    let from = if path.is_empty() { None } else { Some(parse_address(path)?) };
    let mut size = None;
    for param in params {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        match key.to_ascii_uppercase().as_str() {
            "SIZE" => {
                let all_digits = !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit());
                if !all_digits {
                    return Err(CommandError::Arguments);
                }
                // A number too large for u64 is certainly too large a message.
                size = Some(value.parse().unwrap_or(u64::MAX));
            }
            "BODY" if value.eq_ignore_ascii_case("7BIT") || value.eq_ignore_ascii_case("8BITMIME") => {}
            _ => return Err(CommandError::Parameter),
        }
    }
    Ok(Command::Mail { from, size })
}

fn parse_rcpt(rest: &str) -> Result<Command, CommandError> {
    let after = strip_prefix_ignore_case(rest, "TO:").ok_or(CommandError::Arguments)?;
    let (path, mut params) = split_path(after)?;
    if params.next().is_some() {
        return Err(CommandError::Parameter);
    }
    if path.eq_ignore_ascii_case("postmaster") {
        return Ok(Command::Rcpt(ForwardPath::Postmaster));
    }
    if path.is_empty() {
        return Err(CommandError::Address);
    }
    parse_address(path).map(|address| Command::Rcpt(ForwardPath::Address(address)))
}

/// Splits `<path> params...` (a space after the colon tolerated) into the path between the
/// brackets and the space-separated parameters after them.
fn split_path(input: &str) -> Result<(&str, impl Iterator<Item = &str>), CommandError> {
    let input = input.trim_start_matches([' ', '\t']);
    let inner = input.strip_prefix('<').ok_or(CommandError::Address)?;
    let close = inner.find('>').ok_or(CommandError::Address)?;
    let (path, after) = (&inner[..close], &inner[close + 1..]);
    if !after.is_empty() && !after.starts_with([' ', '\t']) {
        return Err(CommandError::Address);
    }
    Ok((path, after.split([' ', '\t']).filter(|p| !p.is_empty())))
}

/// The mailbox of a path, with any source route (`@a,@b:`) dropped as RFC 5321 §3.3 allows.
fn parse_address(path: &str) -> Result<EmailAddress, CommandError> {
    let mailbox = match path.strip_prefix('@') {
        Some(routed) => routed.split_once(':').map(|(_, mailbox)| mailbox).ok_or(CommandError::Address)?,
        None => path,
    };
    // core trims spaces; inside brackets they are not allowed at all.
    if mailbox.contains([' ', '\t']) {
        return Err(CommandError::Address);
    }
    EmailAddress::parse(mailbox).map_err(|_| CommandError::Address)
}

fn strip_prefix_ignore_case<'a>(input: &'a str, prefix: &str) -> Option<&'a str> {
    let head = input.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &input[prefix.len()..])
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
