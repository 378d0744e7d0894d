//! The activities behind CandidateVerificationWorkflow: loads and records (`belay.db`), the
//! Candidate fork, merges, patch and tree reads (`belay.git`), and the checkout, composition build
//! and checks in the project's Sandbox (`belay.sandbox`).
//!
//! A check records its own Evidence row and object before it answers, keyed by Candidate, check
//! and attempt: a step retried after a crash (a worker killed mid-check) finds the row and
//! answers it, so an attempt never has two rows.

use crate::revocations::StoreRevocations;
use crate::workspace::git_in_sandbox_error;
use crate::{Plain, fatal, git_error, heartbeating, now_secs, retryable, sandbox_error, source_error, store_error};
use belay_domain::check::CheckId;
use belay_domain::check_output::{self, tail};
use belay_domain::contract::run_script_name;
use belay_domain::evidence::{CheckResult, Evidence};
use belay_domain::ids::CandidateId;
use belay_domain::meter::Reservation;
use belay_domain::policy::command_words;
use belay_domain::repo::{candidate_fork, canonical_repo};
use belay_git::source_objects::SourceObjects;
use belay_git::{GitService, StackedFork, Tip};
use belay_sandbox::git::{Checkout, Pushed as InSandbox, SandboxGit};
use belay_sandbox::{ExecOutput, SandboxUser, Sandboxes, candidate_dir};
use belay_store::candidates::NewEvidence;
use belay_store::meter::Reserve;
use belay_store::{Store, StoreError, now_ms};
use belay_workflows::verification::{
    BuildRequest, Built, CheckRequest, CheckoutRequest, ComposeRequest, Composed, ComposedRecord, InspectRequest,
    Inspected, Loaded, LoadedChangeSet, PatchRequest, PathsRequest, RecordRequest, ReserveRequest, Reserved,
    SettleRequest, StaleRequest, StatusRequest,
};
use object_store::ObjectStore;
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::instrument;

/// How much output an Evidence object keeps.
const OUTPUT_TAIL: usize = 4000;

fn evidence_key(candidate: &str, check: &CheckId, attempt: u32) -> String {
    format!("evidence/{candidate}/{check}-{attempt}.json")
}

async fn put_object(objects: &dyn ObjectStore, key: &str, value: &serde_json::Value) -> Result<(), ActivityError> {
    objects
        .put(
            &object_store::path::Path::from(key),
            serde_json::to_vec(value).map_err(fatal)?.into(),
        )
        .await
        .map(drop)
        .map_err(retryable)
}

/// Loads and records, on the `belay.db` pool.
pub struct VerifyStoreActivities {
    pub store: Store,
    pub objects: Arc<dyn ObjectStore>,
}

#[activities]
impl VerifyStoreActivities {
    #[activity(definition = belay_workflows::verification::verify_definitions::Load)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn load(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Loaded, ActivityError> {
        let rows = self
            .store
            .verification_rows(&candidate_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(StoreError::not_found("candidate", candidate_id.as_str())))?;
        let policy = self
            .store
            .active_policy_for_worker(&rows.candidate.project_id)
            .await
            .map_err(store_error)?;
        let change_sets = rows
            .change_sets
            .into_iter()
            .map(|r| {
                Ok(LoadedChangeSet {
                    fork: belay_domain::repo::workspace_fork(r.change_set.run_id.as_str()).map_err(fatal)?,
                    canonical_base: r.workspace_base,
                    canonical_base_generation: r.workspace_base_generation,
                    workspace_base: r.workspace_start,
                    change_set: r.change_set,
                })
            })
            .collect::<Result<Vec<_>, ActivityError>>()?;
        Ok(Loaded {
            candidate: rows.candidate,
            change: rows.change,
            tasks: rows.tasks,
            change_sets,
            policy,
            canonical_generation: rows.canonical_generation,
            kept_criteria: rows.kept_criteria,
        })
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Status)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn status(self: Arc<Self>, _ctx: ActivityContext, input: StatusRequest) -> Result<bool, ActivityError> {
        self.store
            .set_candidate_status(&input.candidate_id, &input.from, input.to, input.reason.as_deref())
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Stale)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn stale(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: StaleRequest,
    ) -> Result<Option<CandidateId>, ActivityError> {
        Ok(self
            .store
            .recompose_stale(&input.candidate_id, &input.reason)
            .await
            .map_err(store_error)?
            .map(|c| c.id))
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Reserve)]
    #[instrument(skip_all, fields(project.id = %input.project_id, candidate.id = %input.candidate_id), err(Debug))]
    pub async fn reserve(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReserveRequest,
    ) -> Result<Reserved, ActivityError> {
        let at = now_secs();
        Ok(
            match self
                .store
                .reserve_sandbox(&input.project_id, Reservation::CandidateChecks, at)
                .await
                .map_err(store_error)?
            {
                Reserve::Reserved { id, .. } => Reserved::Reserved { reservation_id: id, at },
                Reserve::Refused(cap) => Reserved::Refused {
                    reason: cap.to_string(),
                },
            },
        )
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Settle)]
    #[instrument(skip_all, fields(reservation.id = %input.reservation_id), err(Debug))]
    pub async fn settle(self: Arc<Self>, _ctx: ActivityContext, input: SettleRequest) -> Result<(), ActivityError> {
        let end = now_secs().max(input.start);
        self.store
            .settle_sandbox(&input.reservation_id, input.start, end)
            .await
            .map(drop)
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Composed)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn composed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ComposedRecord,
    ) -> Result<bool, ActivityError> {
        self.store
            .record_composition(&input.candidate_id, &input.commit, &input.tree, &input.plan)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Record)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, check.id = %input.check_id, attempt = input.attempt), err(Debug))]
    pub async fn record(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: RecordRequest,
    ) -> Result<Evidence, ActivityError> {
        let key = evidence_key(input.candidate_id.as_str(), &input.check_id, input.attempt);
        let mut detail = input.detail.clone();
        if let Some(o) = detail.as_object_mut() {
            o.insert("result".into(), serde_json::to_value(&input.result).map_err(fatal)?);
        }
        put_object(self.objects.as_ref(), &key, &detail).await?;
        let now = now_ms();
        let row = self
            .store
            .record_evidence(&NewEvidence {
                candidate_id: input.candidate_id.to_string(),
                check_id: input.check_id,
                attempt: input.attempt,
                result: input.result,
                object_key: Some(key),
                started_at: input.started_at.unwrap_or(now),
                completed_at: input.completed_at.unwrap_or(now),
            })
            .await
            .map_err(store_error)?;
        Ok(row.evidence)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Evidence)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn evidence(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Vec<Evidence>, ActivityError> {
        Ok(self
            .store
            .list_evidence(&candidate_id)
            .await
            .map_err(store_error)?
            .into_iter()
            .map(|r| r.evidence)
            .collect())
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::AcceptanceRepair)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn acceptance_repair(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Option<belay_domain::ids::TaskId>, ActivityError> {
        self.store
            .repair_lone_after_acceptance(&candidate_id)
            .await
            .map_err(store_error)
    }
}

/// The Candidate fork, on the `belay.git` pool.
pub struct VerifyGitActivities {
    pub git: GitService,
    pub sources: SourceObjects,
}

#[activities]
impl VerifyGitActivities {
    #[activity(definition = belay_workflows::verification::verify_definitions::Paths)]
    #[instrument(skip_all, fields(tips = input.tips.len()), err(Debug))]
    pub async fn paths(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PathsRequest,
    ) -> Result<Vec<Vec<String>>, ActivityError> {
        let mut out = Vec::with_capacity(input.tips.len());
        for tip in &input.tips {
            let from = tip.workspace_base.clone().unwrap_or_else(|| input.base_commit.clone());
            out.push(
                self.git
                    .changed_paths(&tip.tip.fork, &from, &tip.tip.commit)
                    .await
                    .map_err(git_error)?,
            );
        }
        Ok(out)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Compose)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn compose(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ComposeRequest,
    ) -> Result<Composed, ActivityError> {
        let canonical = canonical_repo(input.project_id.as_str()).map_err(fatal)?;
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        let tips: Vec<Tip> = input.tips.iter().map(|t| t.tip.clone()).collect();
        Ok(
            match self
                .git
                .fork_stacked(&canonical, &fork, &tips)
                .await
                .map_err(git_error)?
            {
                StackedFork::Ready { base, start, .. } => Composed::Merged { base, commit: start },
                StackedFork::Conflict { label, paths } => Composed::Conflict { label, paths },
            },
        )
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Inspect)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn inspect(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: InspectRequest,
    ) -> Result<Inspected, ActivityError> {
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        let tree = self.git.tree_of(&fork, &input.commit).await.map_err(git_error)?;
        let changed_paths = self
            .git
            .changed_paths(&fork, &input.base, &input.commit)
            .await
            .map_err(git_error)?;
        let index = self.git.file_index(&fork, &input.commit).await.map_err(git_error)?;
        let read = async |path: &str| -> Result<Option<String>, ActivityError> {
            let Some(f) = index.iter().find(|f| f.path == path) else {
                return Ok(None);
            };
            let blobs = self
                .git
                .read_blobs(&fork, vec![f.blob.clone()])
                .await
                .map_err(git_error)?;
            Ok(blobs
                .into_iter()
                .next()
                .map(|b| String::from_utf8_lossy(&b).into_owned()))
        };
        let build_script = read("package.json").await?.and_then(|text| {
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            v.get("scripts")?.get("build")?.as_str().map(str::to_owned)
        });
        let index_html = read(belay_domain::client_assets::INDEX_HTML).await?;
        Ok(Inspected {
            tree,
            changed_paths,
            build_script,
            index_html,
        })
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Patch)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn patch(self: Arc<Self>, _ctx: ActivityContext, input: PatchRequest) -> Result<String, ActivityError> {
        let fork = candidate_fork(input.candidate_id.as_str()).map_err(fatal)?;
        let diff = self
            .git
            .unified_diff(&fork, &input.base, &input.commit)
            .await
            .map_err(git_error)?;
        Ok(self
            .sources
            .put_candidate_patch(input.project_id.as_str(), input.candidate_id.as_str(), &diff)
            .await
            .map_err(source_error)?
            .key)
    }
}

/// The checkout, composition build and checks, on the `belay.sandbox` pool.
pub struct VerifySandboxActivities {
    pub sandboxes: Arc<Sandboxes>,
    pub revocations: StoreRevocations,
    pub git: SandboxGit,
    pub store: Store,
    pub objects: Arc<dyn ObjectStore>,
    /// The Candidate checkouts this worker has found in a Sandbox container, `(container id,
    /// dir)`: a check in one skips the presence test (an exec); a failed check forgets it, so
    /// its retry tests again. A recreated Sandbox is another container.
    pub checkouts: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
}

/// A policy command's argv, split by the shell's word rules. A policy is refused when it is saved
/// with a command that does not split; one stored before that rule splits on blanks.
pub(crate) fn command_argv(command: &str) -> Vec<String> {
    argv(command)
}

fn argv(command: &str) -> Vec<String> {
    command_words(command).unwrap_or_else(|_| command.split_whitespace().map(str::to_owned).collect())
}

fn output(out: &ExecOutput) -> String {
    tail(&format!("{}{}", out.stdout, out.stderr), OUTPUT_TAIL)
}

/// What one command did, as the Evidence object holds it.
struct Ran {
    command: String,
    out: ExecOutput,
    /// The tail of its output, both streams.
    output: String,
}

impl Ran {
    fn new(command: &str, out: ExecOutput) -> Self {
        Self {
            command: command.to_owned(),
            output: output(&out),
            out,
        }
    }

    /// As the check's rule reads it.
    fn ended(&self) -> check_output::Ended<'_> {
        check_output::Ended {
            command: &self.command,
            exit_code: self.out.exit_code,
            timed_out: self.out.timed_out,
            stdout: &self.out.stdout,
            output: &self.output,
        }
    }

    /// The Evidence object's record of it.
    fn object(&self) -> serde_json::Value {
        serde_json::json!({
            "command": self.command,
            "exitCode": self.out.exit_code,
            "timedOut": self.out.timed_out,
            "outputTail": self.output,
        })
    }
}

impl VerifySandboxActivities {
    /// Clones the Candidate fork's `main` afresh into its directory; HEAD is answered.
    async fn clone_fork(&self, project: &str, candidate: &str) -> Result<String, ActivityError> {
        let dir = candidate_dir(candidate).map_err(fatal)?;
        let fork = candidate_fork(candidate).map_err(fatal)?;
        self.sandboxes.ensure(project).await.map_err(sandbox_error)?;
        self.sandboxes
            .fresh_dir(project, &dir, SandboxUser::Root)
            .await
            .map_err(sandbox_error)?;
        match self
            .git
            .clone_repo(
                &self.sandboxes,
                &self.revocations,
                Checkout {
                    project,
                    dir: &dir,
                    repo: &fork,
                },
                SandboxUser::Root,
            )
            .await
            .map_err(git_in_sandbox_error)?
        {
            Ok(head) => Ok(head),
            Err(why) => Err(retryable(Plain(why))),
        }
    }

    /// The checkout, restored from the fork when the Sandbox lost it.
    pub(crate) async fn ensure_checkout(&self, project: &str, candidate: &str) -> Result<String, ActivityError> {
        let dir = candidate_dir(candidate).map_err(fatal)?;
        let container = self.sandboxes.ensure(project).await.map_err(sandbox_error)?;
        let seen = (container.id, dir.clone());
        if self.checkouts.lock().expect("checkouts").contains(&seen) {
            return Ok(dir);
        }
        if !self
            .sandboxes
            .checkout_present(project, &dir)
            .await
            .map_err(sandbox_error)?
        {
            self.clone_fork(project, candidate).await?;
        }
        self.checkouts.lock().expect("checkouts").insert(seen);
        Ok(dir)
    }

    /// Forgets that `dir` was found checked out, in whatever container.
    fn forget_checkout(&self, dir: &str) {
        self.checkouts.lock().expect("checkouts").retain(|(_, d)| d != dir);
    }

    async fn run(&self, project: &str, dir: &str, command: &str, timeout: Duration) -> Result<Ran, ActivityError> {
        let out = self
            .sandboxes
            .exec(project, dir, &argv(command), SandboxUser::Root, timeout)
            .await
            .map_err(sandbox_error)?;
        Ok(Ran::new(command, out))
    }

    async fn sh(
        &self,
        project: &str,
        dir: &str,
        script: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<ExecOutput, ActivityError> {
        self.sandboxes
            .sh(project, dir, SandboxUser::Root, script, args, timeout)
            .await
            .map_err(sandbox_error)
    }

    /// Runs the check; the result and what the object holds. Each check's commands run here;
    /// what their output means is `belay_domain::check_output`'s.
    async fn run_check(
        &self,
        input: &CheckRequest,
        dir: &str,
    ) -> Result<(CheckResult, serde_json::Value), ActivityError> {
        let project = input.project_id.as_str();
        let c = &input.commands;
        let timeout = Duration::from_millis(input.check.timeout_ms);
        let secs = timeout.as_secs();
        Ok(match &input.check.check_id {
            CheckId::Build | CheckId::Unit => {
                let cmd = if input.check.check_id == CheckId::Build {
                    &c.typecheck
                } else {
                    &c.test
                };
                let ran = self.run(project, dir, cmd, timeout).await?;
                (check_output::read_exit(&ran.ended(), secs), ran.object())
            }
            CheckId::Security => {
                let ran = self.run(project, dir, &c.security(), timeout).await?;
                (check_output::read_security(&ran.ended(), secs), ran.object())
            }
            CheckId::Performance => {
                let ran = self.run(project, dir, &c.bench, timeout).await?;
                let limit = input.check.limit.as_ref().map(|l| l.below);
                (check_output::read_performance(&ran.ended(), secs, limit), ran.object())
            }
            CheckId::Contract => self.contract(input, dir, timeout).await?,
            CheckId::PreviewSmoke => self.preview_smoke(input, dir, timeout).await?,
            other => (
                CheckResult::thrown(&format!("{other} does not run in the Sandbox")),
                serde_json::json!({}),
            ),
        })
    }

    /// `contract`: the contract command on the Candidate's checkout and on a worktree of the base
    /// commit, then both tables read and compared.
    async fn contract(
        &self,
        input: &CheckRequest,
        dir: &str,
        timeout: Duration,
    ) -> Result<(CheckResult, serde_json::Value), ActivityError> {
        let project = input.project_id.as_str();
        let command = &input.commands.contract;
        let candidate = self.run(project, dir, command, timeout).await?;
        let base_dir = format!("/tmp/belay-base-{}", input.candidate_id.as_str());
        let words = argv(command);
        let script = run_script_name(&words).unwrap_or_default().to_owned();
        // The base's table, from a worktree of the base commit. A base whose package.json has no
        // such script (a new project at S0 has only `.gitignore`) prints the marker instead: its
        // route table is empty.
        let mut args: Vec<&str> = vec![&base_dir, &input.base_commit, dir, &script];
        args.extend(words.iter().map(String::as_str));
        let base = self
            .sh(
                project,
                dir,
                r#"wt=$1; base=$2; src=$3; script=$4; shift 4
rm -rf "$wt"; git worktree prune
git worktree add --quiet --detach "$wt" "$base" >&2 || exit 1
cd "$wt"
if [ -n "$script" ] && ! SCRIPT="$script" bun -e 'let p = {}; try { p = JSON.parse(require("fs").readFileSync("package.json", "utf8")); } catch {} process.exit(p && p.scripts && p.scripts[process.env.SCRIPT] ? 0 : 3)'; then
  echo "BELAY_NO_SCRIPT"; rc=0
else
  "$@"; rc=$?
fi
cd /; git -C "$src" worktree remove --force "$wt" >/dev/null 2>&1; exit $rc"#,
                &args,
                timeout,
            )
            .await?;
        let base_ended = check_output::BaseEnded {
            exit_code: base.exit_code,
            timed_out: base.timed_out,
            stdout: &base.stdout,
        };
        let detail = serde_json::json!({
            "command": command,
            "candidate": { "exitCode": candidate.out.exit_code, "outputTail": candidate.output },
            "base": if base_ended.no_script() {
                serde_json::json!({ "noScript": script, "routes": 0 })
            } else {
                serde_json::json!({ "exitCode": base.exit_code, "outputTail": output(&base) })
            },
        });
        let result = check_output::read_contract(
            &candidate.ended(),
            &base_ended,
            input.contract_changes.as_slice(),
            timeout.as_secs(),
        );
        Ok((result, detail))
    }

    /// `preview-smoke`: the dev command on the Candidate's own port, probed once for `/` and
    /// `/api/health`.
    async fn preview_smoke(
        &self,
        input: &CheckRequest,
        dir: &str,
        timeout: Duration,
    ) -> Result<(CheckResult, serde_json::Value), ActivityError> {
        let dev = &input.commands.dev;
        let mut preview_args = vec![
            crate::browser::preview_port(input.candidate_id.as_str()).to_string(),
            (timeout.as_millis() * 2 / 3).to_string(),
        ];
        preview_args.extend(argv(dev));
        let out = self
            .sh(
                input.project_id.as_str(),
                dir,
                // The port is the Candidate's own (siblings share the project's Sandbox); the
                // exec's end kills whatever the dev command started, and nothing of another
                // Candidate's. One probe process waits for the app for at most $3 ms, so an app
                // that never answers fails inside the check's timeout.
                r#"port=$1; ms=$2; shift 2
PORT=$port HOST=127.0.0.1 "$@" >"/tmp/belay-preview-$port.log" 2>&1 &
pid=$!
PROBE_PORT=$port PROBE_MS=$ms bun -e '
const base = `http://127.0.0.1:${process.env.PROBE_PORT}`;
const until = Date.now() + Number(process.env.PROBE_MS);
const status = async (path) => (await fetch(base + path, { signal: AbortSignal.timeout(5000) })).status;
let root = "", health = "";
while (root === "" && Date.now() < until) {
  try { root = await status("/"); } catch { await Bun.sleep(200); }
}
if (root !== "") { try { health = await status("/api/health"); } catch {} }
console.log(`root=${root} health=${health}`);
'
kill $pid 2>/dev/null
true"#,
                &preview_args.iter().map(String::as_str).collect::<Vec<_>>(),
                timeout,
            )
            .await?;
        let line = out.stdout.lines().last().unwrap_or_default().to_owned();
        Ok((
            check_output::read_preview(&line),
            serde_json::json!({ "command": dev, "probes": line, "outputTail": output(&out) }),
        ))
    }
}

#[activities]
impl VerifySandboxActivities {
    #[activity(definition = belay_workflows::verification::verify_definitions::Checkout)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn checkout(self: Arc<Self>, ctx: ActivityContext, input: CheckoutRequest) -> Result<(), ActivityError> {
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
