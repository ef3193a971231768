//! `secret-key rotate`: seals every secret of the store with `TIDINGS_SECRET_KEY` (or its
//! file) that is still sealed with `TIDINGS_PREVIOUS_SECRET_KEY` (or its file), then makes
//! the new key the only one the store opens with ([`rotate_secret_key`]). Run it again after
//! an interruption: what is done is skipped. On sled it runs while the server is stopped
//! (one process per store); on PostgreSQL while the nodes run, each with both keys. The
//! procedure: README, "Rotating the secret key".

use tidings_core::sealing::rotation::{RotationError, RotationReport, rotate_secret_key};

use crate::config::Config;
use crate::{ServerError, bootstrap};

/// What `rotate` was asked.
#[derive(Debug, Clone, Copy)]
pub struct RotateOptions {
    /// Records per batch (one lock or transaction each).
    pub batch: usize,
    /// For tests of an interrupted rotation: once this many records were re-sealed, say so
    /// on stderr and wait to be killed (never returns).
    pub pause_after: Option<usize>,
}

/// Runs the rotation and prints what it did on stdout.
pub async fn rotate(config: &Config, options: RotateOptions) -> Result<(), ServerError> {
    if config.previous_secret_key.is_none() && config.previous_secret_key_file.is_none() {
        return Err(ServerError::Operator(
            "secret-key rotate needs the key the store is sealed with until now in TIDINGS_PREVIOUS_SECRET_KEY \
             (or TIDINGS_PREVIOUS_SECRET_KEY_FILE), and the new key in TIDINGS_SECRET_KEY (or \
             TIDINGS_SECRET_KEY_FILE)"
                .to_owned(),
        ));
    }
    crate::data_dir::prepare(config)?;
    let open = bootstrap::open_store(config).await?;
    let mut paused = false;
    let report = rotate_secret_key(open.reseal.as_ref(), &open.sealer, options.batch, |report| {
        if !paused && options.pause_after.is_some_and(|n| report.resealed() >= n) {
            paused = true;
            eprintln!("secret-key rotate: paused after {} re-sealed records", report.resealed());
            loop {
                std::thread::park();
            }
        }
    })
    .await
    .map_err(|e| match e {
        RotationError::NoPreviousKey => ServerError::Operator(e.to_string()),
        RotationError::Store(e) => ServerError::StoreCall(e),
    })?;
    print!("{}", report_text(&report));
    Ok(())
}

/// The report: one line per kind of record, then the outcome.
fn report_text(report: &RotationReport) -> String {
    let line = |what: &str, count: &tidings_core::sealing::rotation::ResealCount| {
        format!(
            "{what:<16} {:>8} re-sealed {:>8} already under the new key\n",
            count.resealed,
            count.examined - count.resealed
        )
    };
    let mut text = String::new();
    text.push_str(&line("domains", &report.domains));
    text.push_str(&line("webhooks", &report.webhooks));
    text.push_str(&line("store secrets", &report.store_secrets));
    text.push_str("key check replaced: the store now opens with the new key alone\n");
    text
}

#[cfg(test)]
mod tests {
    use tidings_core::sealing::rotation::ResealCount;

    use super::*;

    #[test]
    fn the_report_names_each_kind_and_what_was_done() {
        let report = RotationReport {
            domains: ResealCount { examined: 3, resealed: 1 },
            webhooks: ResealCount { examined: 2, resealed: 2 },
            store_secrets: ResealCount { examined: 1, resealed: 0 },
            finished: true,
        };
        assert_eq!(
            report_text(&report),
            "domains                 1 re-sealed        2 already under the new key\n\
             webhooks                2 re-sealed        0 already under the new key\n\
             store secrets           0 re-sealed        1 already under the new key\n\
             key check replaced: the store now opens with the new key alone\n"
        );
    }
}
