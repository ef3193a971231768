//! The use cases' error: one variant per error code (docs/api.md#errors) that core can decide,
//! so the HTTP adapter maps each to its status and code without judging anything itself.

use std::fmt;
use std::sync::Arc;

/// Why something failed, kept whole for the logs: the error itself (its `source()` chain
/// intact), boxed so that the adapters' error types stay out of core's API. Shared, so the
/// errors that carry one stay `Clone`; two are equal when they read the same, which is all
/// a caller can compare. A plain message (`"disk full".into()`) is a cause without a source.
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// `error` as the cause.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// `error`, said to have happened while doing `what`: reads `what: error`, and has
    /// `error` as its source.
    pub fn context(what: impl Into<String>, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::new(Context { what: what.into(), source: Box::new(error) })
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Transparent: the wrapped error's own source comes next in the chain.
impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

impl From<String> for Cause {
    fn from(message: String) -> Self {
        Self(Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(message)))
    }
}

impl From<&str> for Cause {
    fn from(message: &str) -> Self {
        Self::from(message.to_owned())
    }
}

/// What [`Cause::context`] makes.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
struct Context {
    what: String,
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// A field at fault, for `error.details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON field name (camelCase, as the client sent it).
    pub field: String,
    /// What is wrong, for a person.
    pub message: String,
}

impl FieldError {
    /// A field error.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// Why a repeated Idempotency-Key is refused (docs/api.md#idempotency; the key is scoped to
/// the workspace, not to the API key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdempotencyConflict {
    /// The key was used with another request: another body, another batch mode, or a batch
    /// where this is a single send (or the other way round).
    #[error("this Idempotency-Key was already used with a different request")]
    OtherRequest,
    /// Another API key of the workspace used it, and this one may not read what it made (a
    /// `send` key reads only its own messages). Decided before the bodies are compared, so
    /// the answer says nothing about the original request.
    #[error("this Idempotency-Key was already used by another API key of this workspace")]
    OtherKey,
}

/// Why a use case refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// 422 `validation_error`.
    #[error("validation failed: {}", fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; "))]
    Validation {
        /// The fields at fault (at least one).
        fields: Vec<FieldError>,
    },
    /// 400 `invalid_idempotency_key`.
    #[error("{0}")]
    InvalidIdempotencyKey(String),
    /// 401 `invalid_api_key`: unknown, malformed or revoked (deliberately indistinguishable).
    #[error("invalid API key")]
    InvalidApiKey,
    /// 403 `insufficient_scope`.
    #[error("this API key's scope does not allow this operation")]
    InsufficientScope,
    /// 403 `domain_not_allowed`.
    #[error("this API key may only send from {allowed}")]
    DomainNotAllowed {
        /// The domain the key is restricted to.
        allowed: String,
    },
    /// 403 `sending_paused`: the reputation guard paused sending from the domain or the
    /// workspace (contract §12); the message names the rate and how to resume.
    #[error("{0}")]
    SendingPaused(String),
    /// 404 `not_found`.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 409 `conflict`.
    #[error("{0}")]
    Conflict(String),
    /// 409 `idempotency_key_reused`: the key is taken in this workspace, and this request may
    /// not have what it made.
    #[error("{0}")]
    IdempotencyKeyReused(IdempotencyConflict),
    /// 422 `domain_not_verified`.
    #[error("{0}")]
    DomainNotVerified(String),
    /// 422 `recipient_suppressed`.
    #[error("{0}{suffix}", suffix = SUPPRESSED)]
    RecipientSuppressed(String),
    /// 422 `recipient_suppressed` for a send to several recipients, every one of them
    /// suppressed; the fields name each (`to`, `cc`, `bcc`: the address is in the message).
    #[error("every recipient is on the suppression list")]
    AllRecipientsSuppressed {
        /// One per recipient.
        fields: Vec<FieldError>,
    },
    /// 422 `template_render_error`.
    #[error("{0}")]
    TemplateRender(String),
    /// 422 `template_syntax_error`.
    #[error("{0}")]
    TemplateSyntax(String),
    /// 503 `unavailable`.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// 500 `internal_error` (the cause is for logs, never for the client).
    #[error("internal error: {0}")]
    Internal(#[source] Cause),
}

impl Error {
    /// A validation error on one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Validation { fields: vec![FieldError::new(field, message)] }
    }

    /// The `error.code` for this error (docs/api.md#errors).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Validation { .. } => "validation_error",
            Self::InvalidIdempotencyKey(_) => "invalid_idempotency_key",
            Self::InvalidApiKey => "invalid_api_key",
            Self::InsufficientScope => "insufficient_scope",
            Self::DomainNotAllowed { .. } => "domain_not_allowed",
            Self::SendingPaused(_) => "sending_paused",
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::IdempotencyKeyReused(_) => "idempotency_key_reused",
            Self::DomainNotVerified(_) => "domain_not_verified",
            Self::RecipientSuppressed(_) | Self::AllRecipientsSuppressed { .. } => "recipient_suppressed",
            Self::TemplateRender(_) => "template_render_error",
            Self::TemplateSyntax(_) => "template_syntax_error",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal_error",
        }
    }
}

/// What follows the address in [`Error::RecipientSuppressed`]'s message and in each field
/// message of [`Error::AllRecipientsSuppressed`].
const SUPPRESSED: &str = " is on the suppression list";

/// A field message saying `address` is suppressed, as [`Error::AllRecipientsSuppressed`]
/// names each recipient.
pub fn suppressed_message(address: &str) -> String {
    format!("{address}{SUPPRESSED}")
}

/// The address a suppression refusal's message names ([`Error::RecipientSuppressed`]'s
/// message, or a field message of [`Error::AllRecipientsSuppressed`]), if it is one. A front
/// end that must list the addresses (Postmark's 406) reads them back from a batch item's
/// stored error, which keeps only the text.
pub fn suppressed_address(message: &str) -> Option<&str> {
    message.strip_suffix(SUPPRESSED).filter(|a| !a.is_empty() && !a.contains(' '))
}

/// Result alias for use cases.
pub type Result<T, E = Error> = std::result::Result<T, E>;
