//! A send under the key's rate limit (docs/api.md#rate-limits), as every front end does it:
//! one token per message, taken before the send and given back when the send queues nothing
//! (rejected or replayed); a replay is answered even with an empty bucket. A batch takes one
//! token per item at once and gives back those of the items that queued nothing.
//!
//! Except for renders: a send refused by its template (`template_render_error`
//! or `template_syntax_error`) keeps its token, since rendering is the costly part of a
//! send and a refused one would otherwise be free, however often it is repeated. So does
//! every batch item whose template was rendered when the batch is refused, and a template
//! preview ([`Templates::render_rate_limited`](crate::usecases::Templates::render_rate_limited)) takes one like a send. Refusals that
//! come before the render (a bad field, a suppressed recipient, an unknown template) still
//! give it back.

use crate::ports::Limits;
use crate::usecases::{
    Admission, BatchOutcome, BatchValidation, Messages, Principal, RateLimitState, SendOutcome, SendRequest, Tidings,
};
use crate::{Error, Result};

/// A send that got through the rate limit: queued, or replayed from its Idempotency-Key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedSend {
    /// The message.
    pub outcome: SendOutcome,
    /// The bucket after the token was taken (`RateLimit-*` headers); `None` for a replay
    /// answered while the bucket was empty.
    pub limit: Option<RateLimitState>,
}

impl Messages<'_> {
    /// [`Self::send`] with the key's rate limit kept in `limits`: `Limited`
    /// when the key's bucket is empty, and then nothing was queued. Repeats of an
    /// Idempotency-Key in this process wait for the first (see [`Tidings::take_send_turn`]),
    /// so they are answered as replays and take no token instead of racing it for the bucket.
    pub async fn send_rate_limited(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        req: SendRequest,
        idempotency_key: Option<&str>,
    ) -> Result<Admission<LimitedSend>> {
        let _turn = self.core.take_send_turn(who, idempotency_key).await;
        let limit = match limits.acquire_send(who.key_id, who.rate_limit, self.core.clock.now()).await? {
            Admission::Allowed(limit) => limit,
            Admission::Limited { retry_after } => {
                return Ok(match self.idempotent_replay(who, &req, idempotency_key).await? {
                    Some(outcome) => Admission::Allowed(LimitedSend { outcome, limit: None }),
                    None => Admission::Limited { retry_after },
                });
            }
        };
        let outcome = self.send(who, req, idempotency_key).await;
        let give_back = match &outcome {
            Ok(outcome) => outcome.replayed,
            Err(e) => !is_render_refusal(e),
        };
        if give_back {
            self.core.refund_send(limits, who).await;
        }
        Ok(Admission::Allowed(LimitedSend { outcome: outcome?, limit: Some(limit) }))
    }

    /// [`Self::send_batch`] with the key's rate limit kept in `limits`: a replay is
    /// answered first and takes no tokens (`limit` is then `None`); a batch larger than the
    /// key's whole bucket is refused ([`Self::check_batch_size`]); otherwise one token per
    /// item is taken at once (`Limited` when the bucket lacks them, and nothing was
    /// queued) and the tokens of refused items are given back.
    pub async fn send_batch_rate_limited(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        reqs: Vec<SendRequest>,
        mode: BatchValidation,
        idempotency_key: Option<&str>,
    ) -> Result<Admission<(BatchOutcome, Option<RateLimitState>)>> {
        let _turn = self.core.take_send_turn(who, idempotency_key).await;
        if let Some(outcome) = self.idempotent_batch_replay(who, &reqs, mode, idempotency_key).await? {
            return Ok(Admission::Allowed((outcome, None)));
        }
        self.check_batch_size(who, reqs.len())?;
        let n = u32::try_from(reqs.len()).unwrap_or(u32::MAX);
        let limit = match limits.acquire_sends(who.key_id, who.rate_limit, n, self.core.clock.now()).await? {
            Admission::Allowed(limit) => limit,
            Admission::Limited { retry_after } => return Ok(Admission::Limited { retry_after }),
        };
        let mut rendered_refused = 0;
        let outcome = match self.send_batch_counted(who, reqs, mode, idempotency_key, &mut rendered_refused).await {
            Ok(outcome) => outcome,
            Err(e) => {
                self.core.refund_sends(limits, who, n.saturating_sub(rendered_refused)).await;
                return Err(e);
            }
        };
        let unused = if outcome.replayed {
            n
        } else {
            u32::try_from(outcome.refused()).unwrap_or(n).saturating_sub(rendered_refused)
        };
        self.core.refund_sends(limits, who, unused).await;
        Ok(Admission::Allowed((outcome, Some(limit))))
    }
}

impl Tidings {
    /// Gives back `n` tokens of a batch's items that queued nothing; failures as in
    /// [`Self::refund_send`].
    pub(crate) async fn refund_sends(&self, limits: &dyn Limits, who: &Principal, n: u32) {
        if n == 0 {
            return;
        }
        if let Err(error) = limits.refund_sends(who.key_id, who.rate_limit, n, self.clock.now()).await {
            tracing::warn!(key = %who.key_id, %error, "could not give back rate-limit tokens");
        }
    }

    /// Gives back a token of a send that queued nothing. A failure to reach the limits is
    /// logged and otherwise ignored: the send was decided already, and a token lost costs the
    /// key at most one send for a second.
    pub(crate) async fn refund_send(&self, limits: &dyn Limits, who: &Principal) {
        if let Err(error) = limits.refund_send(who.key_id, who.rate_limit, self.clock.now()).await {
            tracing::warn!(key = %who.key_id, %error, "could not give back a rate-limit token");
        }
    }
}

/// Whether `e` refused a send or preview after its template was compiled or rendered: the
/// work was done, so the token is kept. Sends make every other check before rendering
/// (`prepare_message`), so these are the only refusals that come after.
pub(crate) fn is_render_refusal(e: &Error) -> bool {
    matches!(e, Error::TemplateRender(_) | Error::TemplateSyntax(_))
}
