//! The activities behind WorkspaceWorkflow: admission and records (`belay.db`), the workspace
//! fork and the ChangeSet patch (`belay.git`), and the checkout, tools and push in the project's
//! Sandbox (`belay.sandbox`).
//!
//! In the Sandbox every git access goes over smart HTTP with a repository token that is revoked
//! right after the command that used it; the Sandbox never sees a bare repository on disk.

use crate::revocations::StoreRevocations;
use crate::{Plain, fatal, git_error, heartbeating, now_secs, retryable, sandbox_error, source_error, store_error};
use belay_domain::ValidationError;
use belay_domain::change::ChangeSetInput;
use belay_domain::ids::{ChangeId, ChangeSetId, ProjectId, TaskRunId};
use belay_domain::meter::close_of;
use belay_domain::refusal::{Refusal, RefusalReason};
use belay_domain::repo::{canonical_repo, workspace_fork};
use belay_domain::workspace::{MAX_FILE_BYTES, TOOL_TIMEOUT_SECS, ToolCall, apply_edit, check_package_script};
use belay_git::source_objects::SourceObjects;
use belay_git::{GitService, StackedFork};
use belay_sandbox::git::{Checkout, GitInSandboxError, Pushed as InSandbox, SandboxGit};
use belay_sandbox::{SandboxError, SandboxUser, Sandboxes, run_dir};
use belay_store::workspaces::Admission;
use belay_store::{Store, StoreError};
use belay_workflows::workspace::{
    Admit, Admitted, CheckedOut, CheckoutRequest, EndRequest, FinishRequest, ForkRequest, Forked, OpenedRequest,
    PatchRequest, PushRequest, Pushed, RecordRequest, RemoveRequest, ToolOutcome, ToolOutput, ToolRequest,
};
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// Admission and records, on the `belay.db` pool.
pub struct WorkspaceStoreActivities {
    pub store: Store,
}

#[activities]
impl WorkspaceStoreActivities {
    #[activity(definition = belay_workflows::workspace::workspace_definitions::Admit)]
    #[instrument(skip_all, fields(run.id = %run_id), err(Debug))]
    pub async fn admit(self: Arc<Self>, _ctx: ActivityContext, run_id: TaskRunId) -> Result<Admit, ActivityError> {
        let refuse = |reason: RefusalReason, message: String| Ok(Admit::Refused(Refusal::new(reason, message)));
        let Some(plan) = self.store.workspace_plan(&run_id).await.map_err(store_error)? else {
            return refuse(RefusalReason::NotFound, format!("task run {run_id} not found"));
        };
        if plan.run_status != "running" {
            return refuse(
                RefusalReason::WorkspaceClosed,
                format!("task run {run_id} has ended ({})", plan.run_status),
            );
        }
        if !plan.task_kind.opens_workspace() {
            return refuse(
                RefusalReason::InvalidField,
                "task kind: only implement, migrate and test tasks open a workspace".into(),
            );
        }
        if plan.base_commit.is_none() {
            return refuse(
                RefusalReason::ProjectNotReady,
                format!("project {} is not provisioned", plan.project_id),
            );
        }
        if !plan.unpublished.is_empty() {
            return refuse(
                RefusalReason::StackUnpublished,
                format!(
                    "the tasks this one depends on have no ChangeSet yet: {}",
                    plan.unpublished.join(", ")
                ),
            );
        }
        let row = match self
            .store
            .admit_workspace(
                &run_id,
                &ChangeId::from(plan.change_id.as_str()),
                &ProjectId::from(plan.project_id.as_str()),
                now_secs(),
            )
            .await
            .map_err(store_error)?
        {
            Admission::Admitted(row) => row,
            Admission::Refused { open } => {
                return refuse(
                    RefusalReason::WorkspaceCap,
                    format!(
                        "change {} already has {open} open workspaces (at most 4)",
                        plan.change_id
                    ),
                );
            }
            Admission::CapRefused(cap) => return refuse(RefusalReason::SandboxCap, cap.to_string()),
        };
        if row.status != "open" {
            return refuse(
                RefusalReason::WorkspaceClosed,
                format!("the workspace of {run_id} has ended"),
            );
        }
        let reservation_id = row.reservation_id.ok_or_else(|| {
            fatal(StoreError::Corrupt(format!(
                "workspace {run_id} was admitted without a reservation"
            )))
        })?;
        let stacked = plan
            .stacked
            .iter()
            .map(|s| {
                Ok(belay_domain::repo::Tip {
                    label: s.task_key.clone(),
                    fork: workspace_fork(&s.run_id).map_err(fatal)?,
                    commit: s.commit.clone(),
                })
            })
            .collect::<Result<Vec<_>, ActivityError>>()?;
        Ok(Admit::Admitted(Admitted {
            project_id: plan.project_id.into(),
            change_id: plan.change_id.into(),
            stacked,
            policy: plan.policy,
            reservation_id: reservation_id.into(),
        }))
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Opened)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn opened(self: Arc<Self>, _ctx: ActivityContext, input: OpenedRequest) -> Result<(), ActivityError> {
        let OpenedRequest { run_id, base, start } = input;
        let row = self
            .store
            .get_workspace(&run_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(StoreError::not_found("workspace", run_id.as_str())))?;
        self.store
            .workspace_opened(
                &run_id,
                &base,
                &start,
                row.reservation_id.as_deref().unwrap_or_default(),
            )
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Record)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn record(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: RecordRequest,
    ) -> Result<ChangeSetId, ActivityError> {
        let cs = self
            .store
            .insert_published_change_set(
                &input.run_id,
                &ChangeSetInput {
                    commit: input.commit,
                    contract_changes: input.contract_changes,
                    data_changes: input.data_changes,
                },
            )
            .await
            .map_err(store_error)?;
        Ok(cs.id)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Finish)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn finish(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: FinishRequest,
    ) -> Result<serde_json::Value, ActivityError> {
        let cs = self
            .store
            .finish_publish(&input.run_id, &input.patch_ref)
            .await
            .map_err(store_error)?;
        serde_json::to_value(cs).map_err(fatal)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::End)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn end(self: Arc<Self>, _ctx: ActivityContext, input: EndRequest) -> Result<(), ActivityError> {
        let row = self.store.get_workspace(&input.run_id).await.map_err(store_error)?;
        if let Some(reservation) = row.as_ref().and_then(|r| r.reservation_id.clone()) {
            self.store
                .close_sandbox(&reservation, close_of(input.opened_at, now_secs()))
                .await
                .map_err(store_error)?;
        }
        if let Some(error) = &input.error {
            self.store
                .fail_workspace(&input.run_id, error)
                .await
                .map_err(store_error)?;
        }
        Ok(())
    }
}

/// The workspace fork and ChangeSet patches, on the `belay.git` pool.
pub struct WorkspaceGitActivities {
    pub git: GitService,
    pub sources: SourceObjects,
}

#[activities]
impl WorkspaceGitActivities {
    #[activity(definition = belay_workflows::workspace::workspace_definitions::Fork)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn fork(self: Arc<Self>, _ctx: ActivityContext, input: ForkRequest) -> Result<Forked, ActivityError> {
        let canonical = canonical_repo(&input.project_id).map_err(fatal)?;
        let fork = workspace_fork(&input.run_id).map_err(fatal)?;
        let tips = &input.stacked;
        Ok(
            match self
                .git
                .fork_stacked(&canonical, &fork, tips)
                .await
                .map_err(git_error)?
            {
                StackedFork::Ready { base, start, .. } => Forked::Ready { fork, base, start },
                StackedFork::Conflict { label, paths } => Forked::Conflict { label, paths },
            },
        )
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Patch)]
    #[instrument(skip_all, fields(change_set.id = %input.change_set_id), err(Debug))]
    pub async fn patch(self: Arc<Self>, _ctx: ActivityContext, input: PatchRequest) -> Result<String, ActivityError> {
        let diff = self
            .git
            .unified_diff(&input.fork, &input.start, &input.commit)
            .await
            .map_err(git_error)?;
        let stored = self
            .sources
            .put_change_set_patch(&input.project_id, &input.change_set_id, &diff)
            .await
            .map_err(source_error)?;
        Ok(stored.key)
    }
}

/// The answer to a command an earlier attempt of the same activity started: its worker was lost,
/// so the command may have run, and it is not run again.
fn not_run_again() -> ToolOutcome {
    ToolOutcome::Refused(Refusal::new(
        RefusalReason::SandboxLost,
        "an earlier attempt started this command and its worker was lost; it was not run again",
    ))
}

/// The checkout, tools and push, on the `belay.sandbox` pool.
pub struct WorkspaceSandboxActivities {
    pub sandboxes: Arc<Sandboxes>,
    /// Where a command's start is recorded before it runs.
    pub store: Store,
    pub revocations: StoreRevocations,
    pub git: SandboxGit,
}

fn tool_refused(e: ValidationError) -> ToolOutcome {
    ToolOutcome::Refused(Refusal::new(RefusalReason::InvalidField, e.to_string()))
}

/// Whether an error means the workspace's Sandbox or directory is gone.
fn is_lost(e: &SandboxError) -> bool {
    matches!(e, SandboxError::Lost { .. } | SandboxError::MissingDirectory(_))
}

pub(crate) fn git_in_sandbox_error(e: GitInSandboxError) -> ActivityError {
    match e {
        GitInSandboxError::Sandbox(e) => sandbox_error(e),
        GitInSandboxError::Token(e) => fatal(e),
    }
}

impl WorkspaceSandboxActivities {
    /// A UTF-8 text file of the workspace, or why not.
    async fn read_text(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        path: &str,
    ) -> Result<Result<String, ValidationError>, SandboxError> {
        Ok(
            match self
                .sandboxes
                .read_file(project, dir, user, path, MAX_FILE_BYTES)
                .await?
            {
                Ok(bytes) => String::from_utf8(bytes)
                    .map_err(|_| ValidationError::new("path", format!("{path} is not UTF-8 text"))),
                Err(why) => Err(ValidationError::new("path", why)),
            },
        )
    }

    /// Runs one tool as the workspace's own user.
    async fn run_tool(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        request: &ToolRequest,
    ) -> Result<ToolOutcome, SandboxError> {
        let mut out = ToolOutput {
            tool: request.call.name().to_owned(),
            content: None,
            exit_code: None,
            stdout: None,
            stderr: None,
            timed_out: None,
            discarded: None,
            restored: false,
            edits_lost: false,
        };
        match &request.call {
            ToolCall::ReadFile { path } => match self.read_text(project, dir, user, path).await? {
                Ok(text) => out.content = Some(text),
                Err(why) => return Ok(tool_refused(why)),
            },
            ToolCall::WriteFile { path, content } => {
                if let Err(why) = self
                    .sandboxes
                    .write_file(project, dir, user, path, content.as_bytes())
                    .await?
                {
                    return Ok(tool_refused(ValidationError::new("path", why)));
                }
            }
            ToolCall::EditFile {
                path,
                old_text,
                new_text,
            } => {
                let text = match self.read_text(project, dir, user, path).await? {
                    Ok(t) => t,
                    Err(why) => return Ok(tool_refused(why)),
                };
                let edited = match apply_edit(path, &text, old_text, new_text) {
                    Ok(e) => e,
                    Err(why) => return Ok(tool_refused(why)),
                };
                if let Err(why) = self
                    .sandboxes
                    .write_file(project, dir, user, path, edited.as_bytes())
                    .await?
                {
                    return Ok(tool_refused(ValidationError::new("path", why)));
                }
            }
            ToolCall::RunCommand { argv } => {
                if let Some(script) = &request.allowed.script {
                    let package = self
                        .sandboxes
                        .read_file(project, dir, user, "package.json", MAX_FILE_BYTES)
                        .await?
                        .ok();
                    if let Err(why) = check_package_script(package.as_deref(), script) {
                        return Ok(tool_refused(why));
                    }
                }
                let timeout = Duration::from_secs(TOOL_TIMEOUT_SECS);
                let ran = if request.allowed.build {
                    self.sandboxes
                        .run_discarding_writes(project, dir, user, argv, timeout)
                        .await
                        .map(|(exec, discarded)| (exec, Some(discarded)))
                } else {
                    self.sandboxes
                        .exec(project, dir, argv, user, timeout)
                        .await
                        .map(|exec| (exec, None))
                };
                let exec = match ran {
                    Ok((exec, discarded)) => {
                        out.discarded = discarded;
                        exec
                    }
                    // Lost once the command was handed to the Sandbox: answered as lost, never
                    // run again behind the caller's back. The next call restores the workspace.
                    Err(SandboxError::Lost { reason, .. }) => {
                        return Ok(ToolOutcome::Refused(Refusal::new(
                            RefusalReason::SandboxLost,
                            format!(
                                "the Sandbox was lost while the command ran ({reason}); it was not run again. The next call restores the workspace from its fork"
                            ),
                        )));
                    }
                    Err(e) => return Err(e),
                };
                out.exit_code = exec.exit_code;
                out.stdout = Some(exec.stdout);
                out.stderr = Some(exec.stderr);
                out.timed_out = Some(exec.timed_out);
            }
        }
        Ok(ToolOutcome::Done(out))
    }
}

#[activities]
impl WorkspaceSandboxActivities {
    #[activity(definition = belay_workflows::workspace::workspace_definitions::Checkout)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn checkout(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: CheckoutRequest,
    ) -> Result<CheckedOut, ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        let project = input.project_id.as_str();
        let work = async {
            self.sandboxes.ensure(project).await.map_err(sandbox_error)?;
            // A restore starts from nothing: whatever a lost or half-done checkout left goes. The
            // workspace gets a user of its own: its directory is readable by its commands alone,
            // and they cannot read an edit session's or another workspace's.
            let user = self
                .sandboxes
                .fresh_private_dir(project, &dir)
                .await
                .map_err(sandbox_error)?;
            let head = match self
                .git
                .clone_repo(
                    &self.sandboxes,
                    &self.revocations,
                    Checkout {
                        project,
                        dir: &dir,
                        repo: &input.fork,
                    },
                    user,
                )
                .await
                .map_err(git_in_sandbox_error)?
            {
                Ok(head) => head,
                Err(why) => return Err(retryable(Plain(why))),
            };
            if head != input.start {
                return Ok(CheckedOut::Failed {
                    reason: format!(
                        "the restored workspace is at {head}, not at its recorded start commit {}",
                        input.start
                    ),
                });
            }
            let has_package_json = self
                .sandboxes
                .sh(
                    project,
                    &dir,
                    user,
                    "test -f package.json",
                    &[],
                    Duration::from_secs(30),
                )
                .await
                .map_err(sandbox_error)?
                .success();
            if let Some(install) = input.policy.install_argv(has_package_json) {
                let out = self
                    .sandboxes
                    .exec(project, &dir, &install, user, Duration::from_secs(TOOL_TIMEOUT_SECS))
                    .await
                    .map_err(sandbox_error)?;
                if !out.success() {
                    return Ok(CheckedOut::Failed {
                        reason: format!(
                            "the install command `{}` failed ({}{}): {}",
                            install.join(" "),
                            belay_domain::check::exit_words(out.exit_code),
                            if out.timed_out { ", timed out" } else { "" },
                            out.stderr.trim()
                        ),
                    });
                }
            }
            Ok(CheckedOut::Ready { opened_at: now_secs() })
        };
        heartbeating(&ctx, work).await
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Tool)]
    #[instrument(skip_all, fields(run.id = %input.run_id, tool = input.call.name()), err(Debug))]
    pub async fn tool(self: Arc<Self>, ctx: ActivityContext, input: ToolRequest) -> Result<ToolOutcome, ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        let project = input.project_id.as_str();
        let command = matches!(input.call, ToolCall::RunCommand { .. });
        // An earlier attempt handed this command to the Sandbox and its worker was lost.
        if command && crate::earlier_attempt_started(&ctx) {
            return Ok(not_run_again());
        }
        let started = std::sync::atomic::AtomicBool::new(false);
        let work = async {
            let user = match self.sandboxes.checkout_owner(project, &dir).await {
                Ok(Some(user)) => user,
                Ok(None) => return Ok(ToolOutcome::Lost),
                Err(e) if is_lost(&e) => return Ok(ToolOutcome::Lost),
                Err(e) => return Err(sandbox_error(e)),
            };
            let mut dying = false;
            if command {
                // The start is a fact before the command is handed over: a retry of this
                // activity after its worker was lost, however soon, finds it and answers the loss
                // instead of running the command a second time.
                if !self
                    .store
                    .record_command_start(
                        &crate::activity_identity(&ctx),
                        &ProjectId::from(project),
                        belay_store::now_ms(),
                    )
                    .await
                    .map_err(store_error)?
                {
                    return Ok(not_run_again());
                }
                dying = crate::failpoint(crate::COMMAND_STARTED);
                if !dying {
                    crate::mark_started(&ctx, &started).await;
                }
            }
            let ran = self.run_tool(project, &dir, user, &input).await;
            if dying {
                crate::die_at(crate::COMMAND_STARTED);
            }
            match ran {
                Ok(outcome) => Ok(outcome),
                Err(e) if is_lost(&e) => Ok(ToolOutcome::Lost),
                Err(e) => Err(sandbox_error(e)),
            }
        };
        crate::heartbeating_started(&ctx, &started, work).await
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Push)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn push(self: Arc<Self>, ctx: ActivityContext, input: PushRequest) -> Result<Pushed, ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        let project = input.project_id.as_str();
        let work = async {
            let user = match self.sandboxes.checkout_owner(project, &dir).await {
                Ok(Some(user)) => user,
                Ok(None) => return Ok(Pushed::Lost),
                Err(e) if is_lost(&e) => return Ok(Pushed::Lost),
                Err(e) => return Err(sandbox_error(e)),
            };
            match self
                .git
                .commit_and_push(
                    &self.sandboxes,
                    &self.revocations,
                    Checkout {
                        project,
                        dir: &dir,
                        repo: &input.fork,
                    },
                    user,
                    &input.message,
                    &input.start,
                )
                .await
            {
                Ok(InSandbox::Nothing) => Ok(Pushed::Nothing),
                Ok(InSandbox::Commit(commit)) => Ok(Pushed::Commit(commit)),
                Ok(InSandbox::Failed(why)) => Err(retryable(Plain(why))),
                Err(GitInSandboxError::Sandbox(e)) if is_lost(&e) => Ok(Pushed::Lost),
                Err(e) => Err(git_in_sandbox_error(e)),
            }
        };
        heartbeating(&ctx, work).await
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Remove)]
    #[instrument(skip_all, fields(project.id = %input.project_id, run.id = %input.run_id), err(Debug))]
    pub async fn remove(self: Arc<Self>, _ctx: ActivityContext, input: RemoveRequest) -> Result<(), ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        // Nothing to remove when the Sandbox is gone: its disk went with it.
        match self.sandboxes.remove_dir(&input.project_id, &dir).await {
            Ok(()) => Ok(()),
            Err(e) if is_lost(&e) => Ok(()),
            Err(e) => Err(sandbox_error(e)),
        }
    }
}
