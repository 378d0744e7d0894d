//! WorkspaceWorkflow (id `ws-{run}`): the agent workspace of one task run.
//!
//! It starts at the run's first workspace call and opens the workspace: admit (fewer than four
//! open in the Change), reserve 300 s on the project's meter, fork canonical as `ws-<run>`, merge
//! the ChangeSets of the tasks the run is stacked on into the fork's `main` (the start commit),
//! clone that into `/workspace/<last 24 characters of the run id>` with a read token, and run the
//! install command. Tool calls (read_file, edit_file, write_file, run_command) and the publish
//! are Updates, handled one at a time.
//!
//! A Sandbox lost (killed, or removed after two idle minutes) is noticed by the next call: the
//! workspace is restored from the same fork, whose `main` is the start commit, and the restored
//! HEAD is compared with the recorded start commit. Edits not yet published are gone; if the run
//! had made any, its publish fails the run, so a run never publishes partial work.

use crate::options;
use belay_domain::ids::{ChangeId, ChangeSetId, ProjectId, ReservationId, TaskRunId};
use belay_domain::refusal::{Refusal, RefusalReason};
use belay_domain::workspace::{Allowed, ToolCall, WorkspacePolicy};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

/// The workflow id of a task run's workspace.
pub fn workspace_workflow_id(run_id: &str) -> String {
    format!("ws-{run_id}")
}

/// A workspace with no call for this long is closed and its run failed.
pub const IDLE_CLOSE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceInput {
    pub run_id: TaskRunId,
}

/// What admission decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admitted {
    pub project_id: ProjectId,
    pub change_id: ChangeId,
    pub stacked: Vec<belay_domain::repo::Tip>,
    pub policy: WorkspacePolicy,
    pub reservation_id: ReservationId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Admit {
    Admitted(Admitted),
    Refused(Refusal),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkRequest {
    pub project_id: ProjectId,
    pub run_id: TaskRunId,
    pub stacked: Vec<belay_domain::repo::Tip>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Forked {
    /// The fork's `main` is `start`: `base` (canonical `main` when forked) plus the stacked merges.
    Ready { fork: String, base: String, start: String },
    /// A stacked ChangeSet did not merge.
    Conflict { label: String, paths: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutRequest {
    pub project_id: ProjectId,
    pub run_id: TaskRunId,
    pub fork: String,
    pub start: String,
    pub policy: WorkspacePolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckedOut {
    /// HEAD is the start commit; `opened_at` (unix seconds) starts the meter's use.
    Ready { opened_at: i64 },
    /// The clone's HEAD is not the recorded start commit, or the install command failed.
    Failed { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRequest {
    pub project_id: ProjectId,
    pub run_id: TaskRunId,
    pub call: ToolCall,
    pub allowed: Allowed,
}

/// The answer of one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    pub tool: String,
    /// read_file: the contents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// run_command: exit code, output and whether it timed out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
    /// The build's written files were discarded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discarded: Option<Vec<String>>,
    /// The Sandbox was lost before this call and the workspace restored from its fork.
    pub restored: bool,
    /// Edits made before the loss are gone, and this run can no longer publish.
    pub edits_lost: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolOutcome {
    Done(ToolOutput),
    /// The call cannot be served as asked (no such file, `oldText` not found, a script not in
    /// package.json): a 4xx, and the workspace is as it was.
    Refused(Refusal),
    /// The run directory is gone: the Sandbox was lost.
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishRequest {
    pub message: String,
    pub contract_changes: Vec<String>,
    pub data_changes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushRequest {
    pub project_id: ProjectId,
    pub run_id: TaskRunId,
    pub fork: String,
    /// The recorded start commit: a HEAD still there has nothing to publish.
    pub start: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pushed {
    Commit(String),
    /// The working tree equals the start commit.
    Nothing,
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchRequest {
    pub project_id: ProjectId,
    pub fork: String,
    pub start: String,
    pub commit: String,
    pub change_set_id: ChangeSetId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordRequest {
    pub run_id: TaskRunId,
    pub commit: String,
    pub contract_changes: Vec<String>,
    pub data_changes: Vec<String>,
}

/// What the workspace opened on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedRequest {
    pub run_id: TaskRunId,
    pub base: String,
    pub start: String,
}

/// A publish's last record: the ChangeSet's patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishRequest {
    pub run_id: TaskRunId,
    pub patch_ref: String,
}

/// The run directory to remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveRequest {
    pub project_id: ProjectId,
    pub run_id: TaskRunId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndRequest {
    pub project_id: ProjectId,
    pub run_id: TaskRunId,
    /// Set when the workspace ends without a ChangeSet: the run fails with it.
    pub error: Option<String>,
    /// Unix seconds the use began, when the workspace opened.
    pub opened_at: Option<i64>,
}

/// What a publish answers: the ChangeSet, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PublishReply {
    Published(serde_json::Value),
    Refused(Refusal),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolReply {
    Done(ToolOutput),
    Refused(Refusal),
}

/// What the workspace is doing, for `GET /v1/task-runs/{id}/workspace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    pub phase: String,
    pub start_commit: Option<String>,
    pub dirty: bool,
    pub edits_lost: bool,
    pub restores: u32,
    pub calls: u64,
}

/// Workspace activities on the `belay.db` queue.
pub struct WorkspaceStoreApi;

#[activity_definitions]
impl WorkspaceStoreApi {
    /// Admits the run's workspace and reserves 300 s on the meter, or says why not.
    #[activity(name = "db.workspace_admit")]
    pub fn admit(run_id: TaskRunId) -> Result<Admit, ActivityError> {
        unimplemented!()
    }

    /// Records base, start commit and reservation.
    #[activity(name = "db.workspace_opened")]
    pub fn opened(input: OpenedRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// Records the ChangeSet row of a publish (idempotent); returns its id.
    #[activity(name = "db.workspace_record")]
    pub fn record(input: RecordRequest) -> Result<ChangeSetId, ActivityError> {
        unimplemented!()
    }

    /// Gives the ChangeSet its patch, marks the workspace published and the run succeeded.
    #[activity(name = "db.workspace_finish")]
    pub fn finish(input: FinishRequest) -> Result<serde_json::Value, ActivityError> {
        unimplemented!()
    }

    /// Settles the meter and, with an error, fails the workspace and its run.
    #[activity(name = "db.workspace_end")]
    pub fn end(input: EndRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Workspace activities on the `belay.git` queue.
pub struct WorkspaceGitApi;

#[activity_definitions]
impl WorkspaceGitApi {
    /// Forks canonical as `ws-<run>` and moves its `main` to base plus the stacked merges.
    #[activity(name = "git.workspace_fork")]
    pub fn fork(input: ForkRequest) -> Result<Forked, ActivityError> {
        unimplemented!()
    }

    /// Writes the ChangeSet's patch (start → commit) to the object store; returns its key.
    #[activity(name = "git.workspace_patch")]
    pub fn patch(input: PatchRequest) -> Result<String, ActivityError> {
        unimplemented!()
    }
}

/// Workspace activities on the `belay.sandbox` queue.
pub struct WorkspaceSandboxApi;

#[activity_definitions]
impl WorkspaceSandboxApi {
    /// Clones the fork into the run directory (afresh), checks HEAD against the start commit and
    /// runs the install command.
    #[activity(name = "sandbox.workspace_checkout")]
    pub fn checkout(input: CheckoutRequest) -> Result<CheckedOut, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "sandbox.workspace_tool")]
    pub fn tool(input: ToolRequest) -> Result<ToolOutcome, ActivityError> {
        unimplemented!()
    }

    /// Commits the working tree and pushes it to the fork's `main` with a write token, then
    /// revokes the token.
    #[activity(name = "sandbox.workspace_push")]
    pub fn push(input: PushRequest) -> Result<Pushed, ActivityError> {
        unimplemented!()
    }

    /// Removes the run directory.
    #[activity(name = "sandbox.workspace_remove")]
    pub fn remove(input: RemoveRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// The workspace markers, re-exported for the implementations.
pub mod workspace_definitions {
    pub use super::workspace_git_api::{Fork, Patch};
    pub use super::workspace_sandbox_api::{Checkout, Push, Remove, Tool};
    pub use super::workspace_store_api::{Admit, End, Finish, Opened, Record};
}

/// A tool call gets its 180 s plus room for a restore and the after-command kill.
const TOOL_ACTIVITY_TIMEOUT: Duration = Duration::from_secs(belay_domain::workspace::TOOL_TIMEOUT_SECS + 60);
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(600);

#[workflow]
#[derive(Default)]
pub struct WorkspaceWorkflow {
    run_id: TaskRunId,
    phase: String,
    refusal: Option<Refusal>,
    admitted: Option<Admitted>,
    fork: Option<String>,
    start: Option<String>,
    opened_at: Option<i64>,
    busy: bool,
    /// Update handlers running; the workflow ends only when none is.
    handlers: u32,
    dirty: bool,
    edits_lost: bool,
    restores: u32,
    calls: u64,
    finished: bool,
}

fn infra(e: impl std::fmt::Display) -> Refusal {
    Refusal::new(RefusalReason::SandboxUnavailable, e.to_string())
}

#[workflow_methods]
impl WorkspaceWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, input: WorkspaceInput) -> WorkflowResult<String> {
        ctx.state_mut(|s| {
            s.run_id = input.run_id.clone();
            s.phase = "opening".into();
        });
        if let Err(refusal) = Self::open(ctx, &input.run_id).await {
            let ended = ctx.state(|s| s.admitted.is_some());
            ctx.state_mut(|s| {
                s.refusal = Some(refusal.clone());
                s.phase = if ended { "failed".into() } else { "refused".into() };
            });
            if ended {
                Self::end(ctx, Some(refusal.message.clone())).await;
            }
            // Let calls waiting on the open read the refusal before the workflow closes.
            ctx.wait_condition(|s| s.handlers == 0).await?;
            return Ok(ctx.state(|s| s.phase.clone()));
        }
        ctx.state_mut(|s| s.phase = "open".into());
        loop {
            let seen = ctx.state(|s| s.calls);
            {
                let mut timer = ctx.timer(IDLE_CLOSE);
                let mut moved = ctx.wait_condition(move |s| s.finished || s.calls != seen);
                temporalio_sdk::workflows::select! {
                    _ = timer => {},
                    _ = moved => {},
                };
            }
            if ctx.state(|s| s.finished) {
                break;
            }
            if ctx.state(|s| s.calls == seen && s.handlers == 0) {
                Self::fail_run(
                    ctx,
                    Refusal::new(
                        RefusalReason::WorkspaceClosed,
                        "the workspace was closed after an hour without a call",
                    ),
                )
                .await;
                break;
            }
        }
        ctx.wait_condition(|s| s.handlers == 0).await?;
        Ok(ctx.state(|s| s.phase.clone()))
    }

    async fn open(ctx: &mut WorkflowContext<Self>, run_id: &TaskRunId) -> Result<(), Refusal> {
        let admitted = match ctx
            .execute_activity(WorkspaceStoreApi::admit, run_id.to_owned(), options::db())
            .await
            .map_err(infra)?
        {
            Admit::Admitted(a) => a,
            Admit::Refused(r) => return Err(r),
        };
        ctx.state_mut(|s| s.admitted = Some(admitted.clone()));
        let forked = ctx
            .execute_activity(
                WorkspaceGitApi::fork,
                ForkRequest {
                    project_id: admitted.project_id.clone(),
                    run_id: run_id.clone(),
                    stacked: admitted.stacked.clone(),
                },
                options::git(Duration::from_secs(300)),
            )
            .await
            .map_err(infra)?;
        let (fork, base, start) = match forked {
            Forked::Ready { fork, base, start } => (fork, base, start),
            Forked::Conflict { label, paths } => {
                return Err(Refusal::new(
                    RefusalReason::StackConflict,
                    format!("the ChangeSet of task {label} does not merge: {}", paths.join(", ")),
                ));
            }
        };
        ctx.state_mut(|s| {
            s.fork = Some(fork.clone());
            s.start = Some(start.clone());
        });
        Self::checkout(ctx).await?;
        ctx.execute_activity(
            WorkspaceStoreApi::opened,
            OpenedRequest {
                run_id: run_id.clone(),
                base,
                start,
            },
            options::db(),
        )
        .await
        .map_err(infra)?;
        Ok(())
    }

    /// Clones the fork into the run directory; used to open and to restore.
    async fn checkout(ctx: &mut WorkflowContext<Self>) -> Result<(), Refusal> {
        let (admitted, fork, start, run_id) =
            ctx.state(|s| (s.admitted.clone(), s.fork.clone(), s.start.clone(), s.run_id.clone()));
        let (Some(admitted), Some(fork), Some(start)) = (admitted, fork, start) else {
            return Err(Refusal::new(
                RefusalReason::WorkspaceClosed,
                "the workspace is not open",
            ));
        };
        let out = ctx
            .execute_activity(
                WorkspaceSandboxApi::checkout,
                CheckoutRequest {
                    project_id: admitted.project_id,
                    run_id,
                    fork,
                    start,
                    policy: admitted.policy,
                },
                options::sandbox(CHECKOUT_TIMEOUT),
            )
            .await
            .map_err(infra)?;
        match out {
            CheckedOut::Ready { opened_at } => {
                ctx.state_mut(|s| {
                    if s.opened_at.is_none() {
                        s.opened_at = Some(opened_at);
                    }
                });
                Ok(())
            }
            CheckedOut::Failed { reason } => Err(Refusal::new(RefusalReason::WorkspaceOpenFailed, reason)),
        }
    }

    /// Removes the run directory, settles the meter and (with an error) fails the run.
    async fn end(ctx: &mut WorkflowContext<Self>, error: Option<String>) {
        let (admitted, run_id, opened_at) = ctx.state(|s| (s.admitted.clone(), s.run_id.clone(), s.opened_at));
        let Some(admitted) = admitted else { return };
        let _ = ctx
            .execute_activity(
                WorkspaceSandboxApi::remove,
                RemoveRequest {
                    project_id: admitted.project_id.clone(),
                    run_id: run_id.clone(),
                },
                options::sandbox(Duration::from_secs(60)),
            )
            .await;
        let _ = ctx
            .execute_activity(
                WorkspaceStoreApi::end,
                EndRequest {
                    project_id: admitted.project_id,
                    run_id,
                    error,
                    opened_at,
                },
                options::db(),
            )
            .await;
    }

    /// Waits until the workspace is open (or will never be) and no other call runs, then takes
    /// the workspace for this call.
    async fn acquire(ctx: &mut WorkflowContext<Self>) -> Result<(), Refusal> {
        ctx.wait_condition(|s| (s.phase == "open" || s.refusal.is_some() || s.finished) && !s.busy)
            .await
            .map_err(|_| Refusal::new(RefusalReason::WorkspaceClosed, "the workspace is closing"))?;
        if let Some(r) = ctx.state(|s| s.refusal.clone()) {
            return Err(r);
        }
        if ctx.state(|s| s.finished) {
            return Err(Refusal::new(RefusalReason::WorkspaceClosed, "the workspace has ended"));
        }
        ctx.state_mut(|s| {
            s.busy = true;
            s.calls += 1;
        });
        Ok(())
    }

    /// One tool call.
    #[update]
    pub async fn tool(ctx: &mut WorkflowContext<Self>, input: (ToolCall, Allowed)) -> ToolReply {
        ctx.state_mut(|s| s.handlers += 1);
        let reply = match Self::acquire(ctx).await {
            Ok(()) => {
                let reply = Self::tool_inner(ctx, input).await;
                ctx.state_mut(|s| s.busy = false);
                reply
            }
            Err(r) => Err(r),
        };
        ctx.state_mut(|s| s.handlers -= 1);
        match reply {
            Ok(out) => ToolReply::Done(out),
            Err(r) => ToolReply::Refused(r),
        }
    }

    async fn tool_inner(ctx: &mut WorkflowContext<Self>, input: (ToolCall, Allowed)) -> Result<ToolOutput, Refusal> {
        let (call, allowed) = input;
        let (project_id, run_id) = ctx.state(|s| {
            (
                s.admitted.as_ref().map(|a| a.project_id.clone()).unwrap_or_default(),
                s.run_id.clone(),
            )
        });
        let request = ToolRequest {
            project_id,
            run_id,
            call: call.clone(),
            allowed,
        };
        let mut restored = false;
        let mut edits_lost = false;
        for _ in 0..2 {
            let outcome = ctx
                .execute_activity(
                    WorkspaceSandboxApi::tool,
                    request.clone(),
                    options::sandbox(TOOL_ACTIVITY_TIMEOUT),
                )
                .await
                .map_err(infra)?;
            match outcome {
                ToolOutcome::Done(mut out) => {
                    if call.may_write() {
                        ctx.state_mut(|s| s.dirty = true);
                    }
                    out.restored = restored;
                    out.edits_lost = edits_lost || ctx.state(|s| s.edits_lost);
                    return Ok(out);
                }
                ToolOutcome::Refused(r) => return Err(r),
                ToolOutcome::Lost => {
                    Self::checkout(ctx).await?;
                    restored = true;
                    edits_lost = ctx.state_mut(|s| {
                        s.restores += 1;
                        if s.dirty {
                            s.edits_lost = true;
                        }
                        s.edits_lost
                    });
                }
            }
        }
        Err(infra(
            "the Sandbox was lost again right after the workspace was restored",
        ))
    }

    /// Publishes the run's work as its ChangeSet.
    #[update]
    pub async fn publish(ctx: &mut WorkflowContext<Self>, input: PublishRequest) -> PublishReply {
        ctx.state_mut(|s| s.handlers += 1);
        let reply = match Self::acquire(ctx).await {
            Ok(()) => {
                let reply = Self::publish_inner(ctx, input).await;
                ctx.state_mut(|s| s.busy = false);
                reply
            }
            Err(r) => Err(r),
        };
        ctx.state_mut(|s| s.handlers -= 1);
        match reply {
            Ok(cs) => PublishReply::Published(cs),
            Err(r) => PublishReply::Refused(r),
        }
    }

    async fn fail_run(ctx: &mut WorkflowContext<Self>, refusal: Refusal) -> Refusal {
        ctx.state_mut(|s| {
            s.finished = true;
            s.phase = "failed".into();
            s.refusal = Some(refusal.clone());
        });
        Self::end(ctx, Some(refusal.message.clone())).await;
        refusal
    }

    async fn publish_inner(
        ctx: &mut WorkflowContext<Self>,
        input: PublishRequest,
    ) -> Result<serde_json::Value, Refusal> {
        let lost = Refusal::new(
            RefusalReason::WorkspaceLost,
            "the Sandbox was lost after this run made edits; the run failed rather than publish partial work",
        );
        if ctx.state(|s| s.edits_lost) {
            return Err(Self::fail_run(ctx, lost).await);
        }
        let (admitted, run_id, fork, start) =
            ctx.state(|s| (s.admitted.clone(), s.run_id.clone(), s.fork.clone(), s.start.clone()));
        let (Some(admitted), Some(fork), Some(start)) = (admitted, fork, start) else {
            return Err(Refusal::new(
                RefusalReason::WorkspaceClosed,
                "the workspace is not open",
            ));
        };
        let pushed = ctx
            .execute_activity(
                WorkspaceSandboxApi::push,
                PushRequest {
                    project_id: admitted.project_id.clone(),
                    run_id: run_id.clone(),
                    fork: fork.clone(),
                    start: start.clone(),
                    message: input.message.clone(),
                },
                options::sandbox(Duration::from_secs(660)),
            )
            .await
            .map_err(infra)?;
        let commit = match pushed {
            Pushed::Commit(c) => c,
            Pushed::Nothing => {
                return Err(Refusal::new(
                    RefusalReason::NothingToPublish,
                    "the workspace has no change from its start commit",
                ));
            }
            Pushed::Lost => {
                if ctx.state(|s| s.dirty) {
                    ctx.state_mut(|s| s.edits_lost = true);
                    return Err(Self::fail_run(ctx, lost).await);
                }
                // Nothing was edited, so nothing was lost: restore and report nothing to publish.
                Self::checkout(ctx).await?;
                ctx.state_mut(|s| s.restores += 1);
                return Err(Refusal::new(
                    RefusalReason::NothingToPublish,
                    "the workspace has no change from its start commit",
                ));
            }
        };
        let change_set_id = ctx
            .execute_activity(
                WorkspaceStoreApi::record,
                RecordRequest {
                    run_id: run_id.clone(),
                    commit: commit.clone(),
                    contract_changes: input.contract_changes,
                    data_changes: input.data_changes,
                },
                options::db(),
            )
            .await
            .map_err(infra)?;
        let patch_ref = ctx
            .execute_activity(
                WorkspaceGitApi::patch,
                PatchRequest {
                    project_id: admitted.project_id.clone(),
                    fork,
                    start,
                    commit,
                    change_set_id,
                },
                options::git(Duration::from_secs(300)),
            )
            .await
            .map_err(infra)?;
        let cs = ctx
            .execute_activity(
                WorkspaceStoreApi::finish,
                FinishRequest { run_id, patch_ref },
                options::db(),
            )
            .await
            .map_err(infra)?;
        ctx.state_mut(|s| {
            s.finished = true;
            s.phase = "published".into();
        });
        Self::end(ctx, None).await;
        Ok(cs)
    }

    /// Ends the workspace without a ChangeSet: the run fails.
    #[update]
    pub async fn close(ctx: &mut WorkflowContext<Self>, _input: ()) -> PublishReply {
        ctx.state_mut(|s| s.handlers += 1);
        let r = match Self::acquire(ctx).await {
            Ok(()) => {
                let r = Self::fail_run(
                    ctx,
                    Refusal::new(
                        RefusalReason::WorkspaceClosed,
                        "the workspace was closed without a ChangeSet",
                    ),
                )
                .await;
                ctx.state_mut(|s| s.busy = false);
                r
            }
            Err(r) => r,
        };
        ctx.state_mut(|s| s.handlers -= 1);
        PublishReply::Refused(r)
    }

    #[query]
    pub fn status(&self, _ctx: &WorkflowContextView) -> WorkspaceStatus {
        WorkspaceStatus {
            phase: self.phase.clone(),
            start_commit: self.start.clone(),
            dirty: self.dirty,
            edits_lost: self.edits_lost,
            restores: self.restores,
            calls: self.calls,
        }
    }
}
