//! The `Authed` extractor: finds the key (`Authorization: Bearer` or `X-Api-Key`) and asks
//! core who the caller is, with the failed-auth throttle per client address
//! ([`Tidings::authenticate_client`](tidings_core::usecases::Tidings::authenticate_client));
//! the address is the request's [`ClientIp`].

use std::net::{IpAddr, Ipv6Addr};

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use tidings_core::Error;
use tidings_core::usecases::{AuthOutcome, AuthRefusal, Principal};

use crate::{ApiError, ApiState, ClientIp};

/// The authenticated caller of a handler.
pub struct Authed(pub Principal);

impl FromRequestParts<ApiState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Self::Rejection> {
        let presented = presented_key(&parts.headers).map(str::to_owned);
        authenticate(parts, state, presented.as_deref()).await.map(Self)
    }
}

/// Who presented `key` (read from the request by the caller: `/v1`'s headers, or another
/// provider's, such as Postmark's `X-Postmark-Server-Token`), under the failed-auth throttle of
/// the request's client address. Every front end that takes a key goes through here.
pub(crate) async fn authenticate(
    parts: &mut Parts,
    state: &ApiState,
    key: Option<&str>,
) -> Result<Principal, ApiError> {
    let client = client_ip(parts);
    match state.core.authenticate_client(&*state.limits, client, key).await? {
        AuthOutcome::Admitted(principal) => {
            // The body, read after this extractor, counts in the workspace's share.
            parts.extensions.insert(crate::Owner::Workspace(principal.workspace_id));
            Ok(principal)
        }
        AuthOutcome::Refused(AuthRefusal::Missing) => Err(ApiError::MissingApiKey),
        AuthOutcome::Refused(AuthRefusal::Invalid) => Err(Error::InvalidApiKey.into()),
        AuthOutcome::Refused(AuthRefusal::Blocked(wait)) => Err(ApiError::TooManyAuthFailures(wait)),
    }
}

/// The key text, if the request carries one: a `Bearer` credential, else `X-Api-Key`. Another
/// `Authorization` scheme (`Basic`, `Token`) is no key at all
/// (`missing_api_key`); a header that is present but unreadable or empty counts as a (wrong)
/// key.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    bearer(headers).or_else(|| headers.get("x-api-key").map(|v| v.to_str().unwrap_or("").trim()))
}

/// The request's [`ClientIp`]; without one (the router served without connection info) all
/// clients share the unspecified address.
pub(crate) fn client_ip(parts: &Parts) -> IpAddr {
    parts.extensions.get::<ClientIp>().map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |ClientIp(ip)| *ip)
}

/// The `Bearer` credential of the request, if it carries one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let (scheme, token) = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}
