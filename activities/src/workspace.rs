//! What WorkspaceWorkflow's Sandbox activities share ([`SandboxActivities`]): reading a
//! workspace file and running an agent's tool call, with how a lost Sandbox and a refused call
//! are answered. The activities themselves are the database's, git's and the Sandbox's (`store`,
//! `git`, `sandbox`).

use crate::sandbox::SandboxActivities;
use crate::{fatal, sandbox_error};
use belay_domain::ValidationError;
use belay_domain::refusal::{Refusal, RefusalReason};
use belay_domain::workspace::{MAX_FILE_BYTES, TOOL_TIMEOUT_SECS, ToolCall, apply_edit, check_package_script};
use belay_sandbox::git::GitInSandboxError;
use belay_sandbox::{SandboxError, SandboxUser};
use belay_workflows::workspace::{ToolOutcome, ToolOutput, ToolRequest};
use std::time::Duration;
use temporalio_sdk::activities::ActivityError;

/// The answer to a command an earlier attempt of the same activity started: its worker was lost,
/// so the command may have run, and it is not run again.
pub(crate) fn tool_not_run_again() -> ToolOutcome {
    ToolOutcome::Refused(Refusal::new(
        RefusalReason::SandboxLost,
        "an earlier attempt started this command and its worker was lost; it was not run again",
    ))
}

pub(crate) fn tool_refused(e: ValidationError) -> ToolOutcome {
    ToolOutcome::Refused(Refusal::new(RefusalReason::InvalidField, e.to_string()))
}

/// Whether an error means the workspace's Sandbox or directory is gone.
pub(crate) fn is_lost(e: &SandboxError) -> bool {
    matches!(e, SandboxError::Lost { .. } | SandboxError::MissingDirectory(_))
}

pub(crate) fn git_in_sandbox_error(e: GitInSandboxError) -> ActivityError {
    match e {
        GitInSandboxError::Sandbox(e) => sandbox_error(e),
        GitInSandboxError::Token(e) => fatal(e),
    }
}

impl SandboxActivities {
    /// A UTF-8 text file of the workspace, or why not.
    pub(crate) async fn read_text(
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
    pub(crate) async fn run_tool(
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
                if let Err(refused) = self.edit_file(project, dir, user, path, old_text, new_text).await? {
                    return Ok(refused);
                }
            }
            ToolCall::RunCommand { argv } => {
                if let Err(refused) = self.run_command(project, dir, user, request, argv, &mut out).await? {
                    return Ok(refused);
                }
            }
        }
        Ok(ToolOutcome::Done(out))
    }

    /// `edit_file`: one exact replacement in a text file, written back whole. `Err` is the
    /// tool's refusal, answered to the caller.
    async fn edit_file(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        path: &str,
        old_text: &str,
        new_text: &str,
    ) -> Result<Result<(), ToolOutcome>, SandboxError> {
        let text = match self.read_text(project, dir, user, path).await? {
            Ok(t) => t,
            Err(why) => return Ok(Err(tool_refused(why))),
        };
        let edited = match apply_edit(path, &text, old_text, new_text) {
            Ok(e) => e,
            Err(why) => return Ok(Err(tool_refused(why))),
        };
        Ok(self
            .sandboxes
            .write_file(project, dir, user, path, edited.as_bytes())
            .await?
            .map_err(|why| tool_refused(ValidationError::new("path", why))))
    }

    /// `run_command`: the allowed command, its output into `out`. A build runs with its writes
    /// discarded. `Err` is the tool's refusal, answered to the caller.
    async fn run_command(
        &self,
        project: &str,
        dir: &str,
        user: SandboxUser,
        request: &ToolRequest,
        argv: &[String],
        out: &mut ToolOutput,
    ) -> Result<Result<(), ToolOutcome>, SandboxError> {
        if let Some(script) = &request.allowed.script {
            let package = self
                .sandboxes
                .read_file(project, dir, user, "package.json", MAX_FILE_BYTES)
                .await?
                .ok();
            if let Err(why) = check_package_script(package.as_deref(), script) {
                return Ok(Err(tool_refused(why)));
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
            // Lost once the command was handed to the Sandbox: answered as lost, never run again
            // behind the caller's back. The next call restores the workspace.
            Err(SandboxError::Lost { reason, .. }) => {
                return Ok(Err(ToolOutcome::Refused(Refusal::new(
                    RefusalReason::SandboxLost,
                    format!(
                        "the Sandbox was lost while the command ran ({reason}); it was not run again. The next call restores the workspace from its fork"
                    ),
                ))));
            }
            Err(e) => return Err(e),
        };
        out.exit_code = exec.exit_code;
        out.stdout = Some(exec.stdout);
        out.stderr = Some(exec.stderr);
        out.timed_out = Some(exec.timed_out);
        Ok(Ok(()))
    }
}
