//! Who the caller is, for `/resend`: the same `Authorization: Bearer <a Tidings key>` and the
//! same failed-auth throttle as `/v1` (the shared `Authed` extractor), and every extractor's
//! refusal in Resend's error body instead of the envelope.

use super::ResendError;
use crate::auth::Authed;

crate::compat::refusals_as!(
    /// An extractor of `/v1` (`Authed`, `ApiJson`, `IdPath`, …) whose refusal answers in
    /// Resend's shape.
    Resend,
    /// The body extractors, likewise.
    ResendBody,
    ResendError
);

/// The authenticated caller.
pub(super) type Caller = Resend<Authed>;
