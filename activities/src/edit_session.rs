//! An edit session's command and stop in the project's Sandbox ([`SandboxActivities`]), run as the
//! session's own unprivileged user so that killing every process of that user after each
//! command leaves nothing running. The activities themselves are the database's, git's and the
//! Sandbox's (`store`, `git`, `sandbox`).

use crate::sandbox::SandboxActivities;
use crate::{
    COMMAND_STARTED, Plain, activity_identity, die_at, failpoint, fatal, mark_started, now_secs, retryable,
    sandbox_error, store_error,
};
use belay_domain::edit_session::COMMAND_TIMEOUT_SECS;
use belay_domain::ids::ProjectId;
use belay_domain::repo::edit_fork;
use belay_sandbox::git::{Checkout, GitInSandboxError};
use belay_sandbox::{SandboxError, SandboxUser, WORKSPACE, container_name, edit_dir};
use belay_workflows::edit_session::{CommandOutput, EditCommand};
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// The answer to a command an earlier attempt of the same activity started: its worker was lost,
/// so the command may have run, and it is not run again.
pub(crate) fn command_not_run_again(at: i64) -> CommandOutput {
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
pub(crate) fn session_dir(session_id: &str) -> Result<String, ActivityError> {
    edit_dir(session_id.strip_prefix("edit_").unwrap_or(session_id)).map_err(fatal)
}

impl SandboxActivities {
    pub(crate) async fn command_inner(
        &self,
        input: EditCommand,
        ctx: &ActivityContext,
        started: &AtomicBool,
    ) -> Result<CommandOutput, ActivityError> {
        let dir = session_dir(&input.session_id)?;
        let project = input.project_id.as_str();
        let user = SandboxUser::Unprivileged(input.uid);
        let started_at = now_secs();
        self.ensure_session_checkout(&input.session_id, project, &dir, user)
            .await?;
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
            return Ok(command_not_run_again(started_at));
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
        match ran {
            Ok(out) => Ok(CommandOutput {
                exit_code: out.exit_code,
                stdout: out.stdout,
                stderr: out.stderr,
                timed_out: out.timed_out,
                started_at,
                ended_at: now_secs(),
                sandbox_lost: false,
            }),
            // Lost once the command was handed to the Sandbox: answered as lost, never retried
            // (a retry would run the command a second time, from the start, in a fresh Sandbox).
            Err(SandboxError::Lost { reason, .. }) => Ok(CommandOutput {
                exit_code: None,
                stdout: String::new(),
                stderr: reason,
                timed_out: false,
                started_at,
                ended_at: now_secs(),
                sandbox_lost: true,
            }),
            Err(e) => Err(sandbox_error(e)),
        }
    }

    /// The session's checkout in its Sandbox: on the first command (or the first after the
    /// Sandbox slept), a fresh clone of the session's fork, owned by the session's user.
    async fn ensure_session_checkout(
        &self,
        session_id: &str,
        project: &str,
        dir: &str,
        user: SandboxUser,
    ) -> Result<(), ActivityError> {
        let present = self
            .sandboxes
            .checkout_present(project, dir)
            .await
            .map_err(sandbox_error)?;
        if present {
            return Ok(());
        }
        self.sandboxes
            .fresh_dir(project, dir, user)
            .await
            .map_err(sandbox_error)?;
        let fork = edit_fork(session_id).map_err(fatal)?;
        let cloned = self
            .git
            .clone_repo(
                &self.sandboxes,
                &self.revocations,
                Checkout {
                    project,
                    dir,
                    repo: &fork,
                },
                user,
            )
            .await
            .map_err(|e| match e {
                GitInSandboxError::Sandbox(e) => sandbox_error(e),
                GitInSandboxError::Token(e) => fatal(e),
            })?;
        cloned.map(|_| ()).map_err(|why| retryable(Plain(why)))
    }

    pub(crate) async fn stop_inner(&self, input: EditCommand) -> Result<(), ActivityError> {
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
