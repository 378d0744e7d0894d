//! SandboxActivities: the project's Sandbox (a Docker container per project), for every workflow
//! that runs something in one: a workspace's checkout, tools and push, an edit session's commands,
//! a Candidate's checkout, build and checks. All on `belay.sandbox`.
//!
//! In the Sandbox every git access goes over smart HTTP with a repository token that is revoked
//! right after the command that used it; the Sandbox never sees a bare repository on disk.

use crate::edit_session::command_not_run_again;
use crate::revocations::StoreRevocations;
use crate::verification::{evidence_key, output, put_object};
use crate::workspace::tool_not_run_again;
use crate::workspace::{git_in_sandbox_error, is_lost};
use crate::{
    Plain, earlier_attempt_started, fatal, heartbeating, heartbeating_started, now_secs, retryable, sandbox_error,
    store_error,
};
use belay_domain::evidence::Evidence;
use belay_domain::ids::{CandidateId, ProjectId};
use belay_domain::repo::candidate_fork;
use belay_domain::workspace::{TOOL_TIMEOUT_SECS, ToolCall};
use belay_sandbox::Sandboxes;
use belay_sandbox::git::SandboxGit;
use belay_sandbox::git::{Checkout, GitInSandboxError, Pushed as InSandbox};
use belay_sandbox::{SandboxUser, candidate_dir, run_dir};
use belay_store::Store;
use belay_store::candidates::NewEvidence;
use belay_store::now_ms;
use belay_workflows::edit_session::{CommandOutput, EditCommand};
use belay_workflows::verification::{BuildRequest, Built, CheckRequest};
use belay_workflows::workspace::{CheckedOut, PushRequest, Pushed, RemoveRequest, ToolOutcome, ToolRequest};
use object_store::ObjectStore;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// The Sandbox's activities: the containers, and what a command there is recorded with.
pub struct SandboxActivities {
    pub sandboxes: Arc<Sandboxes>,
    /// Where a command's start is recorded before it runs, and a check's Evidence.
    pub store: Store,
    /// Where a check's Evidence objects are written.
    pub objects: Arc<dyn ObjectStore>,
    pub revocations: StoreRevocations,
    pub git: SandboxGit,
    /// The Candidate checkouts this worker has found in a Sandbox container, `(container id,
    /// dir)`: a check in one skips the presence test (an exec); a failed check forgets it, so
    /// its retry tests again. A recreated Sandbox is another container.
    pub checkouts: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
}

#[activities]
impl SandboxActivities {
    // WorkspaceWorkflow: the checkout, tools and push.

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Checkout)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn workspace_checkout(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: belay_workflows::workspace::CheckoutRequest,
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
            return Ok(tool_not_run_again());
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
                    return Ok(tool_not_run_again());
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

    // EditSessionWorkflow: the session's commands, as its own user.

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Command)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn command(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: EditCommand,
    ) -> Result<CommandOutput, ActivityError> {
        // An earlier attempt handed the command to the Sandbox and its worker was lost (the
        // server retried after the heartbeat timeout): answered as lost, never run a second time.
        if earlier_attempt_started(&ctx) {
            return Ok(command_not_run_again(now_secs()));
        }
        // A command may take its whole 120 s: heartbeat, so the 20 s heartbeat timeout never
        // fails (and retries) a command that is still running. The details say whether the
        // command was handed to the Sandbox.
        let started = AtomicBool::new(false);
        heartbeating_started(&ctx, &started, self.command_inner(input, &ctx, &started)).await
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Stop)]
    #[instrument(skip_all, fields(project.id = %input.project_id, session.id = %input.session_id), err(Debug))]
    pub async fn stop(self: Arc<Self>, ctx: ActivityContext, input: EditCommand) -> Result<(), ActivityError> {
        heartbeating(&ctx, self.stop_inner(input)).await
    }

    // CandidateVerificationWorkflow: the checkout, the composition build and the checks.

    #[activity(definition = belay_workflows::verification::verify_definitions::Checkout)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn verify_checkout(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: belay_workflows::verification::CheckoutRequest,
    ) -> Result<(), ActivityError> {
        heartbeating(&ctx, async {
            let head = self
                .clone_fork(input.project_id.as_str(), input.candidate_id.as_str())
                .await?;
            if head != input.commit {
                return Err(retryable(Plain(format!(
                    "the Candidate fork's main is {head}, not the composed {}",
                    input.commit
                ))));
            }
            Ok(())
        })
        .await
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Build)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn build(self: Arc<Self>, ctx: ActivityContext, input: BuildRequest) -> Result<Built, ActivityError> {
        heartbeating(&ctx, async {
            let project = input.project_id.as_str();
            let candidate = input.candidate_id.as_str();
            // A retry starts from the merged commit again, not from a half-built tree.
            let dir = candidate_dir(candidate).map_err(fatal)?;
            if !self
                .sandboxes
                .checkout_present(project, &dir)
                .await
                .map_err(sandbox_error)?
            {
                self.clone_fork(project, candidate).await?;
            }
            let reset = self
                .sh(
                    project,
                    &dir,
                    r#"git reset -q --hard "$1" && git clean -fdxq"#,
                    &[&input.commit],
                    Duration::from_secs(60),
                )
                .await?;
            if !reset.success() {
                // The fork's main may already be the build commit (a retry after the push).
                self.clone_fork(project, candidate).await?;
            }
            let started_at = now_ms();
            for command in [&input.commands.install, &input.commands.build] {
                let ran = self.run(project, &dir, command, Duration::from_secs(180)).await?;
                if !ran.out.success() {
                    return Ok(Built::Failed {
                        command: command.clone(),
                        exit_code: ran.out.exit_code,
                        output_tail: output(&ran.out),
                        started_at,
                        completed_at: now_ms(),
                    });
                }
            }
            let fork = candidate_fork(candidate).map_err(fatal)?;
            let pushed = self
                .git
                .commit_and_push(
                    &self.sandboxes,
                    &self.revocations,
                    Checkout {
                        project,
                        dir: &dir,
                        repo: &fork,
                    },
                    SandboxUser::Root,
                    &format!("Build {candidate}"),
                    &input.commit,
                )
                .await
                .map_err(git_in_sandbox_error)?;
            match pushed {
                InSandbox::Nothing => Ok(Built::Passed { commit: None }),
                InSandbox::Commit(c) => Ok(Built::Passed { commit: Some(c) }),
                InSandbox::Failed(why) => Err(retryable(Plain(why))),
            }
        })
        .await
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Check)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, check.id = %input.check.check_id), err(Debug))]
    pub async fn check(self: Arc<Self>, ctx: ActivityContext, input: CheckRequest) -> Result<Evidence, ActivityError> {
        let candidate = input.candidate_id.to_string();
        if let Some(row) = self
            .store
            .evidence_of(
                &CandidateId::from(candidate.as_str()),
                &input.check.check_id,
                input.attempt,
            )
            .await
            .map_err(store_error)?
        {
            return Ok(row.evidence);
        }
        heartbeating(&ctx, async {
            let project = input.project_id.as_str();
            let dir = self.ensure_checkout(project, &candidate).await?;
            let started_at = now_ms();
            let (result, mut detail) = self
                .run_check(&input, &dir)
                .await
                .inspect_err(|_| self.forget_checkout(&dir))?;
            let completed_at = now_ms();
            let key = evidence_key(&candidate, &input.check.check_id, input.attempt);
            if let Some(o) = detail.as_object_mut() {
                o.insert("result".into(), serde_json::to_value(&result).map_err(fatal)?);
            }
            put_object(self.objects.as_ref(), &key, &detail).await?;
            let row = self
                .store
                .record_evidence(&NewEvidence {
                    candidate_id: candidate.clone(),
                    check_id: input.check.check_id.clone(),
                    attempt: input.attempt,
                    result,
                    object_key: Some(key),
                    started_at,
                    completed_at,
                })
                .await
                .map_err(store_error)?;
            Ok(row.evidence)
        })
        .await
    }
}
