//! [`FakeWebhooks`]: a webhook sender that keeps every request and answers 200, for tests and
//! examples that run the background loops without a receiver.

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use tidings_core::ports::{WebhookRequest, WebhookResponse, WebhookSender};

/// Keeps every POST it is asked for and answers each `200 ok`.
#[derive(Debug, Default)]
pub struct FakeWebhooks {
    requests: Mutex<Vec<WebhookRequest>>,
}

impl FakeWebhooks {
    /// What was POSTed, in order.
    pub fn requests(&self) -> Vec<WebhookRequest> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[async_trait]
impl WebhookSender for FakeWebhooks {
    async fn post(&self, request: &WebhookRequest) -> WebhookResponse {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).push(request.clone());
        WebhookResponse::Answered { status: 200, retry_after: None, body_prefix: "ok".to_owned() }
    }
}
