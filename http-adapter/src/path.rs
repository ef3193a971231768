//! `ApiPath<T>`: path parameters whose rejection (e.g. `%FF`, not UTF-8) answers in the
//! envelope as 404 — no resource can have such a name — instead of axum's plain text; and
//! `IdPath<T>`, a path parameter parsed into a typed id.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use tidings_core::ids::TypedId;

use crate::ApiError;

/// Path parameters deserialised into `T`.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state).await.map(|Path(v)| Self(v)).map_err(|_| ApiError::UnknownRoute)
    }
}

/// One path parameter that is a typed id. Text that is no id becomes the type's `NONE`,
/// which names nothing, so the use case answers it exactly as an unknown id (404 for a caller
/// that may ask, after the same scope checks). Rejected only as [`ApiPath`] rejects.
pub struct IdPath<T>(pub T);

impl<T: TypedId, S: Send + Sync> FromRequestParts<S> for IdPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ApiPath(text) = ApiPath::<String>::from_request_parts(parts, state).await?;
        Ok(Self(T::parse_or_none(&text)))
    }
}
