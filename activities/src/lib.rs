//! Activity implementations: thin adapters from the contracts in `belay_workflows::contracts`
//! to the store, the harness adapter runner and (later) git, the sandbox and the model API.
//!
//! Retryable versus fatal is decided here, once: database outages retry, bad input does not.

pub mod adapter_run;
pub mod edit_session;
pub mod git;
pub mod harness;
pub mod project;
pub mod sandbox;
pub mod source_objects;
pub mod store;
pub mod workspace;

use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;

/// A failure the activity's retry policy should retry (the next attempt may succeed).
pub(crate) fn retryable(e: impl std::error::Error + Send + Sync + 'static) -> ActivityError {
    ActivityError::application(ApplicationFailure::new(e))
}

/// A failure no retry can fix.
pub(crate) fn fatal(e: impl std::error::Error + Send + Sync + 'static) -> ActivityError {
    ActivityError::application(ApplicationFailure::non_retryable(e))
}

/// A store failure: a database outage or a transient conflict retries, bad input does not.
pub(crate) fn store_error(e: belay_store::StoreError) -> ActivityError {
    if e.is_transient() || matches!(e, belay_store::StoreError::Database(_)) {
        retryable(e)
    } else {
        fatal(e)
    }
}

pub(crate) fn git_error(e: git::GitError) -> ActivityError {
    if e.is_retryable() { retryable(e) } else { fatal(e) }
}

pub(crate) fn sandbox_error(e: sandbox::SandboxError) -> ActivityError {
    if e.is_retryable() { retryable(e) } else { fatal(e) }
}

/// Unix seconds now.
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
