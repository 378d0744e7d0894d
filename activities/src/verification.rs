//! What CandidateVerificationWorkflow's activities share beyond one call: the Evidence key and
//! object, and the checks run in the project's Sandbox ([`SandboxActivities`]: the fork's clone,
//! the checkout kept per container, each check's commands). The activities themselves are the
//! database's, git's and the Sandbox's (`store`, `git`, `sandbox`).
//!
//! A check records its own Evidence row and object before it answers, keyed by Candidate, check
//! and attempt: a step retried after a crash (a worker killed mid-check) finds the row and
//! answers it, so an attempt never has two rows.

use crate::sandbox::SandboxActivities;
use crate::workspace::git_in_sandbox_error;
use crate::{Plain, fatal, retryable, sandbox_error};
use belay_domain::check::CheckId;
use belay_domain::check_output::{self, tail};
use belay_domain::contract::run_script_name;
use belay_domain::evidence::CheckResult;
use belay_domain::policy::command_words;
use belay_domain::repo::candidate_fork;
use belay_sandbox::git::Checkout;
use belay_sandbox::{ExecOutput, SandboxUser, candidate_dir};
use belay_workflows::verification::CheckRequest;
use object_store::ObjectStore;
use std::time::Duration;
use temporalio_sdk::activities::ActivityError;

/// How much output an Evidence object keeps.
const OUTPUT_TAIL: usize = 4000;

pub(crate) fn evidence_key(candidate: &str, check: &CheckId, attempt: u32) -> String {
    format!("evidence/{candidate}/{check}-{attempt}.json")
}

pub(crate) async fn put_object(
    objects: &dyn ObjectStore,
    key: &str,
    value: &serde_json::Value,
) -> Result<(), ActivityError> {
    objects
        .put(
            &object_store::path::Path::from(key),
            serde_json::to_vec(value).map_err(fatal)?.into(),
        )
        .await
        .map(drop)
        .map_err(retryable)
}

/// A policy command's argv, split by the shell's word rules. A policy is refused when it is saved
/// with a command that does not split; one stored before that rule splits on blanks.
pub(crate) fn command_argv(command: &str) -> Vec<String> {
    argv(command)
}

fn argv(command: &str) -> Vec<String> {
    command_words(command).unwrap_or_else(|_| command.split_whitespace().map(str::to_owned).collect())
}

pub(crate) fn output(out: &ExecOutput) -> String {
    tail(&format!("{}{}", out.stdout, out.stderr), OUTPUT_TAIL)
}

/// What one command did, as the Evidence object holds it.
pub(crate) struct Ran {
    command: String,
    pub(crate) out: ExecOutput,
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

impl SandboxActivities {
    /// Clones the Candidate fork's `main` afresh into its directory; HEAD is answered.
    pub(crate) async fn clone_fork(&self, project: &str, candidate: &str) -> Result<String, ActivityError> {
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
    pub(crate) fn forget_checkout(&self, dir: &str) {
        self.checkouts.lock().expect("checkouts").retain(|(_, d)| d != dir);
    }

    pub(crate) async fn run(
        &self,
        project: &str,
        dir: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<Ran, ActivityError> {
        let out = self
            .sandboxes
            .exec(project, dir, &argv(command), SandboxUser::Root, timeout)
            .await
            .map_err(sandbox_error)?;
        Ok(Ran::new(command, out))
    }

    pub(crate) async fn sh(
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
    pub(crate) async fn run_check(
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
    pub(crate) async fn contract(
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
    pub(crate) async fn preview_smoke(
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
