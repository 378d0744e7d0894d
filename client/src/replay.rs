//! Replaying recorded histories against the current workflow code: a change to a released
//! workflow's command sequence fails here before it can fail a running workflow. The replayer
//! knows exactly the workflows the workflows pool registers (one list,
//! [`belay_workflows::register_every_workflow`]). It lives beside the history fetch, outside the
//! worker, so a test that replays links the workflows and not the activities and adapters.

use temporalio_client::WorkflowHistory;
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("history is not readable: {0}")]
    History(String),
    #[error("replay failed (nondeterminism?): {0}")]
    Replay(String),
}

/// Replays one history (Temporal's JSON export) against every belay workflow.
pub async fn replay_json(json: &[u8]) -> Result<(), ReplayError> {
    let history = WorkflowHistory::from_json(json).map_err(|e| ReplayError::History(e.to_string()))?;
    let options = belay_workflows::register_every_workflow!(WorkflowReplayerOptions::new())
        .map_err(|e| ReplayError::Replay(e.to_string()))?
        .build();
    let replayer = WorkflowReplayer::new(options).map_err(|e| ReplayError::Replay(e.to_string()))?;
    replayer
        .replay_workflow(history)
        .await
        .map_err(|e| ReplayError::Replay(e.to_string()))
}

/// The `patched` markers a history (Temporal's JSON export) recorded, in order: what a test reads
/// to tell which branch of a versioned workflow a history took.
pub fn patches(json: &[u8]) -> Result<Vec<String>, ReplayError> {
    use base64::Engine;
    let unreadable = |what: &str| ReplayError::History(format!("a patch marker without {what}"));
    let history: serde_json::Value = serde_json::from_slice(json).map_err(|e| ReplayError::History(e.to_string()))?;
    let events = history["events"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for event in &events {
        let marker = &event["attributes"]["MarkerRecordedEventAttributes"];
        if marker["marker_name"] != "core_patch" {
            continue;
        }
        let data = marker["details"]["patch-data"]["payloads"][0]["data"]
            .as_str()
            .ok_or_else(|| unreadable("data"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| ReplayError::History(e.to_string()))?;
        let patch: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ReplayError::History(e.to_string()))?;
        out.push(patch["id"].as_str().ok_or_else(|| unreadable("an id"))?.to_owned());
    }
    Ok(out)
}
