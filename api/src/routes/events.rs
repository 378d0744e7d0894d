//! The append-only event log, oldest first.

use crate::AppState;
use crate::error::ApiResult;
use crate::extract::{ApiQuery, Caller, int_param};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct EventsQuery {
    /// Return events with a larger id than this.
    pub after: Option<String>,
    /// Only events of this entity (a job id, a run id, …).
    pub entity: Option<String>,
    pub limit: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub id: i64,
    pub entity: String,
    pub kind: String,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    pub at: i64,
}

/// Events after a given id: those of the caller's own projects (and everything in them), gg
/// configurations and account, and those of jobs, runs, reviews and the catalogue, which every
/// account sees.
#[utoipa::path(get, path = "/v1/events", tag = "events", params(EventsQuery), responses((status = 200, body = [EventView])))]
pub async fn list(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> ApiResult<Json<Vec<EventView>>> {
    let after = int_param("after", q.after.as_deref(), 0, 0, i64::MAX)?;
    let limit = int_param("limit", q.limit.as_deref(), 100, 1, 1000)?;
    let events = s.store.events_for(&a.id, after, q.entity.as_deref(), limit).await?;
    Ok(Json(
        events
            .into_iter()
            .map(|e| EventView {
                id: e.id,
                entity: e.entity,
                kind: e.kind,
                payload: e.payload,
                at: e.at,
            })
            .collect(),
    ))
}
