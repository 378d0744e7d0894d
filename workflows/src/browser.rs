//! The verification workflow's browser step: one activity on the `belay.browser` pool that
//! reserves the browser meters, starts the composed app in the project's Sandbox with the dev
//! command, drives headless Chromium through the flow, records the Evidence (screenshots
//! included) and settles the meters. Before the [`BROWSER_CHECK`] marker the step recorded
//! `error`/`not_checked` without running anything; histories recorded then still replay so.

use crate::queues;
use belay_domain::browser::{BROWSER_CHECK_TIMEOUT_MS, MAX_BROWSER_RUNS_PER_CANDIDATE};
use belay_domain::evidence::Evidence;
use belay_domain::ids::{CandidateId, ProjectId};
use belay_domain::policy::PolicyCommands;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_macros::activity_definitions;
use temporalio_sdk::ActivityOptions;

/// The `patched` marker of the change that runs the browser check instead of recording it as
/// not available.
pub const BROWSER_CHECK: &str = "verification-browser-check";

/// Room on top of the check's own timeout for the preview start, the kill and the record.
const MARGIN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserCheckRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    /// The Evidence attempt (the workflow's, not the activity's).
    pub attempt: u32,
    pub commands: PolicyCommands,
}

/// Browser activities on the `belay.browser` queue.
pub struct VerifyBrowserApi;

#[activity_definitions]
impl VerifyBrowserApi {
    /// Runs one browser session and records its Evidence row and object (once per attempt).
    #[activity(name = "browser.verify_browser")]
    pub fn check(input: BrowserCheckRequest) -> Result<Evidence, ActivityError> {
        unimplemented!()
    }
}

/// The marker, re-exported for the implementation.
pub mod browser_definitions {
    pub use super::verify_browser_api::Check;
}

/// The browser activity: the check's timeout plus room, heartbeating, and at most as many
/// attempts as a Candidate has browser runs (each attempt reserves one).
pub fn options() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_millis(BROWSER_CHECK_TIMEOUT_MS) + MARGIN)
        .task_queue(queues::BROWSER.to_string())
        .heartbeat_timeout(crate::options::HEARTBEAT_TIMEOUT)
        .retry_policy(
            temporalio_common::RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .backoff_coefficient(2.0)
                .maximum_interval(Duration::from_secs(10))
                .maximum_attempts(MAX_BROWSER_RUNS_PER_CANDIDATE)
                .non_retryable_error_types([crate::options::FATAL])
                .build(),
        )
        .build()
}
