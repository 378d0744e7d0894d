//! The activities behind WorkspaceWorkflow: admission and records (`belay.db`), the workspace
//! fork and the ChangeSet patch (`belay.git`), and the checkout, tools and push in the project's
//! Sandbox (`belay.sandbox`).
//!
//! In the Sandbox every git access goes over smart HTTP with a repository token that is revoked
//! right after the command that used it; the Sandbox never sees a bare repository on disk.

use crate::git::{GitError, GitService, MergeOutcome};
use crate::sandbox::{ExecOutput, SandboxError, SandboxUser, Sandboxes, WORKSPACE, run_dir};
use crate::source_objects::SourceObjects;
use crate::{fatal, git_error, now_secs, retryable, sandbox_error, store_error};
use base64::Engine;
use belay_domain::change::ChangeSetInput;
use belay_domain::meter::Reservation;
use belay_domain::repo::{canonical_repo, workspace_fork};
use belay_domain::repo_token::{self, Scope, TOKEN_TTL_SECS};
use belay_domain::workspace::{MAX_FILE_BYTES, TOOL_TIMEOUT_SECS, ToolCall};
use belay_store::meter::Reserve;
use belay_store::workspaces::Admission;
use belay_store::{Store, StoreError};
use belay_workflows::workspace::{
    Admit, Admitted, CheckedOut, CheckoutRequest, EndRequest, ForkRequest, Forked, PatchRequest, PushRequest, Pushed,
    RecordRequest, Refusal, StackTip, ToolOutcome, ToolOutput, ToolRequest,
};
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::{instrument, warn};

/// Admission and records, on the `belay.db` pool.
pub struct WorkspaceStoreActivities {
    pub store: Store,
}

#[activities]
impl WorkspaceStoreActivities {
    #[activity(definition = belay_workflows::workspace::workspace_definitions::Admit)]
    #[instrument(skip_all, fields(run.id = %run_id), err(Debug))]
    pub async fn admit(self: Arc<Self>, _ctx: ActivityContext, run_id: String) -> Result<Admit, ActivityError> {
        let refuse = |status: u16, code: &str, message: String| Ok(Admit::Refused(Refusal::new(status, code, message)));
        let Some(plan) = self.store.workspace_plan(&run_id).await.map_err(store_error)? else {
            return refuse(404, "not_found", format!("task run {run_id} not found"));
        };
        if plan.run_status != "running" {
            return refuse(
                409,
                "workspace_closed",
                format!("task run {run_id} has ended ({})", plan.run_status),
            );
        }
        if !plan.task_kind.opens_workspace() {
            return refuse(
                422,
                "invalid_field",
                "task kind: only implement, migrate and test tasks open a workspace".into(),
            );
        }
        if plan.base_commit.is_none() {
            return refuse(
                409,
                "project_not_ready",
                format!("project {} is not provisioned", plan.project_id),
            );
        }
        if !plan.unpublished.is_empty() {
            return refuse(
                409,
                "stack_unpublished",
                format!(
                    "the tasks this one depends on have no ChangeSet yet: {}",
                    plan.unpublished.join(", ")
                ),
            );
        }
        let row = match self
            .store
            .admit_workspace(&run_id, &plan.change_id, &plan.project_id)
            .await
            .map_err(store_error)?
        {
            Admission::Admitted(row) => row,
            Admission::Refused { open } => {
                return refuse(
                    429,
                    "workspace_cap",
                    format!(
                        "change {} already has {open} open workspaces (at most 4)",
                        plan.change_id
                    ),
                );
            }
        };
        if row.status != "open" {
            return refuse(409, "workspace_closed", format!("the workspace of {run_id} has ended"));
        }
        let reservation_id = match row.reservation_id {
            Some(id) => id,
            None => match self
                .store
                .reserve_sandbox(&plan.project_id, Reservation::OpenWorkspace, now_secs())
                .await
                .map_err(store_error)?
            {
                Reserve::Reserved { id, .. } => {
                    self.store.workspace_reserved(&run_id, &id).await.map_err(store_error)?;
                    id
                }
                Reserve::Refused(cap) => {
                    self.store.unadmit_workspace(&run_id).await.map_err(store_error)?;
                    return refuse(429, "sandbox_cap", cap.to_string());
                }
            },
        };
        let stacked = plan
            .stacked
            .iter()
            .map(|s| {
                Ok(StackTip {
                    label: s.task_key.clone(),
                    fork: workspace_fork(&s.run_id).map_err(fatal)?,
                    commit: s.commit.clone(),
                })
            })
            .collect::<Result<Vec<_>, ActivityError>>()?;
        Ok(Admit::Admitted(Admitted {
            project_id: plan.project_id,
            change_id: plan.change_id,
            stacked,
            policy: plan.policy,
            reservation_id,
        }))
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Opened)]
    pub async fn opened(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: (String, String, String),
    ) -> Result<(), ActivityError> {
        let (run_id, base, start) = input;
        let row = self
            .store
            .get_workspace(&run_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(StoreError::not_found("workspace", &run_id)))?;
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
    pub async fn record(self: Arc<Self>, _ctx: ActivityContext, input: RecordRequest) -> Result<String, ActivityError> {
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
    pub async fn finish(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: (String, String),
    ) -> Result<serde_json::Value, ActivityError> {
        let cs = self
            .store
            .finish_publish(&input.0, &input.1)
            .await
            .map_err(store_error)?;
        serde_json::to_value(cs).map_err(fatal)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::End)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn end(self: Arc<Self>, _ctx: ActivityContext, input: EndRequest) -> Result<(), ActivityError> {
        let row = self.store.get_workspace(&input.run_id).await.map_err(store_error)?;
        if let Some(reservation) = row.as_ref().and_then(|r| r.reservation_id.clone()) {
            match input.opened_at {
                Some(start) => {
                    let end = now_secs().max(start);
                    self.store
                        .settle_sandbox(&reservation, start, end)
                        .await
                        .map_err(store_error)?;
                }
                None => {
                    self.store.release_sandbox(&reservation).await.map_err(store_error)?;
                }
            }
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
        let canonical_main = self
            .git
            .head(&canonical)
            .await
            .map_err(git_error)?
            .ok_or_else(|| fatal(GitError::NoMain(canonical.clone())))?;
        let base = match self.git.fork(&canonical, &fork).await {
            Ok(info) => info.main,
            Err(GitError::AlreadyExists { main, .. }) => {
                // A retry after the fork's main moved to the start commit: that start stands.
                if self
                    .git
                    .main_contains(&fork, &canonical_main)
                    .await
                    .map_err(git_error)?
                {
                    return Ok(Forked::Ready {
                        fork,
                        base: canonical_main,
                        start: main,
                    });
                }
                return Err(fatal(GitError::AlreadyExists { repo: fork, main }));
            }
            Err(e) => return Err(git_error(e)),
        };
        if input.stacked.is_empty() {
            return Ok(Forked::Ready {
                fork,
                start: base.clone(),
                base,
            });
        }
        for tip in &input.stacked {
            self.git
                .copy_objects(&tip.fork, &fork, &tip.commit, Some(&base))
                .await
                .map_err(git_error)?;
        }
        let tips: Vec<(String, String)> = input
            .stacked
            .iter()
            .map(|t| (t.label.clone(), t.commit.clone()))
            .collect();
        let start = match self.git.merge_into(&fork, &base, &tips).await.map_err(git_error)? {
            MergeOutcome::Merged(m) => m.commit,
            MergeOutcome::Conflict(c) => {
                return Ok(Forked::Conflict {
                    label: c.label,
                    paths: c.paths,
                });
            }
        };
        if start != base {
            self.git.cas_main(&fork, &base, &start).await.map_err(git_error)?;
        }
        Ok(Forked::Ready { fork, base, start })
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
            .map_err(|e| if e.is_retryable() { retryable(e) } else { fatal(e) })?;
        Ok(stored.key)
    }
}

/// Where the Sandbox reaches git and how it gets tokens.
#[derive(Clone)]
pub struct SandboxGit {
    /// The git service's base URL as a Sandbox sees it (`http://<bridge address>:<port>`).
    pub url: String,
    /// The HMAC key of repository tokens (the API's BELAY_GIT_TOKEN_SECRET).
    pub token_secret: Vec<u8>,
}

/// The checkout, tools and push, on the `belay.sandbox` pool.
pub struct WorkspaceSandboxActivities {
    pub sandboxes: Arc<Sandboxes>,
    pub store: Store,
    pub git: SandboxGit,
}

const CHUNK_READ: usize = 45 * 1024;
const CHUNK_WRITE: usize = 90 * 1024;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Plain(String);

fn tool_refused(field: &str, rule: impl Into<String>) -> ToolOutcome {
    ToolOutcome::Refused(Refusal::new(422, "invalid_field", format!("{field}: {}", rule.into())))
}

/// Whether an error means the workspace's Sandbox or directory is gone.
fn is_lost(e: &SandboxError) -> bool {
    matches!(e, SandboxError::Lost { .. } | SandboxError::MissingDirectory(_))
}

impl WorkspaceSandboxActivities {
    async fn sh(
        &self,
        project: &str,
        dir: &str,
        script: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned(), "belay".to_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        self.sandboxes
            .exec(project, dir, &argv, SandboxUser::Root, timeout)
            .await
    }

    /// Ensures the container and checks the run directory is still a checkout; `false` when the
    /// Sandbox (or the directory) was lost.
    async fn still_there(&self, project: &str, dir: &str) -> Result<bool, SandboxError> {
        let container = self.sandboxes.ensure(project).await?;
        if container.fresh {
            return Ok(false);
        }
        let out = self
            .sh(
                project,
                WORKSPACE,
                r#"test -d "$1/.git""#,
                &[dir],
                Duration::from_secs(30),
            )
            .await?;
        Ok(out.success())
    }

    fn token(&self, repo: &str, scope: Scope) -> Result<(String, String), ActivityError> {
        repo_token::issue(&self.git.token_secret, repo, scope, now_secs(), TOKEN_TTL_SECS).map_err(fatal)
    }

    async fn revoke(&self, token_id: &str) {
        if let Err(e) = self.store.revoke_repo_token(token_id, TOKEN_TTL_SECS).await {
            warn!(error = %e, "revoking a repository token failed; it expires within 600 s");
        }
    }

    fn repo_url(&self, repo: &str) -> String {
        format!("{}/git/{repo}.git", self.git.url.trim_end_matches('/'))
    }

    /// A file's bytes, or a refusal (not a file, too large).
    async fn read(&self, project: &str, dir: &str, path: &str) -> Result<Result<Vec<u8>, String>, SandboxError> {
        let head = self
            .sh(
                project,
                dir,
                r#"if [ ! -f "$1" ]; then echo missing; exit 0; fi; stat -c %s -- "$1""#,
                &[path],
                Duration::from_secs(30),
            )
            .await?;
        let text = head.stdout.trim();
        if text == "missing" {
            return Ok(Err(format!("{path} is not a file in the workspace")));
        }
        let size: usize = text
            .parse()
            .map_err(|_| SandboxError::NotStarted(format!("stat answered {text:?}: {}", head.stderr)))?;
        if size > MAX_FILE_BYTES {
            return Ok(Err(format!("{path} has {size} bytes; read_file returns at most 1 MiB")));
        }
        let mut bytes = Vec::with_capacity(size);
        let mut chunk = 0usize;
        while bytes.len() < size {
            let out = self
                .sh(
                    project,
                    dir,
                    r#"dd if="$1" bs="$2" skip="$3" count=1 status=none | base64 -w0"#,
                    &[path, &CHUNK_READ.to_string(), &chunk.to_string()],
                    Duration::from_secs(30),
                )
                .await?;
            let part = base64::engine::general_purpose::STANDARD
                .decode(out.stdout.trim())
                .map_err(|e| SandboxError::NotStarted(format!("reading {path}: {e}")))?;
            if part.is_empty() {
                break;
            }
            bytes.extend_from_slice(&part);
            chunk += 1;
        }
        Ok(Ok(bytes))
    }

    /// Writes `bytes` to `path` (creating parent directories) through a temporary file.
    async fn write(
        &self,
        project: &str,
        dir: &str,
        path: &str,
        bytes: &[u8],
    ) -> Result<Result<(), String>, SandboxError> {
        let tmp = format!(".belay-write-{}", std::process::id());
        let prep = self
            .sh(
                project,
                dir,
                r#"if [ -d "$1" ]; then echo directory; exit 0; fi; mkdir -p -- "$(dirname -- "$1")" && : > "$2""#,
                &[path, &tmp],
                Duration::from_secs(30),
            )
            .await?;
        if prep.stdout.trim() == "directory" {
            return Ok(Err(format!("{path} is a directory")));
        }
        if !prep.success() {
            return Ok(Err(format!("cannot write {path}: {}", prep.stderr.trim())));
        }
        for part in bytes.chunks(CHUNK_WRITE) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(part);
            let out = self
                .sh(
                    project,
                    dir,
                    r#"printf %s "$1" | base64 -d >> "$2""#,
                    &[&b64, &tmp],
                    Duration::from_secs(30),
                )
                .await?;
            if !out.success() {
                return Ok(Err(format!("cannot write {path}: {}", out.stderr.trim())));
            }
        }
        let out = self
            .sh(
                project,
                dir,
                r#"mv -f -- "$2" "$1""#,
                &[path, &tmp],
                Duration::from_secs(30),
            )
            .await?;
        if !out.success() {
            return Ok(Err(format!("cannot write {path}: {}", out.stderr.trim())));
        }
        Ok(Ok(()))
    }

    async fn run_tool(&self, project: &str, dir: &str, request: &ToolRequest) -> Result<ToolOutcome, SandboxError> {
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
            ToolCall::ReadFile { path } => match self.read(project, dir, path).await? {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => out.content = Some(text),
                    Err(_) => return Ok(tool_refused("path", format!("{path} is not UTF-8 text"))),
                },
                Err(why) => return Ok(tool_refused("path", why)),
            },
            ToolCall::WriteFile { path, content } => {
                if let Err(why) = self.write(project, dir, path, content.as_bytes()).await? {
                    return Ok(tool_refused("path", why));
                }
            }
            ToolCall::EditFile {
                path,
                old_text,
                new_text,
            } => {
                let text = match self.read(project, dir, path).await? {
                    Ok(bytes) => match String::from_utf8(bytes) {
                        Ok(t) => t,
                        Err(_) => return Ok(tool_refused("path", format!("{path} is not UTF-8 text"))),
                    },
                    Err(why) => return Ok(tool_refused("path", why)),
                };
                let n = text.matches(old_text.as_str()).count();
                if n != 1 {
                    return Ok(tool_refused(
                        "oldText",
                        format!("must occur exactly once in {path}; it occurs {n} times"),
                    ));
                }
                let edited = text.replacen(old_text.as_str(), new_text, 1);
                if edited.len() > MAX_FILE_BYTES {
                    return Ok(tool_refused("newText", "the edited file would pass 1 MiB"));
                }
                if let Err(why) = self.write(project, dir, path, edited.as_bytes()).await? {
                    return Ok(tool_refused("path", why));
                }
            }
            ToolCall::RunCommand { argv } => {
                if let Some(script) = &request.allowed.script {
                    let scripts = match self.read(project, dir, "package.json").await? {
                        Ok(bytes) => serde_json::from_slice::<serde_json::Value>(&bytes)
                            .ok()
                            .and_then(|v| v.get("scripts").cloned()),
                        Err(_) => None,
                    };
                    if scripts.as_ref().and_then(|s| s.get(script)).is_none() {
                        return Ok(tool_refused(
                            "argv",
                            format!("`bun run {script}` needs a script {script:?} in the workspace package.json"),
                        ));
                    }
                }
                let timeout = Duration::from_secs(TOOL_TIMEOUT_SECS);
                if request.allowed.build {
                    self.sh(project, dir, SNAPSHOT, &[], Duration::from_secs(60)).await?;
                }
                let exec = self
                    .sandboxes
                    .exec(project, dir, argv, SandboxUser::Root, timeout)
                    .await?;
                if request.allowed.build {
                    let restored = self.sh(project, dir, RESTORE, &[], Duration::from_secs(60)).await?;
                    out.discarded = Some(
                        restored
                            .stdout
                            .lines()
                            .filter(|l| !l.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    );
                }
                out.exit_code = exec.exit_code;
                out.stdout = Some(exec.stdout);
                out.stderr = Some(exec.stderr);
                out.timed_out = Some(exec.timed_out);
            }
        }
        Ok(ToolOutcome::Done(out))
    }
}

/// Before a build: the working tree's files (tracked and untracked, not ignored) as a tree in a
/// side index, and the list of ignored paths.
const SNAPSHOT: &str = r#"set -e
export GIT_INDEX_FILE=.git/belay-build-index
rm -f "$GIT_INDEX_FILE"
git add -A
git write-tree > .git/belay-build-tree
git ls-files -o -i --exclude-standard --directory | sort > .git/belay-build-ignored"#;

/// After a build: puts back every file the snapshot holds, removes files it does not, and removes
/// ignored paths that were not there before. Prints what it discarded.
const RESTORE: &str = r#"set -e
export GIT_INDEX_FILE=.git/belay-build-index
tree=$(cat .git/belay-build-tree)
git add -A
git diff --cached --name-only "$tree"
git ls-files -o -i --exclude-standard --directory | sort > .git/belay-build-ignored-after
comm -13 .git/belay-build-ignored .git/belay-build-ignored-after
git read-tree "$tree"
git checkout-index -a -f
git clean -fdq
comm -13 .git/belay-build-ignored .git/belay-build-ignored-after | while IFS= read -r p; do rm -rf -- "$p"; done
rm -f "$GIT_INDEX_FILE" .git/belay-build-tree .git/belay-build-ignored .git/belay-build-ignored-after"#;

#[activities]
impl WorkspaceSandboxActivities {
    #[activity(definition = belay_workflows::workspace::workspace_definitions::Checkout)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn checkout(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CheckoutRequest,
    ) -> Result<CheckedOut, ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        let project = input.project_id.as_str();
        self.sandboxes.ensure(project).await.map_err(sandbox_error)?;
        // A restore starts from nothing: whatever a lost or half-done checkout left goes.
        let fresh = self
            .sh(
                project,
                WORKSPACE,
                r#"rm -rf -- "$1" && mkdir -p -- "$1""#,
                &[&dir],
                Duration::from_secs(60),
            )
            .await
            .map_err(sandbox_error)?;
        if !fresh.success() {
            return Err(retryable(Plain(format!("preparing {dir}: {}", fresh.stderr.trim()))));
        }
        let (token_id, token) = self.token(&input.fork, Scope::Read)?;
        let clone = self
            .sh(
                project,
                &dir,
                r#"git -c http.extraHeader="Authorization: Bearer $1" clone --quiet "$2" . 2>&1 && git config user.name belay && git config user.email agent@belay.invalid && git rev-parse HEAD"#,
                &[&token, &self.repo_url(&input.fork)],
                Duration::from_secs(300),
            )
            .await;
        self.revoke(&token_id).await;
        let clone = clone.map_err(sandbox_error)?;
        if !clone.success() {
            return Err(retryable(Plain(format!(
                "cloning {} into the Sandbox failed: {}",
                input.fork,
                clone.stdout.trim()
            ))));
        }
        let head = clone.stdout.lines().last().unwrap_or_default().trim().to_owned();
        if head != input.start {
            return Ok(CheckedOut::Failed {
                reason: format!(
                    "the restored workspace is at {head}, not at its recorded start commit {}",
                    input.start
                ),
            });
        }
        let has_package_json = self
            .sh(project, &dir, "test -f package.json", &[], Duration::from_secs(30))
            .await
            .map_err(sandbox_error)?
            .success();
        if let Some(install) = input.policy.install_argv(has_package_json) {
            let out = self
                .sandboxes
                .exec(
                    project,
                    &dir,
                    &install,
                    SandboxUser::Root,
                    Duration::from_secs(TOOL_TIMEOUT_SECS),
                )
                .await
                .map_err(sandbox_error)?;
            if !out.success() {
                return Ok(CheckedOut::Failed {
                    reason: format!(
                        "the install command `{}` failed (exit {:?}{}): {}",
                        install.join(" "),
                        out.exit_code,
                        if out.timed_out { ", timed out" } else { "" },
                        out.stderr.trim()
                    ),
                });
            }
        }
        Ok(CheckedOut::Ready { opened_at: now_secs() })
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Tool)]
    #[instrument(skip_all, fields(run.id = %input.run_id, tool = input.call.name()), err(Debug))]
    pub async fn tool(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ToolRequest,
    ) -> Result<ToolOutcome, ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        let project = input.project_id.as_str();
        match self.still_there(project, &dir).await {
            Ok(true) => {}
            Ok(false) => return Ok(ToolOutcome::Lost),
            Err(e) if is_lost(&e) => return Ok(ToolOutcome::Lost),
            Err(e) => return Err(sandbox_error(e)),
        }
        match self.run_tool(project, &dir, &input).await {
            Ok(outcome) => Ok(outcome),
            Err(e) if is_lost(&e) => Ok(ToolOutcome::Lost),
            Err(e) => Err(sandbox_error(e)),
        }
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Push)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn push(self: Arc<Self>, _ctx: ActivityContext, input: PushRequest) -> Result<Pushed, ActivityError> {
        let dir = run_dir(&input.run_id).map_err(fatal)?;
        let project = input.project_id.as_str();
        match self.still_there(project, &dir).await {
            Ok(true) => {}
            Ok(false) => return Ok(Pushed::Lost),
            Err(e) if is_lost(&e) => return Ok(Pushed::Lost),
            Err(e) => return Err(sandbox_error(e)),
        }
        let (token_id, token) = self.token(&input.fork, Scope::Write)?;
        let pushed = self
            .sh(
                project,
                &dir,
                r#"set -e
git add -A
if ! git diff --cached --quiet; then git commit -q -m "$1"; fi
head=$(git rev-parse HEAD)
if [ "$head" = "$2" ]; then echo NOTHING; exit 0; fi
git -c http.extraHeader="Authorization: Bearer $3" push -q "$4" HEAD:refs/heads/main 2>&1
echo "PUSHED $head""#,
                &[&input.message, &input.start, &token, &self.repo_url(&input.fork)],
                Duration::from_secs(600),
            )
            .await;
        self.revoke(&token_id).await;
        let pushed = match pushed {
            Ok(p) => p,
            Err(e) if is_lost(&e) => return Ok(Pushed::Lost),
            Err(e) => return Err(sandbox_error(e)),
        };
        let last = pushed.stdout.lines().last().unwrap_or_default().trim().to_owned();
        if last == "NOTHING" {
            return Ok(Pushed::Nothing);
        }
        match last.strip_prefix("PUSHED ") {
            Some(commit) if pushed.success() => Ok(Pushed::Commit(commit.to_owned())),
            _ => Err(retryable(Plain(format!(
                "pushing the workspace failed (exit {:?}): {}{}",
                pushed.exit_code,
                pushed.stdout.trim(),
                pushed.stderr.trim()
            )))),
        }
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Remove)]
    pub async fn remove(self: Arc<Self>, _ctx: ActivityContext, input: (String, String)) -> Result<(), ActivityError> {
        let (project, run_id) = input;
        let dir = run_dir(&run_id).map_err(fatal)?;
        // Nothing to remove when the Sandbox is gone: its disk went with it.
        match self.sandboxes.remove_dir(&project, &dir).await {
            Ok(()) => Ok(()),
            Err(e) if is_lost(&e) => Ok(()),
            Err(e) => Err(sandbox_error(e)),
        }
    }
}
