//! The `Authed` extractor: finds the key (`Authorization: Bearer` or `X-Api-Key`), applies the
//! failed-auth throttle per client address, and asks core who the caller is.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use tidings_core::Error;
use tidings_core::usecases::Principal;

use crate::rate_limit::core_error;
use crate::{ApiError, ApiState};

/// The authenticated caller of a handler.
pub struct Authed(pub Principal);

impl FromRequestParts<ApiState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Self::Rejection> {
        let client = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |ConnectInfo(addr)| addr.ip());
        let now = state.core.clock().now();
        let limits = &state.limits;
        // A failure is a 401 only if counting it fits the client's allowance, decided in one
        // step so that concurrent failures cannot all pass a check made before any counted.
        let Some(presented) = presented_key(&parts.headers) else {
            limits
                .record_auth_failure(client, now)
                .await
                .map_err(core_error)?
                .map_err(ApiError::TooManyAuthFailures)?;
            return Err(ApiError::MissingApiKey);
        };
        // Both are reads of shared state; asking at once saves a round trip when the limits
        // are in a database. A blocked client is refused whatever its key, so a right guess
        // during a block reveals nothing.
        let (blocked, authenticated) = tokio::join!(limits.check_auth(client, now), state.core.authenticate(presented));
        blocked.map_err(core_error)?.map_err(ApiError::TooManyAuthFailures)?;
        match authenticated {
            Ok(principal) => Ok(Self(principal)),
            Err(Error::InvalidApiKey) => {
                limits
                    .record_auth_failure(client, now)
                    .await
                    .map_err(core_error)?
                    .map_err(ApiError::TooManyAuthFailures)?;
                Err(Error::InvalidApiKey.into())
            }
            Err(other) => Err(other.into()),
        }
    }
}

/// The key text, if the request carries one: a `Bearer` credential, else `X-Api-Key`. Another
/// `Authorization` scheme (`Basic`, `Token`) is no key at all (contract §1:
/// `missing_api_key`); a header that is present but unreadable or empty counts as a (wrong)
/// key.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers.get(axum::http::header::AUTHORIZATION).and_then(|value| {
        let (scheme, key) = value.to_str().ok()?.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
    });
    bearer.or_else(|| headers.get("x-api-key").map(|v| v.to_str().unwrap_or("").trim()))
}
