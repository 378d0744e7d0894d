//! Liveness and readiness: the only routes that need no token.

use crate::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use belay_workflows::{DispatcherWorkflow, queues};
use serde::Serialize;
use temporalio_client::WorkflowDescribeOptions;
use temporalio_client::errors::WorkflowInteractionError;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    pub status: &'static str,
    pub database: &'static str,
    pub temporal: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/v1/healthz", tag = "health", security(), responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The database and Temporal are reachable.
#[utoipa::path(get, path = "/v1/readyz", tag = "health", security(), responses((status = 200, body = Readiness), (status = 503, body = Readiness)))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let database = match state.store.ping().await {
        Ok(()) => "ok",
        Err(e) => {
            tracing::warn!(error = %e, "readiness: database unreachable");
            "unreachable"
        }
    };
    let handle = state
        .temporal
        .get_workflow_handle::<DispatcherWorkflow>(queues::DISPATCHER_ID);
    let temporal = match handle.describe(WorkflowDescribeOptions::default()).await {
        Ok(_) | Err(WorkflowInteractionError::NotFound(_)) => "ok",
        Err(e) => {
            tracing::warn!(error = %e, "readiness: temporal unreachable");
            "unreachable"
        }
    };
    let ready = database == "ok" && temporal == "ok";
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(Readiness {
            status: if ready { "ready" } else { "not_ready" },
            database,
            temporal,
        }),
    )
}
