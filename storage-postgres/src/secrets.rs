//! Secrets of the store (`secrets`, each sealed: `sealing.rs`): written once, by whichever
//! node comes first, and never changed.

use async_trait::async_trait;
use tidings_core::ports::{SecretStore, StoreError, StoreResult};
use tidings_core::sealing::secret_label;
use tidings_core::secret::{Secret, SecretName};

use crate::PgStore;
use crate::db::{execute, query_opt};
use crate::sealing::seal_error;

#[async_trait]
impl SecretStore for PgStore {
    async fn ensure_secret(&self, name: SecretName, candidate: &Secret<Vec<u8>>) -> StoreResult<Secret<Vec<u8>>> {
        let label = secret_label(name.as_str());
        let sealed = self.sealer.seal(&label, candidate.expose()).map_err(seal_error)?;
        let client = self.client().await?;
        // Two statements, not one: a racing insert that commits first makes this one do
        // nothing (after waiting for it), and only a statement begun after that sees its row.
        execute(
            &client,
            "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            &[&name.as_str(), &sealed],
        )
        .await?;
        let row = query_opt(&client, "SELECT value FROM secrets WHERE name = $1", &[&name.as_str()]).await?;
        let row =
            row.ok_or_else(|| StoreError::Corrupt(format!("secret {name} vanished after it was stored").into()))?;
        let value: Vec<u8> = row.try_get("value").map_err(|e| StoreError::corrupt(format!("secret {name}"), e))?;
        self.sealer.open(&label, &value).map(Secret::new).map_err(seal_error)
    }
}
