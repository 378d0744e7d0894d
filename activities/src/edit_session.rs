//! The activities behind EditSessionWorkflow: the meter (`belay.db`), the session fork
//! (`belay.git`), and the commands in the project's Sandbox (`belay.sandbox`), run as the
//! session's own unprivileged user so that killing every process of that user after each
//! command leaves nothing running.

use crate::revocations::StoreRevocations;
use crate::{
    COMMAND_STARTED, Plain, activity_identity, die_at, earlier_attempt_started, failpoint, fatal, git_error,
    heartbeating, heartbeating_started, mark_started, now_secs, retryable, sandbox_error, store_error,
};
use belay_domain::edit_session::COMMAND_TIMEOUT_SECS;
use belay_domain::ids::{EditSessionId, ProjectId};
use belay_domain::meter::{Reservation, close_of};
use belay_domain::refusal::{Refusal, RefusalReason};
use belay_domain::repo::{canonical_repo, edit_fork};
use belay_git::{GitError, GitService};
use belay_sandbox::git::{Checkout, GitInSandboxError, SandboxGit};
use belay_sandbox::{SandboxError, SandboxUser, Sandboxes, WORKSPACE, container_name, edit_dir};
use belay_store::Store;
use belay_store::meter::Reserve;
use belay_workflows::edit_session::{
    CommandOutput, EditCommand, EndSession, ForkSession, ForkedRequest, Reserved, SettleRequest,
};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// The answer to a command an earlier attempt of the same activity started: its worker was lost,
/// so the command may have run, and it is not run again.
fn not_run_again(at: i64) -> CommandOutput {
    CommandOutput {
        exit_code: None,
        stdout: String::new(),
        stderr: "an earlier attempt started this command and its worker was lost; it was not run again".to_owned(),
        timed_out: false,
        started_at: at,
        ended_at: at,
        sandbox_lost: true,
    }
}

/// The `edit_<hex>` session's directory.
fn session_dir(session_id: &str) -> Result<String, ActivityError> {
    edit_dir(session_id.strip_prefix("edit_").unwrap_or(session_id)).map_err(fatal)
}

pub struct EditStoreActivities {
    pub store: Store,
}

#[activities]
impl EditStoreActivities {
    #[activity(definition = belay_workflows::edit_session::edit_definitions::Reserve)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn reserve(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<Reserved, ActivityError> {
        match self
            .store
            .reserve_sandbox(&project_id, Reservation::EditSessionCommand, now_secs())
            .await
            .map_err(store_error)?
        {
            Reserve::Reserved { id, .. } => Ok(Reserved::Reserved(id.into())),
            Reserve::Refused(cap) => Ok(Reserved::Refused(Refusal::new(
                RefusalReason::SandboxCap,
                cap.to_string(),
            ))),
        }
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Settle)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn settle(self: Arc<Self>, _ctx: ActivityContext, input: SettleRequest) -> Result<(), ActivityError> {
        // A start of 0 is a command that never started (histories recorded before a failed
        // command was charged carry it too).
        let started = (input.started_at > 0).then_some(input.started_at);
        self.store
            .close_sandbox(&input.reservation_id, close_of(started, input.ended_at))
            .await
            .map_err(store_error)?;
        self.store
            .touch_edit_session(&input.session_id)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Forked)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn forked(self: Arc<Self>, _ctx: ActivityContext, input: ForkedRequest) -> Result<(), ActivityError> {
        self.store
            .edit_session_forked(&input.session_id, &input.start)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::End)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn end(self: Arc<Self>, _ctx: ActivityContext, input: EndSession) -> Result<(), ActivityError> {
        self.store
            .end_edit_session(&input.session_id, &input.reason)
            .await
            .map_err(store_error)
            .map(|_| ())
    }
}

pub struct EditGitActivities {
    pub git: GitService,
}

#[activities]
impl EditGitActivities {
    #[activity(definition = belay_workflows::edit_session::edit_definitions::Fork)]
    #[instrument(skip_all, fields(project.id = %input.project_id, session.id = %input.session_id), err(Debug))]
    pub async fn fork(self: Arc<Self>, _ctx: ActivityContext, input: ForkSession) -> Result<String, ActivityError> {
        let canonical = canonical_repo(&input.project_id).map_err(fatal)?;
        let fork = edit_fork(&input.session_id).map_err(fatal)?;
        match self.git.fork(&canonical, &fork).await {
            Ok(info) => Ok(info.main),
            // A retry after the fork was made: it stands.
            Err(GitError::AlreadyExists { main, .. }) => Ok(main),
            Err(e) => Err(git_error(e)),
        }
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Delete)]
    #[instrument(skip_all, fields(session.id = %session_id), err(Debug))]
    pub async fn delete(
        self: Arc<Self>,
        _ctx: ActivityContext,
        session_id: EditSessionId,
    ) -> Result<(), ActivityError> {
        let fork = edit_fork(&session_id).map_err(fatal)?;
        self.git.delete_repo(&fork).await.map_err(git_error).map(|_| ())
    }
}

pub struct EditSandboxActivities {
    pub sandboxes: Arc<Sandboxes>,
    /// Where a command's start is recorded before it runs.
    pub store: Store,
    pub revocations: StoreRevocations,
    pub git: SandboxGit,
}

#[activities]
impl EditSandboxActivities {
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
            return Ok(not_run_again(now_secs()));
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
}

impl EditSandboxActivities {
    async fn command_inner(
        &self,
        input: EditCommand,
        ctx: &ActivityContext,
        started: &AtomicBool,
    ) -> Result<CommandOutput, ActivityError> {
        let dir = session_dir(&input.session_id)?;
        let project = input.project_id.as_str();
        let user = SandboxUser::Unprivileged(input.uid);
        let started_at = now_secs();
        let present = self
            .sandboxes
            .checkout_present(project, &dir)
            .await
            .map_err(sandbox_error)?;
        if !present {
            // The first command (or the first after the Sandbox slept): a fresh checkout of the
            // session's fork, owned by the session's user.
            self.sandboxes
                .fresh_dir(project, &dir, user)
                .await
                .map_err(sandbox_error)?;
            let fork = edit_fork(&input.session_id).map_err(fatal)?;
            if let Err(why) = self
                .git
                .clone_repo(
                    &self.sandboxes,
                    &self.revocations,
                    Checkout {
                        project,
                        dir: &dir,
                        repo: &fork,
                    },
                    user,
                )
                .await
                .map_err(|e| match e {
                    GitInSandboxError::Sandbox(e) => sandbox_error(e),
                    GitInSandboxError::Token(e) => fatal(e),
                })?
            {
                return Err(retryable(Plain(why)));
            }
        }
        // The start is a fact before the command is handed over: a retry of this activity after
        // its worker was lost, however soon, finds it and answers the loss instead of running
        // the command a second time.
        if !self
            .store
            .record_command_start(
                &activity_identity(ctx),
                &ProjectId::from(project),
                belay_store::now_ms(),
            )
            .await
            .map_err(store_error)?
        {
            return Ok(not_run_again(started_at));
        }
        let dying = failpoint(COMMAND_STARTED);
        if !dying {
            mark_started(ctx, started).await;
        }
        let ran = self
            .sandboxes
            .exec(
                project,
                &dir,
                &["sh".into(), "-c".into(), input.command.clone()],
                user,
                Duration::from_secs(COMMAND_TIMEOUT_SECS),
            )
            .await;
        if dying {
            die_at(COMMAND_STARTED);
        }
        let out = match ran {
            Ok(out) => out,
            // Lost once the command was handed to the Sandbox: answered as lost, never retried
            // (a retry would run the command a second time, from the start, in a fresh Sandbox).
            Err(SandboxError::Lost { reason, .. }) => {
                return Ok(CommandOutput {
                    exit_code: None,
                    stdout: String::new(),
                    stderr: reason,
                    timed_out: false,
                    started_at,
                    ended_at: now_secs(),
                    sandbox_lost: true,
                });
            }
            Err(e) => return Err(sandbox_error(e)),
        };
        Ok(CommandOutput {
            exit_code: out.exit_code,
            stdout: out.stdout,
            stderr: out.stderr,
            timed_out: out.timed_out,
            started_at,
            ended_at: now_secs(),
            sandbox_lost: false,
        })
    }

    async fn stop_inner(&self, input: EditCommand) -> Result<(), ActivityError> {
        let dir = session_dir(&input.session_id)?;
        let name = container_name(&input.project_id).map_err(fatal)?;
        let live = self.sandboxes.list_live().await.map_err(sandbox_error)?;
        let awake = live
            .iter()
            .any(|c| c.names.iter().flatten().any(|n| n.trim_start_matches('/') == name));
        if !awake {
            // Asleep: its processes and its disk are gone already, and ending wakes nothing.
            return Ok(());
        }
        // A no-op as the session's user: the after-command kill stops every process of that user.
        let killed = self
            .sandboxes
            .exec(
                &input.project_id,
                WORKSPACE,
                &["true".into()],
                SandboxUser::Unprivileged(input.uid),
                Duration::from_secs(10),
            )
            .await;
        match killed {
            Ok(_) | Err(SandboxError::Lost { .. }) => {}
            Err(e) => return Err(sandbox_error(e)),
        }
        match self.sandboxes.remove_dir(&input.project_id, &dir).await {
            Ok(()) | Err(SandboxError::Lost { .. }) => Ok(()),
            Err(e) => Err(sandbox_error(e)),
        }
    }
}

/// The forks sweep's records, on the `belay.db` pool.
pub struct SweepStoreActivities {
    pub store: Store,
}

#[activities]
impl SweepStoreActivities {
    #[activity(definition = belay_workflows::sweep::sweep_definitions::Forks)]
    #[instrument(skip_all, err(Debug))]
    pub async fn forks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<Vec<belay_domain::repo::SweepFork>, ActivityError> {
        self.store.sweep_forks().await.map_err(store_error)
    }

    #[activity(definition = belay_workflows::sweep::sweep_definitions::MarkSwept)]
    #[instrument(skip_all, fields(repos = repos.len()), err(Debug))]
    pub async fn mark_swept(self: Arc<Self>, _ctx: ActivityContext, repos: Vec<String>) -> Result<(), ActivityError> {
        self.store.mark_forks_swept(&repos).await.map_err(store_error)
    }
}

/// The forks sweep's deletes, on the `belay.git` pool.
pub struct SweepGitActivities {
    pub git: GitService,
}

#[activities]
impl SweepGitActivities {
    #[activity(definition = belay_workflows::sweep::sweep_definitions::Delete)]
    #[instrument(skip_all, fields(repos = repos.len()), err(Debug))]
    pub async fn delete(self: Arc<Self>, _ctx: ActivityContext, repos: Vec<String>) -> Result<(), ActivityError> {
        for repo in &repos {
            self.git.delete_repo(repo).await.map_err(git_error)?;
        }
        Ok(())
    }
}
