//! The SASL side of `AUTH` (RFC 4954): the PLAIN (RFC 4616) and LOGIN mechanisms, parsed and
//! decoded by pure functions so that every malformed input has one tested reply.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::handler::Credentials;

/// A mechanism we offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mechanism {
    /// One response: `authzid NUL authcid NUL password`.
    Plain,
    /// Two prompts, `Username:` then `Password:`, each answered in base64.
    Login,
}

/// Why an exchange failed; each maps to one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SaslError {
    /// Not PLAIN or LOGIN: `504 5.5.4`.
    #[error("unrecognized authentication type")]
    UnknownMechanism,
    /// Missing mechanism or extra arguments: `501 5.5.4`.
    #[error("syntax error in AUTH arguments")]
    Arguments,
    /// Not base64, or not the shape the mechanism needs: `501 5.5.2`.
    #[error("cannot decode the response")]
    Undecodable,
    /// The client answered `*`: `501 5.0.0`.
    #[error("authentication cancelled")]
    Cancelled,
}

/// Parses the arguments of `AUTH`: the mechanism and the optional initial response.
pub(crate) fn parse_auth(args: &str) -> Result<(Mechanism, Option<&str>), SaslError> {
    let mut words = args.split([' ', '\t']).filter(|w| !w.is_empty());
    let mechanism = match words.next() {
        None => return Err(SaslError::Arguments),
        Some(name) if name.eq_ignore_ascii_case("PLAIN") => Mechanism::Plain,
        Some(name) if name.eq_ignore_ascii_case("LOGIN") => Mechanism::Login,
        Some(_) => return Err(SaslError::UnknownMechanism),
    };
    let initial = words.next();
    if words.next().is_some() {
        return Err(SaslError::Arguments);
    }
    Ok((mechanism, initial))
}

/// Decodes one base64 response to text; `=` is the empty response and `*` cancels.
pub(crate) fn decode_text(response: &str) -> Result<String, SaslError> {
    let bytes = decode(response)?;
    String::from_utf8(bytes).map_err(|_| SaslError::Undecodable)
}

/// Decodes a PLAIN response; the authorization identity is ignored (we act for no one else).
pub(crate) fn decode_plain(response: &str) -> Result<Credentials, SaslError> {
    let text = decode_text(response)?;
    let mut parts = text.split('\0');
    let (Some(_authzid), Some(username), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::Undecodable);
    };
    Ok(Credentials { username: username.to_owned(), password: password.to_owned() })
}

fn decode(response: &str) -> Result<Vec<u8>, SaslError> {
    let response = response.trim_matches([' ', '\t']);
    match response {
        "*" => Err(SaslError::Cancelled),
        "=" => Ok(Vec::new()),
        _ => STANDARD.decode(response).map_err(|_| SaslError::Undecodable),
    }
}

/// The base64 of `text`, for the LOGIN prompts.
pub(crate) fn encode(text: &str) -> String {
    STANDARD.encode(text)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_mechanisms_in_any_case_with_an_optional_initial_response() {
        assert_eq!(parse_auth("PLAIN"), Ok((Mechanism::Plain, None)));
        assert_eq!(parse_auth("plain AGEAYg=="), Ok((Mechanism::Plain, Some("AGEAYg=="))));
        assert_eq!(parse_auth("Login dXNlcg=="), Ok((Mechanism::Login, Some("dXNlcg=="))));
        assert_eq!(parse_auth("CRAM-MD5"), Err(SaslError::UnknownMechanism));
        assert_eq!(parse_auth(""), Err(SaslError::Arguments));
        assert_eq!(parse_auth("PLAIN a b"), Err(SaslError::Arguments));
    }

    #[test]
    fn plain_gives_the_identity_and_password_and_ignores_the_authorization_identity() {
        let response = STANDARD.encode("admin\0tidings\0tid_secret");
        let credentials = decode_plain(&response).unwrap();
        assert_eq!(credentials.username, "tidings");
        assert_eq!(credentials.password, "tid_secret");
        assert!(!format!("{credentials:?}").contains("tid_secret"));
        assert_eq!(decode_plain(&STANDARD.encode("\0u\0p")).unwrap().username, "u");
    }

    #[test]
    fn malformed_plain_responses_are_undecodable() {
        for bad in ["not base64!", "AGEAYg", "=", &STANDARD.encode("only\0one"), &STANDARD.encode("a\0b\0c\0d")] {
            assert_eq!(decode_plain(bad), Err(SaslError::Undecodable), "{bad:?}");
        }
        assert_eq!(decode_plain(&STANDARD.encode([0, b'u', 0, 0xff])), Err(SaslError::Undecodable));
        assert_eq!(decode_plain("*"), Err(SaslError::Cancelled));
    }

    #[test]
    fn login_fields_decode_and_can_be_empty_or_cancelled() {
        assert_eq!(decode_text("dGlkaW5ncw==").as_deref(), Ok("tidings"));
        assert_eq!(decode_text("=").as_deref(), Ok(""));
        assert_eq!(decode_text("*"), Err(SaslError::Cancelled));
        assert_eq!(decode_text("%%%"), Err(SaslError::Undecodable));
        assert_eq!(encode("Username:"), "VXNlcm5hbWU6");
    }

    proptest! {
        #[test]
        fn never_panics(input in ".{0,200}") {
            let _ = parse_auth(&input);
            let _ = decode_plain(&input);
            let _ = decode_text(&input);
        }

        #[test]
        fn plain_round_trips(user in "[^\u{0}]{0,30}", password in "[^\u{0}]{0,60}") {
            let response = STANDARD.encode(format!("\0{user}\0{password}"));
            let credentials = decode_plain(&response).unwrap();
            prop_assert_eq!(credentials.username, user);
            prop_assert_eq!(credentials.password, password);
        }
    }
}
