//! A send under the key's rate limit (contract §2), as every front end does it: one token per
//! message, taken before the send and given back when the send queues nothing (rejected or
//! replayed); a replay is answered even with an empty bucket. A batch takes one token per
//! item at once and gives back those of the items that queued nothing.

use crate::Result;
use crate::ports::Limits;
use crate::usecases::{
    BatchOutcome, BatchValidation, Principal, RateLimitState, RetryAfter, SendOutcome, SendRequest, Tidings,
};

/// A send that got through the rate limit: queued, or replayed from its Idempotency-Key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedSend {
    /// The message.
    pub outcome: SendOutcome,
    /// The bucket after the token was taken (`RateLimit-*` headers); `None` for a replay
    /// answered while the bucket was empty.
    pub limit: Option<RateLimitState>,
}

impl Tidings {
    /// [`Tidings::send_message`] with the key's rate limit kept in `limits`: `Ok(Err(wait))`
    /// when the key's bucket is empty, and then nothing was queued. Repeats of an
    /// Idempotency-Key in this process wait for the first (see [`Tidings::take_send_turn`]),
    /// so they are answered as replays and take no token instead of racing it for the bucket.
    pub async fn send_rate_limited(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        req: SendRequest,
        idempotency_key: Option<&str>,
    ) -> Result<Result<LimitedSend, RetryAfter>> {
        let _turn = self.take_send_turn(who, idempotency_key).await;
        let limit = match limits.acquire_send(who.key_id, who.rate_limit, self.clock.now()).await? {
            Ok(limit) => limit,
            Err(wait) => {
                return Ok(match self.idempotent_replay(who, &req, idempotency_key).await? {
                    Some(outcome) => Ok(LimitedSend { outcome, limit: None }),
                    None => Err(wait),
                });
            }
        };
        let outcome = self.send_message(who, req, idempotency_key).await;
        let queued_nothing = match &outcome {
            Ok(outcome) => outcome.replayed,
            Err(_) => true,
        };
        if queued_nothing {
            self.refund_send(limits, who).await;
        }
        Ok(Ok(LimitedSend { outcome: outcome?, limit: Some(limit) }))
    }

    /// [`Tidings::send_batch`] with the key's rate limit kept in `limits`: a replay is
    /// answered first and takes no tokens (`limit` is then `None`); a batch larger than the
    /// key's whole bucket is refused ([`Tidings::check_batch_size`]); otherwise one token per
    /// item is taken at once (`Ok(Err(wait))` when the bucket lacks them, and nothing was
    /// queued) and the tokens of refused items are given back.
    pub async fn send_batch_rate_limited(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        reqs: Vec<SendRequest>,
        mode: BatchValidation,
        idempotency_key: Option<&str>,
    ) -> Result<Result<(BatchOutcome, Option<RateLimitState>), RetryAfter>> {
        let _turn = self.take_send_turn(who, idempotency_key).await;
        if let Some(outcome) = self.idempotent_batch_replay(who, &reqs, mode, idempotency_key).await? {
            return Ok(Ok((outcome, None)));
        }
        self.check_batch_size(who, reqs.len())?;
        let n = u32::try_from(reqs.len()).unwrap_or(u32::MAX);
        let limit = match limits.acquire_sends(who.key_id, who.rate_limit, n, self.clock.now()).await? {
            Ok(limit) => limit,
            Err(wait) => return Ok(Err(wait)),
        };
        let outcome = match self.send_batch(who, reqs, mode, idempotency_key).await {
            Ok(outcome) => outcome,
            Err(e) => {
                self.refund_sends(limits, who, n).await;
                return Err(e);
            }
        };
        let unused = if outcome.replayed { n } else { u32::try_from(outcome.refused()).unwrap_or(n) };
        self.refund_sends(limits, who, unused).await;
        Ok(Ok((outcome, Some(limit))))
    }

    /// Gives back `n` tokens of a batch's items that queued nothing; failures as in
    /// [`Self::refund_send`].
    async fn refund_sends(&self, limits: &dyn Limits, who: &Principal, n: u32) {
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
    async fn refund_send(&self, limits: &dyn Limits, who: &Principal) {
        if let Err(error) = limits.refund_send(who.key_id, who.rate_limit, self.clock.now()).await {
            tracing::warn!(key = %who.key_id, %error, "could not give back a rate-limit token");
        }
    }
}
