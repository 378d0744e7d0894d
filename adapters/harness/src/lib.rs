//! Runs one job's harness adapter as a local process and turns what it left behind into an
//! [`AdapterRun`].
//!
//! The rules (what an adapter is given, and how its exit and manifest decide the outcome) live in
//! `belay_domain::adapter`; this module owns the effects around them: a fresh output directory,
//! a process group that can be killed as a whole (an adapter is usually a shell script that starts
//! an agent that starts builds, and killing only the script would leave those running), bounded
//! capture of its output, and copying the artifacts it reports to the object store before the
//! directory is removed. It knows nothing about Temporal: the harness activity supplies the
//! heartbeat (`on_tick`) and the cancellation signal.

use belay_domain::adapter::{self, AdapterOutcome, JobFile, MANIFEST_FILE, ProcessEnd};
use belay_domain::catalogue::AdapterSpec;
use belay_domain::ids::JobId;
use belay_sandbox::Sandboxes;
use belay_sandbox::oneoff::{OneOff, OneOffEnd};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tracing::{info, warn};

/// How much of each of stdout and stderr is kept: enough to see why a run failed, bounded so a
/// chatty adapter cannot exhaust the worker's memory.
const TAIL_BYTES: usize = 16 * 1024;
/// A manifest is a short JSON document; anything bigger is not one.
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
const MAX_ARTIFACT_BYTES: u64 = 256 * 1024 * 1024;
/// Artifacts up to this size are stored with one `put`; bigger ones are streamed in parts so the
/// worker never holds a whole 256 MiB artifact in memory.
const SINGLE_PUT_BYTES: u64 = 8 * 1024 * 1024;
const READ_CHUNK_BYTES: usize = 1024 * 1024;
const UPLOAD_CONCURRENCY: usize = 4;
/// The worker's variables an adapter inherits; everything else is withheld so the worker's
/// credentials never reach code the adapter runs.
pub const PASSED_THROUGH_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// The values of [`PASSED_THROUGH_ENV`] an adapter started outside a Sandbox inherits, read once
/// by the worker's command and passed down.
#[derive(Debug, Clone, Default)]
pub struct InheritedEnv(Vec<(String, std::ffi::OsString)>);

impl InheritedEnv {
    /// The variables of [`PASSED_THROUGH_ENV`] `lookup` answers.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Self {
        Self(
            PASSED_THROUGH_ENV
                .iter()
                .filter_map(|k| lookup(k).map(|v| ((*k).to_owned(), v)))
                .collect(),
        )
    }
}

/// Where an adapter may run: the Sandboxes for adapters marked `sandbox` (none configured fails
/// them), and the variables one started on the worker's host inherits.
#[derive(Clone, Copy)]
pub struct Host<'a> {
    pub sandbox: Option<&'a Sandboxes>,
    pub env: &'a InheritedEnv,
}

/// Where one adapter runs, decided from its spec.
#[derive(Clone, Copy)]
enum Place<'a> {
    Local(&'a InheritedEnv),
    Sandbox(&'a Sandboxes),
}
/// How long to wait for stdout/stderr to close once the process group is dead. A process that
/// left the group (`setsid`) can keep the pipes open forever; its output is not worth a hung run.
const PIPE_GRACE: Duration = Duration::from_secs(2);
const TICK: Duration = Duration::from_secs(1);

/// One artifact copied to the object store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredArtifact {
    pub path: String,
    pub key: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdapterRun {
    /// From `decide_outcome`, or `Failed` for an artifact that could not be kept.
    pub outcome: AdapterOutcome,
    /// Empty unless the outcome is `Completed`.
    pub artifacts: Vec<StoredArtifact>,
    /// The last 16 KiB of stdout (lossy UTF-8).
    pub stdout_tail: String,
    /// The last 16 KiB of stderr (lossy UTF-8).
    pub stderr_tail: String,
    /// How long the adapter process ran, from spawn until it was reaped.
    pub duration_ms: u64,
    /// The adapter's exit code, when it exited (not when it was killed or timed out).
    pub exit_code: Option<i32>,
}

/// Why a run could not be carried out. An adapter that fails is not an error (it is
/// `AdapterOutcome::Failed`); these are the worker's own problems, which the activity retries,
/// except `InvalidJobId`, which no retry can fix.
#[derive(Debug, thiserror::Error)]
pub enum AdapterRunError {
    #[error("could not prepare the output directory: {0}")]
    Prepare(#[source] io::Error),
    #[error("could not start the adapter: {0}")]
    Spawn(#[source] io::Error),
    #[error("could not wait for the adapter to exit: {0}")]
    Wait(#[source] io::Error),
    #[error("could not read artifact {path}: {source}")]
    ReadArtifact {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("could not store artifact {path}: {source}")]
    Store {
        path: String,
        #[source]
        source: object_store::Error,
    },
    #[error("the run was cancelled")]
    Cancelled,
    /// The job id names the output directory and the artifact keys, so it must be a plain id.
    #[error("job id {0:?} is not a valid job id")]
    InvalidJobId(String),
    #[error("the harness runs its adapter in a Sandbox, and this worker has no Sandbox configured")]
    NoSandbox,
    #[error("the adapter's Sandbox container failed: {0}")]
    Sandbox(#[source] belay_sandbox::SandboxError),
}

impl AdapterRunError {
    /// Whether running the activity again could succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            AdapterRunError::InvalidJobId(_) | AdapterRunError::NoSandbox => false,
            AdapterRunError::Sandbox(e) => e.is_retryable(),
            _ => true,
        }
    }
}

/// Runs `spec` for `job`. `work_root` is a directory this worker owns; the job's output directory is
/// `work_root/<job_id>-a<attempt>` (recreated empty; job.output_dir and job.manifest in the JobFile
/// written there point at it and at `<output_dir>/manifest.json`). Writes `job.json`, starts the
/// process in its own process group, calls `on_tick()` about once a second while it runs (the
/// caller heartbeats from it), kills the whole process group with SIGKILL on timeout
/// (`spec.timeout_seconds()`) or when `cancelled` resolves (then returns `Err(Cancelled)` after
/// the group is killed and the adapter reaped), reads the manifest (at most 1 MiB), decides the
/// outcome with `decide_outcome`, and for a `Completed` outcome copies each listed artifact to
/// `objects` under `artifacts/<job_id>/a<attempt>/<path>` (an artifact that is missing, not a
/// regular file, a symlink, or over 256 MiB turns the outcome into `Failed` with a reason naming
/// it). Finally removes the output directory.
pub async fn run_adapter(
    spec: &AdapterSpec,
    job: JobFile,
    work_root: &std::path::Path,
    objects: std::sync::Arc<dyn object_store::ObjectStore>,
    env: &InheritedEnv,
    on_tick: impl FnMut(),
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<AdapterRun, AdapterRunError> {
    let host = Host { sandbox: None, env };
    run_adapter_in(spec, job, work_root, objects, host, on_tick, cancelled).await
}

/// As [`run_adapter`]; an adapter whose spec says `sandbox` runs in a container made from
/// `host.sandbox` (the Sandbox image, limits and internal network), with its output directory
/// mounted at the same path, and fails when no Sandbox is configured.
pub async fn run_adapter_in(
    spec: &AdapterSpec,
    job: JobFile,
    work_root: &std::path::Path,
    objects: std::sync::Arc<dyn object_store::ObjectStore>,
    host: Host<'_>,
    mut on_tick: impl FnMut(),
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<AdapterRun, AdapterRunError> {
    if !JobId::is_valid(&job.job_id) {
        return Err(AdapterRunError::InvalidJobId(job.job_id.to_string()));
    }
    let job_id = job.job_id.clone();
    let attempt = job.attempt;
    let work_root = std::path::absolute(work_root).map_err(AdapterRunError::Prepare)?;
    let dir = work_root.join(format!("{job_id}-a{attempt}"));

    let place = if spec.in_sandbox() {
        Place::Sandbox(host.sandbox.ok_or(AdapterRunError::NoSandbox)?)
    } else {
        Place::Local(host.env)
    };
    let result = run_in(&dir, spec, job, objects.as_ref(), place, &mut on_tick, pin!(cancelled)).await;

    // Removed on every path, a cancelled or failed one included: the artifacts worth keeping are
    // in the object store by now, and a retry recreates the directory anyway.
    if let Err(e) = remove_dir(&dir).await {
        warn!(job.id = %job_id, job.attempt = attempt, error = %e, "could not remove the adapter's output directory");
    }

    if let Ok(run) = &result {
        let (name, reason) = match &run.outcome {
            AdapterOutcome::Completed { .. } => ("completed", None),
            AdapterOutcome::Failed { reason, .. } => ("failed", Some(reason.as_str())),
        };
        info!(
            job.id = %job_id,
            job.attempt = attempt,
            adapter.outcome = name,
            adapter.reason = reason,
            adapter.artifacts = run.artifacts.len(),
            adapter.duration_ms = run.duration_ms,
            "adapter run finished"
        );
    }
    result
}

async fn run_in(
    dir: &Path,
    spec: &AdapterSpec,
    mut job: JobFile,
    objects: &dyn ObjectStore,
    place: Place<'_>,
    on_tick: &mut impl FnMut(),
    mut cancelled: Pin<&mut impl Future<Output = ()>>,
) -> Result<AdapterRun, AdapterRunError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let ran = match place {
        Place::Sandbox(sandboxes) => {
            // The adapter's directory is the container's own; it comes back to `dir` when the
            // command ends (see belay_sandbox::oneoff).
            let work_root = dir
                .parent()
                .ok_or_else(|| AdapterRunError::Prepare(io::Error::other("the output directory has no parent")))?;
            remove_dir(dir).await.map_err(AdapterRunError::Prepare)?;
            tokio::fs::create_dir_all(work_root)
                .await
                .map_err(AdapterRunError::Prepare)?;
            let one_off = one_off(spec, job.clone(), dir, work_root)?;
            let run = ticking(sandboxes.run_one_off(&one_off), on_tick, cancelled.as_mut())
                .await?
                .map_err(AdapterRunError::Sandbox)?;
            // A command that wrote nothing still leaves its directory, but be sure of it.
            tokio::fs::create_dir_all(dir).await.map_err(AdapterRunError::Prepare)?;
            Ran {
                end: match run.end {
                    OneOffEnd::Exited(code) => ProcessEnd::Exited(i32::try_from(code).unwrap_or(i32::MAX)),
                    OneOffEnd::TimedOut => ProcessEnd::TimedOut,
                },
                duration: run.duration,
                stdout_tail: tail_of(&run.stdout_tail),
                stderr_tail: tail_of(&run.stderr_tail),
            }
        }
        Place::Local(env) => {
            job.output_dir = utf8(dir)?.to_string();
            job.manifest = utf8(&manifest_path)?.to_string();
            prepare_dir(dir, &job).await.map_err(AdapterRunError::Prepare)?;
            let mut cmd = command(spec, &job, env)?;
            cmd.current_dir(dir);
            run_process(cmd, spec.timeout_seconds(), on_tick, cancelled.as_mut()).await?
        }
    };

    let collect = async {
        let manifest = read_manifest(&manifest_path).await;
        let mut outcome = match (ran.end, manifest) {
            // A manifest problem only matters when the exit code would otherwise let it decide.
            (ProcessEnd::Exited(0), Manifest::Unusable(reason)) => AdapterOutcome::infra(reason),
            (end, Manifest::Text(text)) => adapter::decide_outcome(end, Some(&text)),
            (end, _) => adapter::decide_outcome(end, None),
        };
        let mut artifacts = Vec::new();
        if let AdapterOutcome::Completed { artifacts: listed, .. } = &outcome {
            match store_artifacts(dir, &job, listed, objects).await? {
                Ok(stored) => artifacts = stored,
                Err(reason) => outcome = AdapterOutcome::infra(reason),
            }
        }
        Ok::<_, AdapterRunError>((outcome, artifacts))
    };
    // Copying 256 artifacts of 256 MiB takes a while: keep heartbeating, and stay cancellable.
    let (outcome, artifacts) = ticking(collect, on_tick, cancelled).await??;

    Ok(AdapterRun {
        outcome,
        artifacts,
        stdout_tail: ran.stdout_tail,
        stderr_tail: ran.stderr_tail,
        duration_ms: u64::try_from(ran.duration.as_millis()).unwrap_or(u64::MAX),
        exit_code: match ran.end {
            ProcessEnd::Exited(code) => Some(code),
            _ => None,
        },
    })
}

fn utf8(path: &Path) -> Result<&str, AdapterRunError> {
    path.to_str().ok_or_else(|| {
        AdapterRunError::Prepare(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not valid UTF-8, so an adapter could not be told about it",
                path.display()
            ),
        ))
    })
}

async fn prepare_dir(dir: &Path, job: &JobFile) -> io::Result<()> {
    // A previous run of the same attempt (a retried activity, a crashed worker) may have left files
    // that a manifest could otherwise list as this run's artifacts.
    remove_dir(dir).await?;
    tokio::fs::create_dir_all(dir).await?;
    let job_file = serde_json::to_vec_pretty(job)?;
    tokio::fs::write(dir.join("job.json"), job_file).await
}

async fn remove_dir(dir: &Path) -> io::Result<()> {
    match tokio::fs::remove_dir_all(dir).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// How an adapter's process group dies with its worker. The group's leader starts as this script:
/// it keeps the worker's end of a pipe (its stdin) on fd 3 in a watcher of its own group, then
/// becomes the adapter (`exec`, so the adapter is the leader the worker waits on, with the same
/// pid). When the worker dies, however it dies (SIGKILL included), the kernel closes the pipe's
/// other end, the watcher reads end of file and kills the whole group. While the worker lives,
/// the watcher only waits; when the adapter is done, the worker kills the group, watcher and all.
const DIE_WITH_WORKER: &str = r#"exec 3<&0
( cat <&3 >/dev/null; kill -s KILL 0 ) &
exec "$@" 3<&- </dev/null"#;

fn command(spec: &AdapterSpec, job: &JobFile, env: &InheritedEnv) -> Result<tokio::process::Command, AdapterRunError> {
    let argv = argv(spec, job)?;
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", DIE_WITH_WORKER, "belay-adapter"])
        .args(&argv)
        .env_clear()
        .envs(env.0.iter().map(|(k, v)| (k, v)))
        .envs(adapter::environment(job))
        // The watcher's end of the worker-death pipe (see DIE_WITH_WORKER); the adapter itself
        // gets /dev/null.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so that everything it starts can be killed with one signal.
        .process_group(0)
        // Only a backstop for a dropped run future; `ProcessGroup` kills the rest of the tree.
        .kill_on_drop(true);
    Ok(cmd)
}

/// The adapter's argv, with its placeholders expanded.
fn argv(spec: &AdapterSpec, job: &JobFile) -> Result<Vec<String>, AdapterRunError> {
    let vars = adapter::template_vars(job);
    let argv: Vec<String> = match spec {
        AdapterSpec::Command { argv, .. } => argv.iter().map(|a| adapter::expand(a, &vars)).collect(),
        AdapterSpec::Script { script, .. } => vec!["/bin/sh".into(), "-c".into(), adapter::expand(script, &vars)],
    };
    if argv.is_empty() {
        return Err(AdapterRunError::Spawn(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the adapter's argv is empty",
        )));
    }
    Ok(argv)
}

/// The adapter as a one-off container of the Sandbox image (its limits and internal network, see
/// `belay_sandbox::oneoff`), in a directory of the container's own named like `dir` and holding
/// the job file, brought back to `dir` under `work_root` when it ends. Nothing of the worker's
/// filesystem is mounted: the Docker Engine may be another host's.
fn one_off(spec: &AdapterSpec, mut job: JobFile, dir: &Path, work_root: &Path) -> Result<OneOff, AdapterRunError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| AdapterRunError::Prepare(io::Error::other("the output directory has no UTF-8 name")))?
        .to_owned();
    let container_dir = format!("{}/{name}", belay_sandbox::oneoff::ONE_OFF_ROOT);
    job.output_dir = container_dir.clone();
    job.manifest = format!("{container_dir}/{MANIFEST_FILE}");
    let job_file = serde_json::to_vec_pretty(&job).map_err(|e| AdapterRunError::Prepare(e.into()))?;
    Ok(OneOff {
        name: format!("belay-job-{}-a{}", job.job_id, job.attempt),
        role: "harness-job".to_owned(),
        key: job.job_id.to_string(),
        argv: argv(spec, &job)?,
        dir: name,
        files: vec![("job.json".to_owned(), job_file)],
        collect_into: Some(work_root.to_path_buf()),
        env: adapter::environment(&job).into_iter().collect(),
        timeout: Duration::from_secs(spec.timeout_seconds()),
    })
}

/// At most [`TAIL_BYTES`] of a captured stream, the end kept.
fn tail_of(text: &str) -> String {
    let mut tail = VecDeque::new();
    keep_tail(&mut tail, text.as_bytes());
    let (a, b) = tail.as_slices();
    String::from_utf8_lossy(&[a, b].concat()).into_owned()
}

struct Ran {
    end: ProcessEnd,
    duration: Duration,
    stdout_tail: String,
    stderr_tail: String,
}

async fn run_process(
    mut cmd: tokio::process::Command,
    timeout_seconds: u64,
    on_tick: &mut impl FnMut(),
    mut cancelled: Pin<&mut impl Future<Output = ()>>,
) -> Result<Ran, AdapterRunError> {
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(AdapterRunError::Spawn)?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| AdapterRunError::Spawn(io::Error::other("the adapter has no usable process id")))?;
    let mut group = ProcessGroup {
        pgid: Pid::from_raw(pid),
        killed: false,
        lifeline: child.stdin.take(),
    };
    let stdout = Capture::start(child.stdout.take());
    let stderr = Capture::start(child.stderr.take());

    // An out-of-range timeout (validation rejects them) waits for a very long time, not a panic.
    let deadline = started
        .checked_add(Duration::from_secs(timeout_seconds))
        .unwrap_or_else(|| started + Duration::from_secs(100 * 365 * 24 * 3600));
    let mut timeout = pin!(tokio::time::sleep_until(deadline));
    let mut ticker = ticker();

    let end = loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(AdapterRunError::Wait)?;
                // The adapter is done; anything it left running in its group is a straggler that
                // would keep the pipes open and write into a directory about to be read and removed.
                group.kill();
                break match status.code() {
                    Some(code) => ProcessEnd::Exited(code),
                    None => ProcessEnd::Killed,
                };
            }
            () = &mut timeout => {
                // Killed before the leader is reaped, so its pid (the group id) cannot be reused
                // by an unrelated process in between.
                group.kill();
                child.wait().await.map_err(AdapterRunError::Wait)?;
                break ProcessEnd::TimedOut;
            }
            () = cancelled.as_mut() => {
                group.kill();
                if let Err(e) = child.wait().await {
                    warn!(error = %e, "could not reap a cancelled adapter");
                }
                return Err(AdapterRunError::Cancelled);
            }
            _ = ticker.tick() => on_tick(),
        }
    };
    let duration = started.elapsed();

    let grace = Instant::now() + PIPE_GRACE;
    Ok(Ran {
        end,
        duration,
        stdout_tail: stdout.finish(grace).await,
        stderr_tail: stderr.finish(grace).await,
    })
}

fn ticker() -> Interval {
    let mut ticker = tokio::time::interval_at(Instant::now() + TICK, TICK);
    // A late tick is a late heartbeat; a burst of catch-up heartbeats would say nothing more.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

/// Runs `work` while ticking, giving up when `cancelled` resolves.
async fn ticking<T>(
    work: impl Future<Output = T>,
    on_tick: &mut impl FnMut(),
    mut cancelled: Pin<&mut impl Future<Output = ()>>,
) -> Result<T, AdapterRunError> {
    let mut work = pin!(work);
    let mut ticker = ticker();
    loop {
        tokio::select! {
            out = work.as_mut() => return Ok(out),
            () = cancelled.as_mut() => return Err(AdapterRunError::Cancelled),
            _ = ticker.tick() => on_tick(),
        }
    }
}

/// The adapter's process group. Killed on drop too, so that no way out of a run (the caller
/// dropping the future included) leaves adapter processes behind; and, through `lifeline`, when
/// the worker itself dies (see [`DIE_WITH_WORKER`]).
struct ProcessGroup {
    pgid: Pid,
    killed: bool,
    /// The worker's end of the pipe the group's watcher reads; closing it kills the group.
    lifeline: Option<tokio::process::ChildStdin>,
}

impl ProcessGroup {
    fn kill(&mut self) {
        // Once is enough, and a second signal after the leader is reaped could in principle reach
        // a new group that reused the id.
        if std::mem::replace(&mut self.killed, true) {
            return;
        }
        // The signal kills the watcher too; closing its pipe first would race it to the kill.
        let lifeline = self.lifeline.take();
        match killpg(self.pgid, Signal::SIGKILL) {
            // ESRCH: the group is already empty.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                warn!(adapter.pgid = self.pgid.as_raw(), error = %e, "could not kill the adapter's process group")
            }
        }
        drop(lifeline);
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The tail of one output stream, read by a task so the adapter never blocks on a full pipe.
struct Capture {
    tail: Arc<Mutex<VecDeque<u8>>>,
    task: Option<JoinHandle<()>>,
}

impl Capture {
    fn start<R: AsyncRead + Unpin + Send + 'static>(stream: Option<R>) -> Capture {
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_BYTES)));
        let task = stream.map(|mut stream| {
            let tail = Arc::clone(&tail);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8 * 1024];
                // A read error ends the capture like EOF: the tail is diagnostic, not the outcome.
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    keep_tail(&mut tail.lock().unwrap_or_else(PoisonError::into_inner), &buf[..n]);
                }
            })
        });
        Capture { tail, task }
    }

    async fn finish(self, grace: Instant) -> String {
        if let Some(mut task) = self.task
            && tokio::time::timeout_at(grace, &mut task).await.is_err()
        {
            task.abort();
        }
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = tail.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

fn keep_tail(tail: &mut VecDeque<u8>, bytes: &[u8]) {
    let bytes = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
    let overflow = (tail.len() + bytes.len()).saturating_sub(TAIL_BYTES);
    tail.drain(..overflow);
    tail.extend(bytes);
}

enum Manifest {
    Missing,
    Text(String),
    Unusable(String),
}

async fn read_manifest(path: &Path) -> Manifest {
    let unusable = |why: &str| Manifest::Unusable(format!("{MANIFEST_FILE} {why}"));
    let file = match open_regular(path).await {
        Ok((file, _)) => file,
        Err(Refused::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Manifest::Missing,
        Err(Refused::Io(e)) => return unusable(&format!("could not be read: {e}")),
        Err(Refused::Not(why)) => return unusable(why),
    };
    let mut bytes = Vec::new();
    // `take` as well as the size check: the file could still be growing.
    if let Err(e) = file.take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut bytes).await {
        return unusable(&format!("could not be read: {e}"));
    }
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return unusable("is larger than 1 MiB");
    }
    match String::from_utf8(bytes) {
        Ok(text) => Manifest::Text(text),
        Err(_) => unusable("is not valid UTF-8"),
    }
}

/// Why a file the adapter left was not opened.
enum Refused {
    Io(io::Error),
    Not(&'static str),
}

/// Opens a regular file without following a symlink (an adapter must not be able to point the
/// worker at files outside its output directory) and without blocking on a FIFO.
async fn open_regular(path: &Path) -> Result<(tokio::fs::File, u64), Refused> {
    let meta = tokio::fs::symlink_metadata(path).await.map_err(Refused::Io)?;
    if meta.file_type().is_symlink() {
        return Err(Refused::Not("is a symlink"));
    }
    if !meta.is_file() {
        return Err(Refused::Not("is not a regular file"));
    }
    let file = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .await
        .map_err(|e| match e.raw_os_error() {
            // What O_NOFOLLOW reports when the path was swapped for a symlink after the check.
            Some(nix::libc::ELOOP) => Refused::Not("is a symlink"),
            _ => Refused::Io(e),
        })?;
    // Checked again on the open file, which is what will actually be read.
    let meta = file.metadata().await.map_err(Refused::Io)?;
    if !meta.is_file() {
        return Err(Refused::Not("is not a regular file"));
    }
    Ok((file, meta.len()))
}

/// Opens an artifact, refusing one that reaches outside the output directory through a symlinked
/// parent, or that is too big to keep.
async fn open_artifact(dir: &Path, rel: &str) -> Result<(tokio::fs::File, u64), String> {
    let mut path = PathBuf::from(dir);
    let segments: Vec<&str> = rel.split('/').collect();
    let (name, parents) = segments.split_last().ok_or("is empty")?;
    for parent in parents {
        path.push(parent);
        match tokio::fs::symlink_metadata(&path).await {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "is not inside a real directory ({parent:?} is a symlink or a file)"
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err("does not exist".into()),
            Err(e) => return Err(format!("could not be checked: {e}")),
        }
    }
    path.push(name);
    let (file, size) = open_regular(&path).await.map_err(|refused| match refused {
        Refused::Io(e) if e.kind() == io::ErrorKind::NotFound => "does not exist".to_string(),
        Refused::Io(e) => format!("could not be opened: {e}"),
        Refused::Not(why) => why.to_string(),
    })?;
    if size > MAX_ARTIFACT_BYTES {
        return Err(format!("is larger than 256 MiB ({size} bytes)"));
    }
    Ok((file, size))
}

/// Stores the listed artifacts; the inner `Err` is the reason the run fails instead.
async fn store_artifacts(
    dir: &Path,
    job: &JobFile,
    listed: &[String],
    objects: &dyn ObjectStore,
) -> Result<Result<Vec<StoredArtifact>, String>, AdapterRunError> {
    let refuse = |rel: &str, why: String| format!("artifact {rel:?} {why}");
    // Every artifact is checked before any is stored, so a failing run stores nothing.
    for rel in listed {
        if let Err(why) = open_artifact(dir, rel).await {
            return Ok(Err(refuse(rel, why)));
        }
    }
    let mut stored = Vec::with_capacity(listed.len());
    for rel in listed {
        // Opened again rather than held open from the check: 256 open files per job is too many.
        let (file, size) = match open_artifact(dir, rel).await {
            Ok(opened) => opened,
            Err(why) => return Ok(Err(refuse(rel, why))),
        };
        let key = ObjectPath::from(format!("artifacts/{}/a{}/{rel}", job.job_id, job.attempt));
        let size = upload(objects, &key, rel, file, size).await?;
        stored.push(StoredArtifact {
            path: rel.clone(),
            key: key.to_string(),
            size,
        });
    }
    Ok(Ok(stored))
}

/// Copies the file at `path` to `key` as an artifact is kept (one `put` up to 8 MiB, parts of
/// 1 MiB, 4 in flight, above), returning how many bytes were copied.
pub async fn store_file(objects: &dyn ObjectStore, key: &str, path: &Path) -> Result<u64, AdapterRunError> {
    let read_err = |source| AdapterRunError::ReadArtifact {
        path: path.display().to_string(),
        source,
    };
    let file = tokio::fs::File::open(path).await.map_err(read_err)?;
    let size = file.metadata().await.map_err(read_err)?.len();
    upload(objects, &ObjectPath::from(key), &path.display().to_string(), file, size).await
}

/// Copies `size` bytes of `file` to `key`, returning how many were copied.
async fn upload(
    objects: &dyn ObjectStore,
    key: &ObjectPath,
    rel: &str,
    file: tokio::fs::File,
    size: u64,
) -> Result<u64, AdapterRunError> {
    let read_err = |source| AdapterRunError::ReadArtifact {
        path: rel.to_string(),
        source,
    };
    let store_err = |source| AdapterRunError::Store {
        path: rel.to_string(),
        source,
    };
    // Only the size that passed the check is copied, even if the file has grown since.
    let mut reader = file.take(size);
    if size <= SINGLE_PUT_BYTES {
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        reader.read_to_end(&mut bytes).await.map_err(read_err)?;
        let copied = bytes.len() as u64;
        objects.put(key, bytes.into()).await.map_err(store_err)?;
        return Ok(copied);
    }
    let mut upload = object_store::WriteMultipart::new(objects.put_multipart(key).await.map_err(store_err)?);
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    let mut copied = 0u64;
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                // Best effort: the read error is the one worth reporting.
                let _ = upload.abort().await;
                return Err(read_err(e));
            }
        };
        if let Err(e) = upload.wait_for_capacity(UPLOAD_CONCURRENCY).await {
            let _ = upload.abort().await;
            return Err(store_err(e));
        }
        upload.write(&buf[..n]);
        copied += n as u64;
    }
    upload.finish().await.map_err(store_err)?;
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use belay_domain::job::{CasePin, Combination};
    use object_store::local::LocalFileSystem;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tempfile::TempDir;

    /// A work root, an object store and a place for files the test (not the adapter) owns.
    struct Rig {
        scratch: TempDir,
        work_root: PathBuf,
        objects: Arc<dyn ObjectStore>,
    }

    /// What the worker's command passes down: the test process's own PATH, HOME, LANG, TMPDIR.
    fn inherited() -> InheritedEnv {
        InheritedEnv::from_lookup(belay_testkit::var_os)
    }

    fn rig() -> Rig {
        let scratch = tempfile::tempdir().unwrap();
        let work_root = scratch.path().join("work");
        let store_root = scratch.path().join("store");
        std::fs::create_dir_all(&store_root).unwrap();
        let objects: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(&store_root).unwrap());
        Rig {
            scratch,
            work_root,
            objects,
        }
    }

    impl Rig {
        fn owned(&self, name: &str) -> PathBuf {
            self.scratch.path().join(name)
        }

        async fn run(&self, spec: &AdapterSpec, job: JobFile) -> Result<AdapterRun, AdapterRunError> {
            run_adapter(
                spec,
                job,
                &self.work_root,
                Arc::clone(&self.objects),
                &inherited(),
                || {},
                std::future::pending(),
            )
            .await
        }

        async fn object(&self, key: &str) -> Vec<u8> {
            let got = self.objects.get(&ObjectPath::from(key)).await.unwrap();
            got.bytes().await.unwrap().to_vec()
        }
    }

    fn job(id: &str) -> JobFile {
        JobFile {
            job_id: id.into(),
            attempt: 2,
            case: CasePin {
                slug: "tetris".into(),
                version: "1.0.0".into(),
                variant: "base".into(),
                engine: "none".into(),
            },
            combination: Combination::Harness {
                harness: "claude-code".into(),
                model: "m-large".into(),
                provider: None,
            },
            gg_config_name: None,
            capabilities: None,
            output_dir: "ignored".into(),
            manifest: "ignored".into(),
        }
    }

    fn script(script: &str, timeout_seconds: u64) -> AdapterSpec {
        AdapterSpec::Script {
            script: script.into(),
            timeout_seconds,
            sandbox: false,
        }
    }

    fn failure(run: &AdapterRun) -> &str {
        match &run.outcome {
            AdapterOutcome::Failed { reason, .. } => reason,
            other => panic!("expected a failed run, got {other:?}"),
        }
    }

    /// Whether `pid` is gone. A SIGKILLed process lingers as a zombie until its new parent reaps
    /// it, and a container's pid 1 may never do so; a zombie runs nothing, so it counts as gone.
    fn is_gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // The state follows the parenthesised command name.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    async fn wait_until_gone(pid: i32) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !is_gone(pid) {
            assert!(Instant::now() < deadline, "process {pid} is still running");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The pid a script wrote to `path`, once it has written a whole line.
    async fn written_pid(path: &Path) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Some(line) = text.strip_suffix('\n')
            {
                return line.trim().parse().unwrap();
            }
            assert!(Instant::now() < deadline, "{} was never written", path.display());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The worker's death is the closing of its end of the lifeline (the kernel closes it
    /// whatever kills the worker): the whole group goes, the adapter's children included.
    #[tokio::test]
    async fn closing_the_workers_lifeline_kills_the_adapters_whole_process_group() {
        let rig = rig();
        let pid_file = rig.owned("child.pid");
        let spec = script(&format!("sleep 300 & echo $! > {}; wait", pid_file.display()), 600);
        let mut j = job("job_lifeline");
        j.output_dir = rig.scratch.path().display().to_string();
        let mut cmd = command(&spec, &j, &inherited()).unwrap();
        cmd.current_dir(rig.scratch.path());
        let mut child = cmd.spawn().unwrap();
        let leader = i32::try_from(child.id().unwrap()).unwrap();
        let grandchild = written_pid(&pid_file).await;
        assert!(!is_gone(grandchild));
        drop(child.stdin.take());
        let closed = Instant::now();
        let status = child.wait().await.unwrap();
        wait_until_gone(grandchild).await;
        assert!(closed.elapsed() < Duration::from_secs(1), "took {:?}", closed.elapsed());
        assert!(status.code().is_none(), "the leader was killed, not exited: {status:?}");
        assert!(is_gone(leader));
    }

    #[tokio::test]
    async fn a_completed_run_stores_its_artifacts_and_removes_the_output_directory() {
        let rig = rig();
        let spec = script(
            r#"mkdir build && printf '<h1>hi</h1>' > build/index.html
echo building
printf '{"status":"completed","loaded":true,"artifacts":["build/index.html"]}' > manifest.json"#,
            30,
        );

        let run = rig.run(&spec, job("job_t1")).await.unwrap();

        assert_eq!(
            run.outcome,
            AdapterOutcome::Completed {
                loaded: true,
                artifacts: vec!["build/index.html".into()]
            }
        );
        assert_eq!(
            run.artifacts,
            vec![StoredArtifact {
                path: "build/index.html".into(),
                key: "artifacts/job_t1/a2/build/index.html".into(),
                size: 11,
            }]
        );
        assert_eq!(rig.object("artifacts/job_t1/a2/build/index.html").await, b"<h1>hi</h1>");
        assert_eq!(run.stdout_tail, "building\n");
        assert!(!rig.work_root.join("job_t1-a2").exists());
    }

    #[tokio::test]
    async fn a_nonzero_exit_fails_even_with_a_completed_manifest() {
        let rig = rig();
        let spec = script(
            r#"printf '{"status":"completed","loaded":true}' > manifest.json; echo broke >&2; exit 3"#,
            30,
        );

        let run = rig.run(&spec, job("job_t2")).await.unwrap();

        assert!(failure(&run).contains("code 3"), "{run:?}");
        assert!(run.artifacts.is_empty());
        assert_eq!(run.stderr_tail, "broke\n");
    }

    #[tokio::test]
    async fn exit_zero_without_a_manifest_fails() {
        let rig = rig();

        let run = rig.run(&script("exit 0", 30), job("job_t3")).await.unwrap();

        assert!(failure(&run).contains(MANIFEST_FILE), "{run:?}");
    }

    #[tokio::test]
    async fn a_manifest_listing_a_missing_artifact_fails_naming_it() {
        let rig = rig();
        let spec = script(
            r#"printf x > here.txt
printf '{"status":"completed","artifacts":["here.txt","gone.txt"]}' > manifest.json"#,
            30,
        );

        let run = rig.run(&spec, job("job_t4")).await.unwrap();

        assert!(failure(&run).contains("gone.txt"), "{run:?}");
        assert!(run.artifacts.is_empty());
        // Nothing is stored for a run that fails over its artifacts.
        assert!(
            rig.objects
                .get(&ObjectPath::from("artifacts/job_t4/a2/here.txt"))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn an_artifact_that_is_a_symlink_fails_naming_it() {
        let rig = rig();
        let spec = script(
            r#"ln -s /etc/passwd secrets.txt
printf '{"status":"completed","artifacts":["secrets.txt"]}' > manifest.json"#,
            30,
        );
        let through_parent = script(
            r#"ln -s /etc sneaky
printf '{"status":"completed","artifacts":["sneaky/passwd"]}' > manifest.json"#,
            30,
        );

        let run = rig.run(&spec, job("job_t5")).await.unwrap();
        let run_through_parent = rig.run(&through_parent, job("job_t5b")).await.unwrap();

        assert!(
            failure(&run).contains("secrets.txt") && failure(&run).contains("symlink"),
            "{run:?}"
        );
        assert!(
            failure(&run_through_parent).contains("sneaky/passwd"),
            "{run_through_parent:?}"
        );
    }

    #[tokio::test]
    async fn a_manifest_that_is_not_a_regular_file_fails() {
        let rig = rig();

        let run = rig
            .run(&script("mkfifo manifest.json", 30), job("job_t6"))
            .await
            .unwrap();

        assert!(failure(&run).contains("not a regular file"), "{run:?}");
    }

    #[tokio::test]
    async fn the_jobs_environment_and_job_file_reach_the_adapter() {
        let rig = rig();
        let spec = script(
            r#"printf '%s|%s|%s' "$BELAY_JOB_ID" "$BELAY_MODEL" "$BELAY_CASE_SLUG" > env.txt
cp "$BELAY_JOB_FILE" job-copy.json
printf '{"status":"completed","artifacts":["env.txt","job-copy.json"]}' > manifest.json"#,
            30,
        );
        let run = rig.run(&spec, job("job_t7")).await.unwrap();

        assert!(matches!(run.outcome, AdapterOutcome::Completed { .. }), "{run:?}");
        let env = rig.object("artifacts/job_t7/a2/env.txt").await;
        assert_eq!(String::from_utf8(env).unwrap(), "job_t7|m-large|tetris");
        let copied: JobFile = serde_json::from_slice(&rig.object("artifacts/job_t7/a2/job-copy.json").await).unwrap();
        let dir = std::path::absolute(rig.work_root.join("job_t7-a2")).unwrap();
        assert_eq!(copied.job_id, "job_t7");
        assert_eq!(copied.output_dir, dir.to_str().unwrap());
        assert_eq!(copied.manifest, dir.join(MANIFEST_FILE).to_str().unwrap());
    }

    #[tokio::test]
    async fn the_adapter_does_not_inherit_the_workers_environment() {
        let rig = rig();
        // Every process has some variable outside the pass-through list (CARGO_* under cargo
        // test); the adapter must see none of them.
        let allowed = PASSED_THROUGH_ENV
            .iter()
            .map(|k| format!("-e '^{k}='"))
            .collect::<Vec<_>>()
            .join(" ");
        let spec = script(
            &format!(
                r#"env | grep -v '^BELAY_' | grep -v '^PWD=' | grep -v '^SHLVL=' | grep -v '^_=' | grep -v {allowed} > leaked.txt
printf '{{"status":"completed","artifacts":["leaked.txt"]}}' > manifest.json"#
            ),
            30,
        );
        assert!(
            belay_testkit::vars()
                .iter()
                .any(|(k, _)| !PASSED_THROUGH_ENV.contains(&k.as_str()))
        );

        let run = rig.run(&spec, job("job_t8")).await.unwrap();

        assert!(matches!(run.outcome, AdapterOutcome::Completed { .. }), "{run:?}");
        let leaked = String::from_utf8(rig.object("artifacts/job_t8/a2/leaked.txt").await).unwrap();
        assert_eq!(leaked, "");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_tree() {
        let rig = rig();
        let pid_file = rig.owned("grandchild.pid");
        let spec = script(&format!("sleep 300 & echo $! > '{}'; sleep 300", pid_file.display()), 1);

        let run = rig.run(&spec, job("job_t9")).await.unwrap();

        assert!(failure(&run).contains("timeout"), "{run:?}");
        wait_until_gone(written_pid(&pid_file).await).await;
        assert!(!rig.work_root.join("job_t9-a2").exists());
    }

    #[tokio::test]
    async fn cancelling_kills_the_whole_process_tree_and_reports_cancelled() {
        let rig = rig();
        let pid_file = rig.owned("grandchild.pid");
        let spec = script(
            &format!("sleep 300 & echo $! > '{}'; sleep 300", pid_file.display()),
            300,
        );
        // Cancel only once the grandchild exists, so the test is about killing it.
        let cancel = {
            let pid_file = pid_file.clone();
            async move {
                written_pid(&pid_file).await;
            }
        };

        let result = run_adapter(
            &spec,
            job("job_t10"),
            &rig.work_root,
            Arc::clone(&rig.objects),
            &inherited(),
            || {},
            cancel,
        )
        .await;

        assert!(matches!(result, Err(AdapterRunError::Cancelled)), "{result:?}");
        wait_until_gone(written_pid(&pid_file).await).await;
        assert!(!rig.work_root.join("job_t10-a2").exists());
    }

    #[tokio::test]
    async fn the_caller_is_ticked_while_the_adapter_runs() {
        let rig = rig();
        let release = rig.owned("release");
        // The adapter only finishes once it has been ticked, and times out otherwise.
        let spec = script(
            &format!(
                r#"while [ ! -e '{}' ]; do sleep 0.05; done
printf '{{"status":"completed"}}' > manifest.json"#,
                release.display()
            ),
            10,
        );
        let ticks = AtomicUsize::new(0);
        let on_tick = || {
            ticks.fetch_add(1, Ordering::SeqCst);
            std::fs::write(&release, b"").unwrap();
        };

        let run = run_adapter(
            &spec,
            job("job_t11"),
            &rig.work_root,
            Arc::clone(&rig.objects),
            &inherited(),
            on_tick,
            std::future::pending(),
        )
        .await
        .unwrap();

        assert!(matches!(run.outcome, AdapterOutcome::Completed { .. }), "{run:?}");
        assert!(ticks.load(Ordering::SeqCst) >= 1);
    }

    #[tokio::test]
    async fn a_command_adapters_placeholders_expand() {
        let rig = rig();
        let spec = AdapterSpec::Command {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                r#"printf %s "$1" > model.txt; cp "$2" job-copy.json; printf '{"status":"completed","artifacts":["model.txt","job-copy.json"]}' > manifest.json"#.into(),
                "adapter".into(),
                "--model={model}".into(),
                "{job_file}".into(),
            ],
            timeout_seconds: 30,
            sandbox: false,
        };

        let run = rig.run(&spec, job("job_t12")).await.unwrap();

        assert!(matches!(run.outcome, AdapterOutcome::Completed { .. }), "{run:?}");
        assert_eq!(rig.object("artifacts/job_t12/a2/model.txt").await, b"--model=m-large");
        let copied: JobFile = serde_json::from_slice(&rig.object("artifacts/job_t12/a2/job-copy.json").await).unwrap();
        assert_eq!(copied.job_id, "job_t12");
    }

    #[tokio::test]
    async fn an_artifact_too_big_for_one_put_is_stored_whole() {
        let rig = rig();
        let size = SINGLE_PUT_BYTES + 3 * 1024 * 1024 + 7;
        let spec = script(
            &format!(
                r#"head -c {size} /dev/zero | tr '\0' q > big.bin
printf '{{"status":"completed","artifacts":["big.bin"]}}' > manifest.json"#
            ),
            60,
        );

        let run = rig.run(&spec, job("job_t15")).await.unwrap();

        assert_eq!(run.artifacts.len(), 1, "{run:?}");
        assert_eq!(run.artifacts[0].size, size);
        let stored = rig.object("artifacts/job_t15/a2/big.bin").await;
        assert_eq!(stored.len() as u64, size);
        assert!(stored.iter().all(|&b| b == b'q'));
    }

    #[tokio::test]
    async fn an_artifact_over_256_mib_fails_naming_it() {
        let rig = rig();
        // Sparse, so the test costs no disk and no time.
        let spec = script(
            &format!(
                r#"truncate -s {} huge.bin
printf '{{"status":"completed","artifacts":["huge.bin"]}}' > manifest.json"#,
                MAX_ARTIFACT_BYTES + 1
            ),
            30,
        );

        let run = rig.run(&spec, job("job_t16")).await.unwrap();

        assert!(
            failure(&run).contains("huge.bin") && failure(&run).contains("256 MiB"),
            "{run:?}"
        );
    }

    #[tokio::test]
    async fn a_chatty_adapter_keeps_only_the_tail_of_its_output() {
        let rig = rig();
        let spec = script(r#"head -c 100000 /dev/zero | tr '\0' x; echo END; exit 1"#, 30);

        let run = rig.run(&spec, job("job_t13")).await.unwrap();

        assert_eq!(run.stdout_tail.len(), TAIL_BYTES);
        assert!(run.stdout_tail.ends_with("xxEND\n"));
    }

    #[tokio::test]
    async fn a_job_id_that_could_escape_the_work_root_is_refused() {
        let rig = rig();

        let result = rig.run(&script("exit 0", 30), job("../job_t14")).await;

        assert!(matches!(result, Err(AdapterRunError::InvalidJobId(_))), "{result:?}");
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_across_writes() {
        let mut tail = VecDeque::new();
        keep_tail(&mut tail, &vec![b'a'; TAIL_BYTES - 1]);
        keep_tail(&mut tail, b"bc");
        assert_eq!(tail.len(), TAIL_BYTES);
        assert_eq!(tail.front(), Some(&b'a'));
        assert_eq!(tail.iter().rev().take(2).copied().collect::<Vec<_>>(), b"cb");
        keep_tail(&mut tail, &vec![b'z'; TAIL_BYTES + 5]);
        assert!(tail.iter().all(|&b| b == b'z') && tail.len() == TAIL_BYTES);
    }

    /// An adapter marked `sandbox` runs in a container of the Sandbox image on an internal network,
    /// still reads its job and writes its manifest and artifacts in its output directory, and a
    /// timeout kills it there too. Needs the Docker Engine and the Sandbox image.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sandboxed_adapter_runs_in_a_container_and_keeps_its_artifacts() {
        let rig = rig();
        let tag = format!("belay-test-adapter-{}", std::process::id());
        let config = belay_sandbox::SandboxConfig {
            network: tag.clone(),
            extra_labels: [("belay.test".to_owned(), "1".to_owned())].into(),
            ..belay_sandbox::SandboxConfig::from_lookup(belay_testkit::var).unwrap()
        };
        let sandboxes = Sandboxes::connect(config).await.unwrap();
        // Nothing of the worker's filesystem is in the container: the Engine may be another host's.
        let spec = AdapterSpec::Script {
            script: format!(
                "set -e\ntest ! -e {}\n{}",
                rig.work_root.display(),
                r#"test -f /.dockerenv
grep -q job_t20 "$BELAY_JOB_FILE"
if timeout 3 bash -c ': > /dev/tcp/1.1.1.1/53' 2>/dev/null; then echo reached > out.txt; else echo isolated > out.txt; fi
printf '{"status":"completed","loaded":true,"artifacts":["out.txt"]}' > "$BELAY_MANIFEST""#
            ),
            timeout_seconds: 60,
            sandbox: true,
        };
        let without = run_adapter(
            &spec,
            job("job_t20"),
            &rig.work_root,
            Arc::clone(&rig.objects),
            &inherited(),
            || {},
            std::future::pending(),
        )
        .await;
        assert!(matches!(without, Err(AdapterRunError::NoSandbox)), "{without:?}");

        let run = run_adapter_in(
            &spec,
            job("job_t20"),
            &rig.work_root,
            Arc::clone(&rig.objects),
            Host {
                sandbox: Some(&sandboxes),
                env: &inherited(),
            },
            || {},
            std::future::pending(),
        )
        .await
        .unwrap();
        let slow = AdapterSpec::Script {
            script: "sleep 30".into(),
            timeout_seconds: 2,
            sandbox: true,
        };
        let timed_out = run_adapter_in(
            &slow,
            job("job_t21"),
            &rig.work_root,
            Arc::clone(&rig.objects),
            Host {
                sandbox: Some(&sandboxes),
                env: &inherited(),
            },
            || {},
            std::future::pending(),
        )
        .await
        .unwrap();
        let leftover = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter", "name=belay-job-job_t2"])
            .output()
            .unwrap();
        let _ = std::process::Command::new("docker")
            .args(["network", "rm", &tag])
            .output();

        assert!(
            matches!(run.outcome, AdapterOutcome::Completed { loaded: true, .. }),
            "{run:?}"
        );
        assert_eq!(rig.object("artifacts/job_t20/a2/out.txt").await, b"isolated\n");
        assert!(
            matches!(timed_out.outcome, AdapterOutcome::Failed { .. }),
            "{timed_out:?}"
        );
        assert!(
            String::from_utf8_lossy(&leftover.stdout).trim().is_empty(),
            "a job container was left behind"
        );
    }
}
