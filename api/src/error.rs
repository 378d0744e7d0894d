//! The API's one error type: `{"error":{"code","message"}}` with a 4xx that tells the caller what
//! to fix, or an opaque 500 whose cause is logged once, here.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use belay_domain::ValidationError;
use belay_domain::refusal::{Refusal, RefusalReason};
use belay_domain::validation::Refused;
use belay_store::StoreError;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// `Retry-After` of a 429, in seconds.
    pub retry_after: Option<u64>,
}

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code (`invalid_field`, `not_found`, …).
    pub code: String,
    /// What is wrong and, for a 4xx, what to fix.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn invalid(field: &str, rule: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!("{field}: {rule}"),
        )
    }

    /// A failure the caller cannot fix: logged with its cause chain, answered opaquely.
    pub fn internal(cause: &(dyn std::error::Error + 'static)) -> Self {
        let mut chain = cause.to_string();
        let mut source = cause.source();
        while let Some(s) = source {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            source = s.source();
        }
        tracing::error!(error.chain = %chain, "request failed");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        match e.refused {
            Refused::Invalid => ApiError::invalid(&e.field, &e.rule),
            Refused::Conflict => ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { what, id } => ApiError::not_found(format!("{what} {id} not found")),
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            StoreError::Invalid(v) => v.into(),
            other => ApiError::internal(&other),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(seconds));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The HTTP status of each reason a workflow or activity refuses a call for: the one table.
pub fn refusal_status(reason: RefusalReason) -> StatusCode {
    match reason {
        RefusalReason::NotFound => StatusCode::NOT_FOUND,
        RefusalReason::InvalidField => StatusCode::UNPROCESSABLE_ENTITY,
        RefusalReason::WorkspaceCap | RefusalReason::SandboxCap => StatusCode::TOO_MANY_REQUESTS,
        RefusalReason::SandboxUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        RefusalReason::ProjectNotReady
        | RefusalReason::StackUnpublished
        | RefusalReason::StackConflict
        | RefusalReason::SandboxLost
        | RefusalReason::WorkspaceClosed
        | RefusalReason::WorkspaceOpenFailed
        | RefusalReason::WorkspaceLost
        | RefusalReason::NothingToPublish
        | RefusalReason::SessionEnded => StatusCode::CONFLICT,
    }
}

/// A workflow's refusal of a call (a workspace tool call, an edit-session command), as it is.
impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        ApiError::new(refusal_status(r.reason), r.reason.code(), r.message)
    }
}

/// An Update that did not reach its workflow: 409 `ended_code` when the workflow has completed,
/// else 503 (retryable).
pub fn update_failed(e: temporalio_client::errors::WorkflowUpdateError, ended_code: &str, what: &str) -> ApiError {
    let text = e.to_string();
    if matches!(e, temporalio_client::errors::WorkflowUpdateError::NotFound(_)) || text.contains("completed") {
        return ApiError::new(StatusCode::CONFLICT, ended_code, format!("the {what} has ended"));
    }
    tracing::error!(error = %text, "{what} update failed");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "sandbox_unavailable",
        format!("the {what} could not be reached; retry"),
    )
}
