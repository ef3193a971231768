//! MTA-STS for `mx` delivery from the settings (`TIDINGS_MTA_STS`, `TIDINGS_MTA_STS_CA_FILE`,
//! `TIDINGS_MTA_STS_PORT`): the policy resolver the MX mailer obeys, and the roots it trusts.
//! What the policies do is `tidings_transport_smtp::mta_sts`'s and `MxMailer`'s.

use std::sync::Arc;

use tidings_core::ports::SystemClock;
use tidings_dns::HickoryDns;
use tidings_transport_smtp::mta_sts::{CacheSettings, FetchSettings, HttpsPolicyFetcher, MtaSts, TrustRoots};

use crate::config::{Config, ConfigError, MtaStsConfig};

/// The resolver of recipient domains' policies and the roots that policy hosts' and MX
/// hosts' certificates must chain to; `None` when `TIDINGS_MTA_STS` is off. Logs which.
pub fn policies(config: &Config, dns: Arc<HickoryDns>) -> Result<Option<(Arc<MtaSts>, TrustRoots)>, ConfigError> {
    let settings = &config.delivery.mta_sts;
    if !settings.enabled {
        tracing::info!("MTA-STS: off (TIDINGS_MTA_STS): recipient domains' policies are not looked up");
        return Ok(None);
    }
    let roots = trust_roots(settings);
    let fetch = FetchSettings {
        roots: roots.clone(),
        port: settings.port,
        // The policy host is guarded like an MX host: a client chooses both.
        allow_private: config.delivery.mx_allow_private,
        ..FetchSettings::default()
    };
    let fetcher = HttpsPolicyFetcher::new(dns.clone(), fetch).map_err(|e| {
        let var = if settings.ca_file.is_some() { "TIDINGS_MTA_STS_CA_FILE" } else { "TIDINGS_MTA_STS" };
        ConfigError::new(var, None, e.to_string())
    })?;
    let policies = MtaSts::new(dns, Arc::new(fetcher), Arc::new(SystemClock), CacheSettings::default());
    match &settings.ca_file {
        None => tracing::info!(
            "MTA-STS: on (TIDINGS_MTA_STS): recipient domains' enforce policies are obeyed, certificates checked \
             against the system's CA store"
        ),
        Some(file) => tracing::info!(
            ca_file = %file.path.display(),
            "MTA-STS: on (TIDINGS_MTA_STS): recipient domains' enforce policies are obeyed, certificates checked \
             against TIDINGS_MTA_STS_CA_FILE only"
        ),
    }
    Ok(Some((Arc::new(policies), roots)))
}

fn trust_roots(settings: &MtaStsConfig) -> TrustRoots {
    match &settings.ca_file {
        Some(file) => TrustRoots::Only(file.certificates.clone()),
        None => TrustRoots::System,
    }
}
