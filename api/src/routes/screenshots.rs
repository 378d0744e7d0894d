//! The browser check's screenshots: the list an Evidence object holds (name, SHA-256, size) and
//! each one as a PNG image.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Caller;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use belay_domain::browser::MAX_SCREENSHOTS;
use belay_domain::check::CheckId;
use belay_domain::ids::{AccountId, CandidateId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One screenshot of a browser check.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScreenshotView {
    /// Its position, from 0, in the order the check took them.
    pub index: u32,
    /// `home`, `final` or `failure`.
    pub name: String,
    /// The SHA-256 of the PNG, hex.
    pub sha256: String,
    pub bytes: u64,
    /// Where the image is served.
    pub url: String,
}

/// A PNG image.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct Png(pub Vec<u8>);

/// The browser Evidence's object, when the caller may read the Candidate.
async fn evidence_object(
    s: &AppState,
    account: &AccountId,
    id: &CandidateId,
    evidence_id: &str,
) -> ApiResult<serde_json::Value> {
    let (row, object) = super::evidence::evidence_object(s, account, id, evidence_id).await?;
    if row.evidence.check_id != CheckId::Browser {
        return Err(ApiError::not_found(format!(
            "browser evidence {evidence_id} not found on candidate {id}"
        )));
    }
    Ok(object)
}

fn listed(object: &serde_json::Value, id: &str, evidence_id: &str) -> Vec<(ScreenshotView, String)> {
    object["screenshots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let index = u32::try_from(s["index"].as_u64()?).ok()?;
            Some((
                ScreenshotView {
                    index,
                    name: s["name"].as_str()?.to_owned(),
                    sha256: s["sha256"].as_str()?.to_owned(),
                    bytes: s["bytes"].as_u64()?,
                    url: format!("/v1/candidates/{id}/evidence/{evidence_id}/screenshots/{index}"),
                },
                s["key"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The screenshots of one browser Evidence row.
#[utoipa::path(get, path = "/v1/candidates/{id}/evidence/{evidenceId}/screenshots", tag = "verification",
    params(("id" = String, Path), ("evidenceId" = String, Path)),
    responses((status = 200, body = Vec<ScreenshotView>), (status = 404, body = ErrorBody)))]
pub async fn list(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path((id, evidence_id)): Path<(CandidateId, String)>,
) -> ApiResult<Json<Vec<ScreenshotView>>> {
    let object = evidence_object(&s, &a.id, &id, &evidence_id).await?;
    Ok(Json(
        listed(&object, &id, &evidence_id).into_iter().map(|(v, _)| v).collect(),
    ))
}

/// One screenshot, as the PNG the browser took.
#[utoipa::path(get, path = "/v1/candidates/{id}/evidence/{evidenceId}/screenshots/{index}", tag = "verification",
    params(("id" = String, Path), ("evidenceId" = String, Path), ("index" = String, Path, description = "0 to 7")),
    responses((status = 200, content_type = "image/png", body = Png), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn get(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path((id, evidence_id, index)): Path<(CandidateId, String, String)>,
) -> ApiResult<Response> {
    let index: u32 = index
        .parse()
        .ok()
        .filter(|i| (*i as usize) < MAX_SCREENSHOTS)
        .ok_or_else(|| {
            ApiError::invalid(
                "index",
                format!("must be a whole number from 0 to {}", MAX_SCREENSHOTS - 1),
            )
        })?;
    let object = evidence_object(&s, &a.id, &id, &evidence_id).await?;
    let (_, key) = listed(&object, &id, &evidence_id)
        .into_iter()
        .find(|(v, _)| v.index == index)
        .ok_or_else(|| ApiError::not_found(format!("evidence {evidence_id} has no screenshot {index}")))?;
    let png = Png(s
        .objects
        .get(&object_store::path::Path::from(key.as_str()))
        .await
        .map_err(|_| ApiError::not_found(format!("screenshot {index} of evidence {evidence_id} is gone")))?
        .bytes()
        .await
        .map_err(|_| ApiError::not_found(format!("screenshot {index} of evidence {evidence_id} is gone")))?
        .to_vec());
    Ok(([(header::CONTENT_TYPE, "image/png")], png.0).into_response())
}
