//! What an Evidence row's object holds, read through the API: the commands a check ran and the
//! tail of their output, so that a reviewer (or the console) can see why a check failed without
//! reaching into the object store. The object is written by the check; this only reads it, and
//! only for the Candidate's owner.

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Caller;
use axum::Json;
use axum::extract::{Path, State};
use belay_domain::ids::{AccountId, CandidateId};
use belay_store::candidates::EvidenceRow;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The output an Evidence object holds.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceOutput {
    pub evidence_id: String,
    pub check_id: String,
    pub attempt: u32,
    /// What the check ran, each with the tail of its output: one part for a command check; the
    /// Candidate's and the base's for `contract`; the browser's log for `browser`; none for a
    /// check that ran no command (a composition conflict, a check that could not start).
    pub parts: Vec<OutputPart>,
}

/// One command's output (or the browser's log).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputPart {
    /// `output`, `candidate`, `base` or `log`.
    pub label: String,
    pub command: Option<String>,
    pub exit_code: Option<i64>,
    pub timed_out: Option<bool>,
    /// The last characters of stdout then stderr, as the check kept them.
    pub tail: String,
}

/// The Evidence row `evidence_id` of the caller's Candidate `id` and its object.
pub(crate) async fn evidence_object(
    s: &AppState,
    account: &AccountId,
    id: &CandidateId,
    evidence_id: &str,
) -> ApiResult<(EvidenceRow, Value)> {
    s.store
        .get_candidate(account, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("candidate {id} not found")))?;
    let row = s
        .store
        .list_evidence(id)
        .await?
        .into_iter()
        .find(|r| r.evidence.id.as_str() == evidence_id)
        .ok_or_else(|| ApiError::not_found(format!("evidence {evidence_id} not found on candidate {id}")))?;
    let key = row
        .object_key
        .clone()
        .ok_or_else(|| ApiError::not_found(format!("evidence {evidence_id} has no object")))?;
    let gone = || ApiError::not_found(format!("the object of evidence {evidence_id} is gone"));
    let bytes = s
        .objects
        .get(&object_store::path::Path::from(key.as_str()))
        .await
        .map_err(|_| gone())?
        .bytes()
        .await
        .map_err(|_| gone())?;
    Ok((row, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

fn part(label: &str, command: Option<&Value>, v: &Value) -> Option<OutputPart> {
    Some(OutputPart {
        label: label.to_owned(),
        command: command.and_then(Value::as_str).map(str::to_owned),
        exit_code: v["exitCode"].as_i64(),
        timed_out: v["timedOut"].as_bool(),
        tail: v["outputTail"].as_str()?.to_owned(),
    })
}

/// The parts of an object, in the shapes the checks write.
fn parts(object: &Value) -> Vec<OutputPart> {
    let command = object.get("command");
    if let Some(p) = part("output", command, object) {
        return vec![p];
    }
    let sides: Vec<OutputPart> = ["candidate", "base"]
        .iter()
        .filter_map(|side| part(side, command, &object[side]))
        .collect();
    if !sides.is_empty() {
        return sides;
    }
    match object["log"].as_array() {
        Some(lines) if !lines.is_empty() => vec![OutputPart {
            label: "log".into(),
            command: None,
            exit_code: None,
            timed_out: None,
            tail: lines.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"),
        }],
        _ => vec![],
    }
}

/// The output of one Evidence row: the commands its check ran and the tail of what they printed.
#[utoipa::path(get, path = "/v1/candidates/{id}/evidence/{evidenceId}/output", tag = "verification",
    params(("id" = String, Path), ("evidenceId" = String, Path)),
    responses((status = 200, body = EvidenceOutput), (status = 404, body = ErrorBody)))]
pub async fn output(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path((id, evidence_id)): Path<(CandidateId, String)>,
) -> ApiResult<Json<EvidenceOutput>> {
    let (row, object) = evidence_object(&s, &a.id, &id, &evidence_id).await?;
    Ok(Json(EvidenceOutput {
        evidence_id: row.evidence.id.to_string(),
        check_id: row.evidence.check_id.to_string(),
        attempt: row.evidence.attempt,
        parts: parts(&object),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_check_has_one_part_a_contract_two_and_a_browser_its_log() {
        let one = parts(&json!({"command": "bun test", "exitCode": 1, "timedOut": false, "outputTail": "1 fail"}));
        assert_eq!(one.len(), 1);
        assert_eq!(
            (
                one[0].label.as_str(),
                one[0].command.as_deref(),
                one[0].exit_code,
                one[0].tail.as_str()
            ),
            ("output", Some("bun test"), Some(1), "1 fail")
        );
        let two = parts(&json!({"command": "bun run routes",
            "candidate": {"exitCode": 0, "outputTail": "GET /a"}, "base": {"exitCode": 0, "outputTail": "GET /"}}));
        assert_eq!(
            two.iter()
                .map(|p| (p.label.as_str(), p.tail.as_str()))
                .collect::<Vec<_>>(),
            [("candidate", "GET /a"), ("base", "GET /")]
        );
        let log = parts(&json!({"log": ["opened /", "clicked"], "screenshots": []}));
        assert_eq!(
            (log[0].label.as_str(), log[0].tail.as_str()),
            ("log", "opened /\nclicked")
        );
        assert!(parts(&json!({"conflict": {"task": "t", "paths": []}})).is_empty());
        assert!(parts(&Value::Null).is_empty());
    }
}
