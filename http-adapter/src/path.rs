//! `ApiPath<T>`: path parameters whose rejection (e.g. `%FF`, not UTF-8) answers in the
//! envelope as 404 — no resource can have such a name — instead of axum's plain text.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// Path parameters deserialised into `T`.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state).await.map(|Path(v)| Self(v)).map_err(|_| ApiError::UnknownRoute)
    }
}
