//! Replaying recorded histories against the current workflow code: a change to a released
//! workflow's command sequence fails here before it can fail a running workflow.

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
    let options = WorkflowReplayerOptions::new()
        .register_workflow::<crate::DispatcherWorkflow>()
        .and_then(|o| o.register_workflow::<crate::RunWorkflow>())
        .and_then(|o| o.register_workflow::<crate::probe::ProbeWorkflow>())
        .and_then(|o| o.register_workflow::<crate::provision::ProjectProvisionWorkflow>())
        .and_then(|o| o.register_workflow::<crate::provision::ProjectDeleteWorkflow>())
        .and_then(|o| o.register_workflow::<crate::workspace::WorkspaceWorkflow>())
        .and_then(|o| o.register_workflow::<crate::edit_session::EditSessionWorkflow>())
        .and_then(|o| o.register_workflow::<crate::sweep::ForksSweepWorkflow>())
        .map_err(|e| ReplayError::Replay(e.to_string()))?
        .build();
    let replayer = WorkflowReplayer::new(options).map_err(|e| ReplayError::Replay(e.to_string()))?;
    replayer
        .replay_workflow(history)
        .await
        .map_err(|e| ReplayError::Replay(e.to_string()))
}
