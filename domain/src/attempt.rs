//! Attempts and their failure classes: what an adapter's failure means for the job.
//!
//! A retried task failure skews a result and a provider past its spend cap must not look like a
//! model scoring zero, so every failed attempt carries a class, said by the adapter (its
//! manifest's `failureClass`, or its exit code) and `infra` when it says none:
//!
//! - `infra`: the infrastructure failed; retried as a new attempt (a new job, as before).
//! - `task`: the agent failed the task; the job completes with a failed result, counted as
//!   evidence, never retried.
//! - `provider_rate_limited`: the provider throttled the key; the same job runs the adapter again
//!   after a backoff, without using up its attempts.
//! - `provider_refused`: a bad key or a spend cap reached; not retried, and the plan or ladder
//!   that launched the job is paused with an event naming the provider and the cause.

use crate::ids::JobId;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// How an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The default for an adapter that reports none.
    #[default]
    Infra,
    Task,
    ProviderRateLimited,
    ProviderRefused,
}

impl FailureClass {
    pub const ALL: [FailureClass; 4] = [
        FailureClass::Infra,
        FailureClass::Task,
        FailureClass::ProviderRateLimited,
        FailureClass::ProviderRefused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Infra => "infra",
            FailureClass::Task => "task",
            FailureClass::ProviderRateLimited => "provider_rate_limited",
            FailureClass::ProviderRefused => "provider_refused",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The class an adapter's exit code says, for an adapter that writes no manifest class:
    /// 75 (`EX_TEMPFAIL`) is a rate limit, 77 (`EX_NOPERM`) a refusal, 65 (`EX_DATAERR`) a task
    /// failure; any other code says nothing.
    pub fn of_exit(code: i32) -> Option<Self> {
        match code {
            EXIT_TASK => Some(FailureClass::Task),
            EXIT_RATE_LIMITED => Some(FailureClass::ProviderRateLimited),
            EXIT_REFUSED => Some(FailureClass::ProviderRefused),
            _ => None,
        }
    }
}

/// The exit code that says the agent failed the task.
pub const EXIT_TASK: i32 = 65;
/// The exit code that says the provider rate-limited the run.
pub const EXIT_RATE_LIMITED: i32 = 75;
/// The exit code that says the provider refused the run (bad key, spend cap).
pub const EXIT_REFUSED: i32 = 77;

/// How many rate-limited attempts one job waits out before it fails as `infra` (so a provider
/// that never lets up does not hold a slot for ever).
pub const MAX_RATE_LIMITED: u32 = 20;
/// The first backoff after a rate limit when the adapter names no `retryAfterSeconds`; each
/// further one doubles, up to [`MAX_BACKOFF_SECONDS`].
pub const FIRST_BACKOFF_SECONDS: u64 = 30;
pub const MAX_BACKOFF_SECONDS: u64 = 600;
/// The longest wait an adapter's `retryAfterSeconds` may ask for.
pub const MAX_RETRY_AFTER_SECONDS: u64 = 3600;

/// How long to wait before the `waited`-th (0-based) rate-limited retry: what the adapter asked
/// for (clamped to 1 s – 1 h), else an exponential backoff from 30 s capped at 10 min.
pub fn rate_limit_backoff(waited: u32, retry_after: Option<u64>) -> u64 {
    match retry_after {
        Some(s) => s.clamp(1, MAX_RETRY_AFTER_SECONDS),
        None => FIRST_BACKOFF_SECONDS
            .saturating_mul(1u64 << waited.min(16))
            .min(MAX_BACKOFF_SECONDS),
    }
}

/// What the run does after an attempt failed with `class`, having already waited out
/// `rate_limited` rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Fail the job; an infrastructure failure goes to the retry rule (a new attempt).
    Fail { infrastructure: bool },
    /// Complete the job with a failed result (evidence; never retried).
    CompleteAsTaskFailure,
    /// Wait this many seconds and run the adapter again, same job.
    Backoff { seconds: u64 },
    /// Fail without retry and pause the job's plan or ladder.
    Refused,
}

pub fn after_failure(class: FailureClass, rate_limited: u32, retry_after: Option<u64>) -> AfterFailure {
    match class {
        FailureClass::Infra => AfterFailure::Fail { infrastructure: true },
        FailureClass::Task => AfterFailure::CompleteAsTaskFailure,
        FailureClass::ProviderRefused => AfterFailure::Refused,
        FailureClass::ProviderRateLimited if rate_limited >= MAX_RATE_LIMITED => {
            AfterFailure::Fail { infrastructure: true }
        }
        FailureClass::ProviderRateLimited => AfterFailure::Backoff {
            seconds: rate_limit_backoff(rate_limited, retry_after),
        },
    }
}

/// One attempt of a job's adapter, as kept and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The job this attempt ran (a retry is a job of its own).
    pub job_id: JobId,
    /// The attempt's number within its job, from 1.
    pub n: i64,
    /// The job's attempt number (1 for the first job, 2 for its retry …).
    pub job_attempt: i64,
    pub started_at: i64,
    pub ended_at: i64,
    /// The worker that ran it.
    pub worker: Option<String>,
    /// The adapter's exit code, when it exited.
    pub exit: Option<i64>,
    /// Absent when the attempt completed.
    pub failure_class: Option<FailureClass>,
    /// The adapter's failure message.
    pub message: Option<String>,
    /// The last lines the adapter wrote (stderr, then stdout).
    pub log_tail: Option<String>,
}

/// The most of an adapter's output an attempt keeps.
pub const LOG_TAIL_BYTES: usize = 4096;

/// The last `LOG_TAIL_BYTES` of `text`, cut at a character boundary.
pub fn log_tail(text: &str) -> &str {
    if text.len() <= LOG_TAIL_BYTES {
        return text;
    }
    let mut start = text.len() - LOG_TAIL_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adapter_that_reports_no_class_failed_on_infrastructure_and_is_retried() {
        assert_eq!(FailureClass::default(), FailureClass::Infra);
        assert_eq!(
            after_failure(FailureClass::Infra, 0, None),
            AfterFailure::Fail { infrastructure: true }
        );
        assert_eq!(FailureClass::of_exit(1), None);
    }

    #[test]
    fn a_task_failure_completes_as_evidence_and_a_refusal_pauses() {
        assert_eq!(
            after_failure(FailureClass::Task, 0, None),
            AfterFailure::CompleteAsTaskFailure
        );
        assert_eq!(
            after_failure(FailureClass::ProviderRefused, 0, None),
            AfterFailure::Refused
        );
        assert_eq!(FailureClass::of_exit(EXIT_REFUSED), Some(FailureClass::ProviderRefused));
        assert_eq!(FailureClass::of_exit(EXIT_TASK), Some(FailureClass::Task));
    }

    #[test]
    fn a_rate_limit_backs_off_as_asked_else_exponentially_and_gives_up_after_twenty() {
        assert_eq!(
            after_failure(FailureClass::ProviderRateLimited, 0, Some(2)),
            AfterFailure::Backoff { seconds: 2 }
        );
        assert_eq!(rate_limit_backoff(0, None), 30);
        assert_eq!(rate_limit_backoff(1, None), 60);
        assert_eq!(rate_limit_backoff(9, None), 600);
        assert_eq!(rate_limit_backoff(0, Some(0)), 1);
        assert_eq!(rate_limit_backoff(0, Some(99_999)), 3600);
        assert_eq!(
            after_failure(FailureClass::ProviderRateLimited, MAX_RATE_LIMITED, None),
            AfterFailure::Fail { infrastructure: true }
        );
    }

    #[test]
    fn classes_read_back_from_their_names() {
        for c in FailureClass::ALL {
            assert_eq!(FailureClass::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn a_log_tail_keeps_the_end_at_a_character_boundary() {
        let long = format!("{}é{}", "a".repeat(5000), "z".repeat(4095));
        let t = log_tail(&long);
        assert!(t.len() <= LOG_TAIL_BYTES && t.ends_with('z'));
        assert_eq!(log_tail("short"), "short");
    }
}
