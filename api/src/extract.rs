//! Request extractors that answer bad input in the API's error shape: the bearer-token caller,
//! a JSON body whose errors name the offending field, and a query string likewise.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use belay_store::accounts::Account;
use bytes::Bytes;
use serde::de::DeserializeOwned;

/// The authenticated account behind `Authorization: Bearer <token>`.
pub struct Caller(pub Account);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <token> header"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim)
            .ok_or_else(|| ApiError::unauthorized("Authorization must be `Bearer <token>`"))?;
        match state.store.authenticate(token).await? {
            Some(account) => Ok(Caller(account)),
            None => Err(ApiError::unauthorized("the bearer token is not valid")),
        }
    }
}

fn strip_location(msg: String) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    }
}

/// Parses JSON text into `T`, naming the field a data error is about.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data => {
                let field = if path == "." { "body".to_string() } else { path };
                ApiError::invalid(&field, strip_location(inner.to_string()))
            }
            _ => ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                format!("body: not valid JSON: {}", strip_location(inner.to_string())),
            ),
        }
    })
}

/// A JSON request body.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), "bad_body", format!("body: {}", e.body_text())))?;
        if bytes.is_empty() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                "body: a JSON body is required",
            ));
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// A query string. Query structs keep their values as text and parse them in the handler with
/// [`int_param`], so a bad value is reported with its parameter's name.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        serde_urlencoded::from_str(parts.uri.query().unwrap_or_default())
            .map(ApiQuery)
            .map_err(|e| ApiError::invalid("query", e))
    }
}

/// Parses an integer query parameter within `min..=max`.
pub fn int_param(name: &str, value: Option<&str>, default: i64, min: i64, max: i64) -> Result<i64, ApiError> {
    let Some(v) = value else { return Ok(default) };
    match v.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::invalid(
            name,
            format!("must be an integer from {min} to {max}"),
        )),
    }
}
