//! Activity options: one function per kind of work, each with a bounded retry policy and the
//! timeouts that kind needs. Every policy names [`FATAL`] as non-retryable, and `belay-activities`
//! gives every failure no retry can fix exactly that type, so bad input runs once.
//!
//! The bounds: a database activity rides out a database restart of several minutes, then fails
//! (the workflow decides what a failure means); a git activity gets a few attempts; a Sandbox or
//! harness activity heartbeats, so a worker that dies mid-command is noticed within the heartbeat
//! timeout and the attempt moves to another worker.

use crate::queues;
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_sdk::{ActivityOptions, LocalActivityOptions};

/// The error type of a failure no retry can fix (bad input, a refused policy, a merge conflict).
pub const FATAL: &str = "Fatal";

/// Attempts of a database activity: with the backoff below, about eight minutes of outage.
pub const DB_ATTEMPTS: u32 = 20;
/// Attempts of a git activity.
pub const GIT_ATTEMPTS: u32 = 5;
/// Attempts of a Sandbox activity (each one heartbeats).
pub const SANDBOX_ATTEMPTS: u32 = 3;
/// How long a heartbeating activity may go without a heartbeat before its attempt is retried.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(20);

fn policy(initial: Duration, max_interval: Duration, attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .initial_interval(initial)
        .backoff_coefficient(2.0)
        .maximum_interval(max_interval)
        .maximum_attempts(attempts)
        .non_retryable_error_types([FATAL])
        .build()
}

/// A `belay.db` activity: one store call, short.
pub fn db() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(60))
        .task_queue(queues::DB.to_string())
        .retry_policy(policy(Duration::from_millis(200), Duration::from_secs(30), DB_ATTEMPTS))
        .build()
}

/// A database step run as a local activity by the workflow worker itself (the run lane's short,
/// idempotent steps): no task-queue round trip, the same bounded retries as [`db`]. Backoffs
/// longer than a few seconds become durable timers instead of holding the workflow task.
pub fn db_local() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(60))
        .retry_policy(policy(Duration::from_millis(200), Duration::from_secs(30), DB_ATTEMPTS))
        .timer_backoff_threshold(Duration::from_secs(5))
        .build()
}

/// The dispatcher's run starts (a local activity calling Temporal), since
/// [`crate::dispatcher::STARTS_OUTLIVE_REFUSALS`]: a few quick attempts, after which the
/// dispatcher waits its backstop and starts the same batch again, for as long as Temporal refuses.
pub fn starts_local() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(60))
        .retry_policy(policy(
            Duration::from_millis(200),
            Duration::from_secs(2),
            START_ATTEMPTS,
        ))
        .build()
}

/// Attempts of one [`starts_local`] activity.
pub const START_ATTEMPTS: u32 = 4;

/// The run's wake-up of the dispatcher (a local activity calling Temporal): a few quick attempts;
/// a wake-up that never arrives costs at most the dispatcher's backstop.
pub fn wake_local() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(10))
        .retry_policy(policy(Duration::from_millis(200), Duration::from_secs(2), 3))
        .build()
}

/// A `belay.git` activity that may take `timeout` (gix work on bare repositories).
pub fn git(timeout: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .task_queue(queues::GIT.to_string())
        .retry_policy(policy(
            Duration::from_millis(500),
            Duration::from_secs(30),
            GIT_ATTEMPTS,
        ))
        .build()
}

/// A `belay.sandbox` activity that may take `timeout`; it heartbeats.
pub fn sandbox(timeout: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .task_queue(queues::SANDBOX.to_string())
        .heartbeat_timeout(HEARTBEAT_TIMEOUT)
        .retry_policy(policy(
            Duration::from_secs(1),
            Duration::from_secs(10),
            SANDBOX_ATTEMPTS,
        ))
        .build()
}

/// A `belay.harness` activity (one adapter run) that may take `timeout`, with `attempts` on
/// infrastructure errors; it heartbeats every few seconds, so `heartbeat` can be short.
pub fn harness(timeout: Duration, heartbeat: Duration, attempts: u32) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .task_queue(queues::HARNESS.to_string())
        .heartbeat_timeout(heartbeat)
        .retry_policy(policy(Duration::from_millis(500), Duration::from_secs(5), attempts))
        .build()
}

/// A `belay.db` activity that is one short transaction (the promotion's compare-and-swap): a
/// worker lost in it is noticed within `timeout`, and the attempt goes to another.
pub fn db_within(timeout: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .task_queue(queues::DB.to_string())
        .retry_policy(policy(Duration::from_millis(200), Duration::from_secs(30), DB_ATTEMPTS))
        .build()
}
/// A `belay.llm` activity (model calls) that may take `timeout`: one attempt, never retried by
/// the server, so a call is never made twice behind the meters; a failure is a gap.
pub fn llm(timeout: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .task_queue(queues::LLM.to_string())
        .retry_policy(policy(Duration::from_secs(1), Duration::from_secs(1), 1))
        .build()
}
