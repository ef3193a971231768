//! [`FakeWebhooks`]: a webhook sender that keeps every request and answers from a script
//! (then `200 ok`), for tests and examples that run the webhook loops without a receiver.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use tidings_core::ports::{WebhookRequest, WebhookResponse, WebhookSender};

/// Keeps every POST it is asked for and answers each with the next scripted response, or
/// `200 ok` once the script is used up (the default has no script).
#[derive(Debug, Default)]
pub struct FakeWebhooks {
    script: Mutex<VecDeque<WebhookResponse>>,
    requests: Mutex<Vec<WebhookRequest>>,
}

impl FakeWebhooks {
    /// Answers with `script` in order, then `200 ok`.
    pub fn answering(script: Vec<WebhookResponse>) -> Self {
        Self { script: Mutex::new(script.into()), ..Self::default() }
    }

    /// What was POSTed, in order.
    pub fn requests(&self) -> Vec<WebhookRequest> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[async_trait]
impl WebhookSender for FakeWebhooks {
    async fn post(&self, request: &WebhookRequest) -> WebhookResponse {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).push(request.clone());
        let next = self.script.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        next.unwrap_or_else(|| WebhookResponse::Answered {
            status: 200,
            retry_after: None,
            body_prefix: "ok".to_owned(),
        })
    }
}
