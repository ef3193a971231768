//! Rotating the sealing key: the operator's `secret-key rotate` use case. Every secret of the
//! store (DKIM keys, webhook secrets, the store's secrets) not yet sealed with the new key is
//! sealed with it, in bounded batches, then the key check is replaced.
//!
//! Nothing of a pass is kept: a pass interrupted at any point (a crash, `kill -9`) is run
//! again from the start, skips what is already under the new key and finishes the job. Until
//! the key check is replaced, the store still opens with the previous key alone, so the
//! operator can go back; after it, only with the new key.

use super::Sealer;
#[cfg(doc)]
use crate::ports::SecretStore;
use crate::ports::{SecretHolder, SecretResealStore, StoreError};

/// Records a batch reads when the operator names no other number.
pub const DEFAULT_BATCH: usize = 100;

/// What a pass found of one kind of record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResealCount {
    /// Records read.
    pub examined: usize,
    /// Of those, records sealed again with the new key (the others already were).
    pub resealed: usize,
}

/// What [`rotate_secret_key`] did, per kind of record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RotationReport {
    /// Domains (their DKIM keys).
    pub domains: ResealCount,
    /// Webhook endpoints (their secret and previous secret).
    pub webhooks: ResealCount,
    /// The store's own secrets ([`SecretStore`]: the tracking key).
    pub store_secrets: ResealCount,
    /// Whether the key check was replaced: the pass finished.
    pub finished: bool,
}

impl RotationReport {
    /// The count of one kind.
    pub fn count(&self, kind: SecretHolder) -> &ResealCount {
        match kind {
            SecretHolder::Domains => &self.domains,
            SecretHolder::Webhooks => &self.webhooks,
            SecretHolder::StoreSecrets => &self.store_secrets,
        }
    }

    fn count_mut(&mut self, kind: SecretHolder) -> &mut ResealCount {
        match kind {
            SecretHolder::Domains => &mut self.domains,
            SecretHolder::Webhooks => &mut self.webhooks,
            SecretHolder::StoreSecrets => &mut self.store_secrets,
        }
    }

    /// Records sealed again, of every kind.
    pub fn resealed(&self) -> usize {
        SecretHolder::ALL.iter().map(|k| self.count(*k).resealed).sum()
    }
}

/// Why a rotation did not run.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    /// The store was opened without a previous key: there is nothing to rotate from.
    #[error("no previous key was given: the store must be opened with the new key and the previous key")]
    NoPreviousKey,
    /// Reading or writing the store failed (a record neither key opens is `Corrupt`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Seals every secret of `store` with the key of `sealer` (the one `store` was opened with,
/// holding the previous key too), `batch` records at a time, then replaces the key check.
/// `after_batch` sees the running report after each batch (for progress, or for a test to
/// stop the pass midway). Run again after an interruption: what is done is skipped.
pub async fn rotate_secret_key(
    store: &dyn SecretResealStore,
    sealer: &Sealer,
    batch: usize,
    mut after_batch: impl FnMut(&RotationReport),
) -> Result<RotationReport, RotationError> {
    if !sealer.has_previous() {
        return Err(RotationError::NoPreviousKey);
    }
    let batch = batch.max(1);
    let mut report = RotationReport::default();
    for kind in SecretHolder::ALL {
        let mut after = None;
        loop {
            let step = store.reseal_secrets(kind, after.as_ref(), batch).await?;
            let count = report.count_mut(kind);
            count.examined += step.examined;
            count.resealed += step.resealed;
            after_batch(&report);
            match step.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    store.replace_key_check().await?;
    report.finished = true;
    Ok(report)
}
