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
    /// Only events written through the API by this account (its id).
    pub actor: Option<String>,
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
    /// Who wrote it through the API (none: a worker or the command line).
    pub actor: Option<ActorView>,
}

/// The account and the name of the token that made a write through the API.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActorView {
    pub account_id: String,
    pub account_name: String,
    pub token_name: String,
}

/// Events after a given id: for a member, those of its own projects (and everything in them), gg
/// configurations, account and writes, and those of jobs, runs, reviews and the catalogue, which
/// every account sees; for an operator, every event. `actor` keeps those written through the API
/// by one account.
#[utoipa::path(get, path = "/v1/events", tag = "events", params(EventsQuery), responses((status = 200, body = [EventView])))]
pub async fn list(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> ApiResult<Json<Vec<EventView>>> {
    let after = int_param("after", q.after.as_deref(), 0, 0, i64::MAX)?;
    let limit = int_param("limit", q.limit.as_deref(), 100, 1, 1000)?;
    let filter = belay_store::events::EventFilter {
        after_id: after,
        entity: q.entity.as_deref(),
        actor: q.actor.as_deref(),
        limit,
    };
    let operator = a.role == belay_domain::access::Role::Operator;
    let events = s.store.events_seen_by(&a.id, operator, &filter).await?;
    Ok(Json(
        events
            .into_iter()
            .map(|e| EventView {
                id: e.id,
                entity: e.entity,
                kind: e.kind,
                payload: e.payload,
                at: e.at,
                actor: e.actor.map(|x| ActorView {
                    account_id: x.account_id,
                    account_name: x.account_name,
                    token_name: x.token_name,
                }),
            })
            .collect(),
    ))
}
