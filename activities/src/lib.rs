//! Activity implementations: thin adapters from the contracts in `belay_workflows` to the store
//! and the adapter crates (`belay-git`, `belay-sandbox`, `belay-harness`). Each activity decodes
//! its input, calls one adapter or the store, and maps the error.
//!
//! Retryable versus fatal is decided here, once: database, Docker-daemon and network errors
//! retry; bad input, merge conflicts and policy refusals do not. A fatal failure carries the
//! non-retryable error type [`FATAL`], the type every activity option in `belay_workflows::options`
//! names, so the server never retries it.

pub mod browser;
pub mod edit_session;
pub mod git;
pub mod harness;
pub mod llm;
pub mod promotion;
pub mod revocations;
pub mod sandbox;
pub mod sandbox_leases;
pub mod selection;
pub mod store;
pub mod temporal;
pub mod top_up;
pub mod verification;
pub mod workspace;

use std::future::Future;
use std::time::Duration;
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub use belay_workflows::options::FATAL;

/// A failure the activity's retry policy should retry (the next attempt may succeed).
pub(crate) fn retryable(e: impl std::error::Error + Send + Sync + 'static) -> ActivityError {
    ActivityError::application(ApplicationFailure::new(e))
}

/// A failure no retry can fix: marked non-retryable, and typed [`FATAL`].
pub(crate) fn fatal(e: impl std::error::Error + Send + Sync + 'static) -> ActivityError {
    ActivityError::application(
        ApplicationFailure::builder(e)
            .type_name(FATAL.to_owned())
            .non_retryable(true)
            .build(),
    )
}

/// A store failure: a database outage or a transient conflict retries, bad input does not.
pub(crate) fn store_error(e: belay_store::StoreError) -> ActivityError {
    if e.is_retryable() { retryable(e) } else { fatal(e) }
}

pub(crate) fn git_error(e: belay_git::GitError) -> ActivityError {
    if e.is_retryable() { retryable(e) } else { fatal(e) }
}

pub(crate) fn sandbox_error(e: belay_sandbox::SandboxError) -> ActivityError {
    if e.is_retryable() { retryable(e) } else { fatal(e) }
}

pub(crate) fn source_error(e: belay_git::source_objects::SourceObjectsError) -> ActivityError {
    if e.is_retryable() { retryable(e) } else { fatal(e) }
}

/// A message as an error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Plain(pub String);

/// How often a long activity heartbeats.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

/// Runs `work`, heartbeating every [`HEARTBEAT_EVERY`] while it runs, so the server notices a
/// worker that died mid-activity within the activity's heartbeat timeout.
pub(crate) async fn heartbeating<T>(ctx: &ActivityContext, work: impl Future<Output = T>) -> T {
    let beat = async {
        let mut every = tokio::time::interval(HEARTBEAT_EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            // A failed heartbeat is reported again by the next one; the work goes on.
            let _ = ctx.record_heartbeat(()).await;
        }
    };
    tokio::select! {
        out = work => out,
        _ = beat => unreachable!("the heartbeat loop never ends"),
    }
}

/// Whether an earlier attempt of this activity handed its command to the Sandbox (its last
/// heartbeat said so) and then its worker was lost: such a command is answered as lost, never run
/// a second time behind the caller's back.
pub(crate) fn earlier_attempt_started(ctx: &ActivityContext) -> bool {
    ctx.info().attempt > 1 && ctx.heartbeat_details().deserialize::<bool>().ok().flatten() == Some(true)
}

/// As [`heartbeating`], each heartbeat carrying whether `started` is set (the command was handed
/// to the Sandbox), so a retry after a lost worker knows (see [`earlier_attempt_started`]).
pub(crate) async fn heartbeating_started<T>(
    ctx: &ActivityContext,
    started: &std::sync::atomic::AtomicBool,
    work: impl Future<Output = T>,
) -> T {
    let beat = async {
        let mut every = tokio::time::interval(HEARTBEAT_EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            let _ = ctx
                .record_heartbeat(started.load(std::sync::atomic::Ordering::SeqCst))
                .await;
        }
    };
    tokio::select! {
        out = work => out,
        _ = beat => unreachable!("the heartbeat loop never ends"),
    }
}

/// Marks the command handed to the Sandbox, and says so in a heartbeat at once.
pub(crate) async fn mark_started(ctx: &ActivityContext, started: &std::sync::atomic::AtomicBool) {
    started.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = ctx.record_heartbeat(true).await;
}

/// The identity of this activity, the same for every attempt of it: its namespace, workflow, run
/// and activity id.
pub(crate) fn activity_identity(ctx: &ActivityContext) -> String {
    let info = ctx.info();
    format!(
        "{}/{}/{}/{}",
        info.namespace,
        info.workflow_id.as_deref().unwrap_or_default(),
        info.workflow_run_id
            .as_deref()
            .or(info.activity_run_id.as_deref())
            .unwrap_or_default(),
        info.activity_id
    )
}

/// A test-only failpoint: with `BELAY_FAILPOINT=sandbox-command-started` a worker that runs an
/// edit-session command or a workspace `run_command` sends no "started" heartbeat and kills
/// itself (SIGKILL) as soon as the command has run: a worker lost within moments of starting a
/// command, before the server heard that it had.
pub const COMMAND_STARTED: &str = "sandbox-command-started";

/// The variable that names this process's failpoint, in a build with the `failpoints` feature
/// (the `belay worker` command reads it and calls [`set_failpoint`]).
pub const FAILPOINT_ENV: &str = "BELAY_FAILPOINT";

#[cfg(feature = "failpoints")]
static FAILPOINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names this process's failpoint, once, at start. Without the `failpoints` feature (the release
/// build) it does nothing: no failpoint can be set.
pub fn set_failpoint(name: &str) {
    #[cfg(feature = "failpoints")]
    {
        let _ = FAILPOINT.set(name.to_owned());
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// Whether the failpoint `name` is set for this process. Always false without the `failpoints`
/// feature, which only the test build enables.
#[cfg(feature = "failpoints")]
pub(crate) fn failpoint(name: &str) -> bool {
    FAILPOINT.get().is_some_and(|v| v == name)
}

#[cfg(not(feature = "failpoints"))]
pub(crate) fn failpoint(_name: &str) -> bool {
    false
}

/// The failpoint's death: SIGKILL to this process, nothing flushed.
pub(crate) fn die_at(name: &str) -> ! {
    tracing::warn!("failpoint {name}: killing this worker");
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    std::process::abort()
}

/// Unix seconds now.
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
