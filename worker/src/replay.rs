//! Replaying recorded histories against the current workflow code: a change to a released
//! workflow's command sequence fails here before it can fail a running workflow. The replayer
//! knows exactly the workflows the workflows pool registers (one list, [`register_every_workflow`]).

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
    let options = crate::register_every_workflow!(WorkflowReplayerOptions::new())
        .map_err(|e| ReplayError::Replay(e.to_string()))?
        .build();
    let replayer = WorkflowReplayer::new(options).map_err(|e| ReplayError::Replay(e.to_string()))?;
    replayer
        .replay_workflow(history)
        .await
        .map_err(|e| ReplayError::Replay(e.to_string()))
}
