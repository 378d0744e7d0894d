//! ForksSweepWorkflow, started daily by the Temporal Schedule `forks-sweep`: deletes the forks the
//! spec's rules say are due (`belay_domain::repo::fork_due_for_deletion`), ending overdue edit
//! sessions first. Candidate forks join behind the marker `sweep-candidate-forks`.

use crate::edit_session::{
    EditCommand, EditSandboxApi, EditSessionWorkflow, EditStoreApi, EndSession, edit_workflow_id,
};
use crate::options;
use belay_domain::repo::{ForkKind, SweepFork, fork_due_for_deletion};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{SignalWorkflowOptions, WorkflowContext, WorkflowResult};

/// The schedule's id, and the id of the workflow each of its runs starts.
pub const SCHEDULE_ID: &str = "forks-sweep";
/// How often the schedule fires.
pub const EVERY: Duration = Duration::from_secs(24 * 3600);
/// Forks deleted per activity.
const BATCH: usize = 200;

/// The `patched` marker of the change that signals `closed` to the workflow of a session the sweep
/// ends (before it, the session's workflow was left waiting).
pub const SIGNALS_ENDED_SESSIONS: &str = "sweep-signals-ended-sessions";

/// That change first shipped without its marker. Sweeps started before this instant (unix
/// seconds, 2026-11-30T06:30:00Z: after the last recorded sweep without the signal, 06:11, and
/// before the first with it, 06:48) did not signal; unmarked sweeps started after it did. From the
/// marker on, the marker alone decides. See docs/decisions/0011-workflow-versioning.md.
const SIGNALS_SHIPPED_UNMARKED_AT: i64 = 1_796_020_200;

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepReport {
    pub considered: usize,
    pub deleted: Vec<String>,
    pub sessions_ended: Vec<belay_domain::ids::EditSessionId>,
}

pub struct SweepStoreApi;

#[activity_definitions]
impl SweepStoreApi {
    /// Every fork not yet swept, with its facts.
    #[activity(name = "db.sweep_forks")]
    pub fn forks(input: ()) -> Result<Vec<SweepFork>, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.mark_forks_swept")]
    pub fn mark_swept(repos: Vec<String>) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

pub struct SweepGitApi;

#[activity_definitions]
impl SweepGitApi {
    /// Deletes these forks (a fork already gone counts as deleted).
    #[activity(name = "git.sweep_delete")]
    pub fn delete(repos: Vec<String>) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

pub mod sweep_definitions {
    pub use super::sweep_git_api::Delete;
    pub use super::sweep_store_api::{Forks, MarkSwept};
}

#[workflow]
#[derive(Default)]
pub struct ForksSweepWorkflow;

#[workflow_methods]
impl ForksSweepWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, _input: ()) -> WorkflowResult<SweepReport> {
        let now = ctx
            .workflow_time()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        let mut forks = ctx.execute_activity(SweepStoreApi::forks, (), options::db()).await?;
        if ctx.patched(crate::promotion::SWEEPS_CANDIDATE_FORKS) {
            forks.extend(crate::promotion::candidate_forks_to_sweep(ctx).await?);
        }
        let mut report = SweepReport {
            considered: forks.len(),
            ..Default::default()
        };
        let due: Vec<_> = forks
            .into_iter()
            .filter(|f| fork_due_for_deletion(f.kind, f.ended_at_secs, now, &f.facts))
            .collect();
        let sandbox = options::sandbox(Duration::from_secs(120));
        for f in due.iter().filter(|f| f.kind == ForkKind::EditSession) {
            if let Some((session, uid)) = &f.session {
                // An overdue session still open: stop its processes and directory, then end it.
                let _ = ctx
                    .execute_activity(
                        EditSandboxApi::stop,
                        EditCommand {
                            project_id: f.project_id.clone(),
                            session_id: session.clone(),
                            uid: *uid,
                            command: String::new(),
                        },
                        sandbox.clone(),
                    )
                    .await;
                let reason = "overdue: ended by the daily sweep".to_owned();
                ctx.execute_activity(
                    EditStoreApi::end,
                    EndSession {
                        session_id: session.clone(),
                        reason: reason.clone(),
                    },
                    options::db(),
                )
                .await?;
                // Its workflow completes too (it may be gone already: nothing to tell then).
                if ctx.patched(SIGNALS_ENDED_SESSIONS) || now >= SIGNALS_SHIPPED_UNMARKED_AT {
                    let _ = ctx
                        .external_workflow(edit_workflow_id(session), None)
                        .signal(EditSessionWorkflow::closed, reason, SignalWorkflowOptions::default())
                        .await;
                }
                report.sessions_ended.push(session.clone());
            }
        }
        let git = options::git(Duration::from_secs(600));
        let repos: Vec<String> = due.iter().map(|f| f.repo.clone()).collect();
        for chunk in repos.chunks(BATCH) {
            ctx.execute_activity(SweepGitApi::delete, chunk.to_vec(), git.clone())
                .await?;
            ctx.execute_activity(SweepStoreApi::mark_swept, chunk.to_vec(), options::db())
                .await?;
            report.deleted.extend(chunk.iter().cloned());
        }
        Ok(report)
    }
}
