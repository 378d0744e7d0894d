//! Task queues: one per activity type, so each worker pool scales on its own.

/// Workflow tasks (DispatcherWorkflow, RunWorkflow).
pub const WORKFLOWS: &str = "belay.workflows";
/// Database activities.
pub const DB: &str = "belay.db";
/// Git activities (gix, bare repositories).
pub const GIT: &str = "belay.git";
/// Sandbox activities (Docker).
pub const SANDBOX: &str = "belay.sandbox";
/// Model calls.
pub const LLM: &str = "belay.llm";
/// Headless browser checks.
pub const BROWSER: &str = "belay.browser";
/// Harness adapters.
pub const HARNESS: &str = "belay.harness";

/// Every pool a worker can serve, by its `--pools` name.
pub const POOLS: [(&str, &str); 7] = [
    ("workflows", WORKFLOWS),
    ("db", DB),
    ("git", GIT),
    ("sandbox", SANDBOX),
    ("llm", LLM),
    ("browser", BROWSER),
    ("harness", HARNESS),
];

/// The id of the one dispatcher.
pub const DISPATCHER_ID: &str = "dispatcher";

/// The workflow id of a job's run.
pub fn run_workflow_id(job_id: &str) -> String {
    format!("run-{job_id}")
}
