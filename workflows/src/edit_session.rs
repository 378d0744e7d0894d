//! EditSessionWorkflow (id `edit-<hex>`): one code edit session.
//!
//! Opening forks canonical as `edit-<hex>` and starts no Sandbox. Each command is an Update,
//! one at a time: reserve 480 s on the project's meter (429 `sandbox_cap` at the cap), run the
//! command as the session's own unprivileged user with 120 s (the first command clones the fork
//! into `/workspace/edit-<hex>`), after which every process of that user is killed, then settle.
//! The end kills the session's processes while the Sandbox is awake, removes the directory and
//! deletes the fork.

use crate::options;
use belay_domain::ids::{EditSessionId, ProjectId, ReservationId};
use belay_domain::refusal::{Refusal, RefusalReason};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowResult};

/// The workflow id of session `edit_<hex>`: `edit-<hex>`.
pub fn edit_workflow_id(session_id: &str) -> String {
    format!("edit-{}", session_id.strip_prefix("edit_").unwrap_or(session_id))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditInput {
    pub session_id: EditSessionId,
    pub project_id: ProjectId,
    pub uid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditCommand {
    pub project_id: ProjectId,
    pub session_id: EditSessionId,
    pub uid: u32,
    pub command: String,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandOutput {
    pub exit_code: Option<i64>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    /// Unix seconds the Sandbox use began and ended, for the meter (0 for no use).
    pub started_at: i64,
    pub ended_at: i64,
    /// The Sandbox was lost while the command ran: the command is answered with the loss
    /// (409 `sandbox_lost`) and not run again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox_lost: bool,
}

/// A command's reservation, closed with the use the command made (a start of 0: it never started).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleRequest {
    pub reservation_id: ReservationId,
    pub session_id: EditSessionId,
    pub started_at: i64,
    pub ended_at: i64,
}

/// The session's fork was made at `start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedRequest {
    pub session_id: EditSessionId,
    pub start: String,
}

/// The session ended, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndSession {
    pub session_id: EditSessionId,
    pub reason: String,
}

/// The fork a session works in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkSession {
    pub project_id: ProjectId,
    pub session_id: EditSessionId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reserved {
    Reserved(ReservationId),
    Refused(Refusal),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandReply {
    Done(CommandOutput),
    Refused(Refusal),
}

/// Edit-session records, on the `belay.db` queue.
pub struct EditStoreApi;

#[activity_definitions]
impl EditStoreApi {
    /// Reserves 480 s for one command.
    #[activity(name = "db.edit_reserve")]
    pub fn reserve(project_id: ProjectId) -> Result<Reserved, ActivityError> {
        unimplemented!()
    }

    /// Settles a command's reservation with its use and restarts the overdue clock.
    #[activity(name = "db.edit_settle")]
    pub fn settle(input: SettleRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.edit_forked")]
    pub fn forked(input: ForkedRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.edit_end")]
    pub fn end(input: EndSession) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Edit-session forks, on the `belay.git` queue.
pub struct EditGitApi;

#[activity_definitions]
impl EditGitApi {
    /// Forks canonical as `edit-<hex>`; returns its `main`.
    #[activity(name = "git.edit_fork")]
    pub fn fork(input: ForkSession) -> Result<String, ActivityError> {
        unimplemented!()
    }

    /// Deletes the session's fork.
    #[activity(name = "git.edit_delete")]
    pub fn delete(session_id: EditSessionId) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Edit-session commands, on the `belay.sandbox` queue.
pub struct EditSandboxApi;

#[activity_definitions]
impl EditSandboxApi {
    #[activity(name = "sandbox.edit_command")]
    pub fn command(input: EditCommand) -> Result<CommandOutput, ActivityError> {
        unimplemented!()
    }

    /// Kills the session's processes and removes its directory, if the Sandbox is awake.
    #[activity(name = "sandbox.edit_stop")]
    pub fn stop(input: EditCommand) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

pub mod edit_definitions {
    pub use super::edit_git_api::{Delete, Fork};
    pub use super::edit_sandbox_api::{Command, Stop};
    pub use super::edit_store_api::{End, Forked, Reserve, Settle};
}

#[workflow]
#[derive(Default)]
pub struct EditSessionWorkflow {
    input: Option<EditInput>,
    phase: String,
    busy: bool,
    handlers: u32,
    ended: bool,
    failure: Option<Refusal>,
}

#[workflow_methods]
impl EditSessionWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, input: EditInput) -> WorkflowResult<String> {
        ctx.state_mut(|s| {
            s.input = Some(input.clone());
            s.phase = "opening".into();
        });
        let forked = ctx
            .execute_activity(
                EditGitApi::fork,
                ForkSession {
                    project_id: input.project_id.clone(),
                    session_id: input.session_id.clone(),
                },
                options::git(Duration::from_secs(120)),
            )
            .await;
        match forked {
            Ok(start) => {
                ctx.execute_activity(
                    EditStoreApi::forked,
                    ForkedRequest {
                        session_id: input.session_id.clone(),
                        start,
                    },
                    options::db(),
                )
                .await?;
                ctx.state_mut(|s| s.phase = "open".into());
            }
            Err(e) => {
                ctx.state_mut(|s| s.failure = Some(Refusal::new(RefusalReason::SandboxUnavailable, e.to_string())));
                ctx.execute_activity(
                    EditStoreApi::end,
                    EndSession {
                        session_id: input.session_id.clone(),
                        reason: format!("the fork failed: {e}"),
                    },
                    options::db(),
                )
                .await?;
                ctx.state_mut(|s| s.ended = true);
            }
        }
        ctx.wait_condition(|s| s.ended && s.handlers == 0).await?;
        Ok(ctx.state(|s| s.phase.clone()))
    }

    async fn acquire(ctx: &mut WorkflowContext<Self>) -> Result<EditInput, Refusal> {
        ctx.wait_condition(|s| (s.phase == "open" || s.ended) && !s.busy)
            .await
            .map_err(|_| Refusal::new(RefusalReason::SessionEnded, "the session is ending"))?;
        if let Some(r) = ctx.state(|s| s.failure.clone()) {
            return Err(r);
        }
        if ctx.state(|s| s.ended) {
            return Err(Refusal::new(RefusalReason::SessionEnded, "the session has ended"));
        }
        ctx.state_mut(|s| s.busy = true);
        Ok(ctx.state(|s| s.input.clone()).expect("set at start"))
    }

    /// One command.
    #[update]
    pub async fn command(ctx: &mut WorkflowContext<Self>, command: String) -> CommandReply {
        ctx.state_mut(|s| s.handlers += 1);
        let reply = match Self::acquire(ctx).await {
            Ok(input) => {
                let r = Self::run_command(ctx, input, command).await;
                ctx.state_mut(|s| s.busy = false);
                r
            }
            Err(r) => Err(r),
        };
        ctx.state_mut(|s| s.handlers -= 1);
        match reply {
            Ok(out) => CommandReply::Done(out),
            Err(r) => CommandReply::Refused(r),
        }
    }

    async fn run_command(
        ctx: &mut WorkflowContext<Self>,
        input: EditInput,
        command: String,
    ) -> Result<CommandOutput, Refusal> {
        let infra = |e: &dyn std::fmt::Display| Refusal::new(RefusalReason::SandboxUnavailable, e.to_string());
        let reservation = match ctx
            .execute_activity(EditStoreApi::reserve, input.project_id.clone(), options::db())
            .await
            .map_err(|e| infra(&e))?
        {
            Reserved::Reserved(id) => id,
            Reserved::Refused(r) => return Err(r),
        };
        let before = now_secs(ctx);
        let out = ctx
            .execute_activity(
                EditSandboxApi::command,
                EditCommand {
                    project_id: input.project_id,
                    session_id: input.session_id.clone(),
                    uid: input.uid,
                    command,
                },
                options::sandbox(Duration::from_secs(420)),
            )
            .await;
        // A command whose activity failed still kept the Sandbox awake from its start: charged,
        // from the workflow's own clock (an activity that failed reports no times).
        let (start, end) = match &out {
            Ok(o) => (o.started_at, o.ended_at),
            Err(_) => (before, now_secs(ctx)),
        };
        ctx.execute_activity(
            EditStoreApi::settle,
            SettleRequest {
                reservation_id: reservation,
                session_id: input.session_id,
                started_at: start,
                ended_at: end,
            },
            options::db(),
        )
        .await
        .map_err(|e| infra(&e))?;
        let out = out.map_err(|e| infra(&error_chain(&e)))?;
        if out.sandbox_lost {
            return Err(Refusal::new(
                RefusalReason::SandboxLost,
                "the Sandbox was lost while the command ran; it was not run again. The next command starts in a fresh checkout of the session's fork: changes not pushed to it are gone",
            ));
        }
        Ok(out)
    }

    /// The session was ended elsewhere (the daily sweep ended it as overdue, and removed its
    /// processes, directory and fork): the workflow completes.
    #[signal]
    pub fn closed(&mut self, _ctx: &mut SyncWorkflowContext<Self>, reason: String) {
        self.ended = true;
        self.phase = "ended".into();
        self.failure = Some(Refusal::new(RefusalReason::SessionEnded, reason));
    }

    /// Ends the session: its processes are killed, its directory removed, its fork deleted.
    #[update]
    pub async fn end(ctx: &mut WorkflowContext<Self>, reason: String) -> CommandReply {
        ctx.state_mut(|s| s.handlers += 1);
        let reply = match Self::acquire(ctx).await {
            Ok(input) => {
                let stop = EditCommand {
                    project_id: input.project_id.clone(),
                    session_id: input.session_id.clone(),
                    uid: input.uid,
                    command: String::new(),
                };
                let stopped = ctx
                    .execute_activity(EditSandboxApi::stop, stop, options::sandbox(Duration::from_secs(120)))
                    .await;
                // The fork goes even when the Sandbox could not be reached; a fork whose delete
                // failed is left to the daily sweep.
                let _ = ctx
                    .execute_activity(
                        EditGitApi::delete,
                        input.session_id.clone(),
                        options::git(Duration::from_secs(120)),
                    )
                    .await;
                let ended = ctx
                    .execute_activity(
                        EditStoreApi::end,
                        EndSession {
                            session_id: input.session_id,
                            reason,
                        },
                        options::db(),
                    )
                    .await;
                ctx.state_mut(|s| {
                    s.busy = false;
                    s.ended = true;
                    s.phase = "ended".into();
                });
                match (stopped, ended) {
                    (_, Err(e)) => Err(Refusal::new(RefusalReason::SandboxUnavailable, e.to_string())),
                    _ => Ok(CommandOutput {
                        exit_code: None,
                        stdout: String::new(),
                        stderr: String::new(),
                        timed_out: false,
                        started_at: 0,
                        ended_at: 0,
                        sandbox_lost: false,
                    }),
                }
            }
            Err(r) => Err(r),
        };
        ctx.state_mut(|s| s.handlers -= 1);
        match reply {
            Ok(out) => CommandReply::Done(out),
            Err(r) => CommandReply::Refused(r),
        }
    }
}

/// An error and its causes, each once: an activity's failure says only that the activity failed,
/// its cause says why (`no Sandbox available: 4 of 4 are live`).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    parts.join(": ")
}

/// The workflow's clock in unix seconds (deterministic: it comes from the history).
fn now_secs(ctx: &WorkflowContext<EditSessionWorkflow>) -> i64 {
    ctx.workflow_time()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64)
}
