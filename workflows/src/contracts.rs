//! Activity contracts: names, inputs and outputs. The workflows call these; `belay-activities`
//! implements them. Activity names are stable strings: renaming one breaks running histories.

use belay_domain::adapter::{AdapterOutcome, JobFile};
use belay_domain::attempt::FailureClass;
use belay_domain::catalogue::AdapterSpec;
use belay_domain::ids::{JobId, ProjectId, RunId};
use belay_domain::job::CasePin;
use belay_domain::run::Artifact;
use serde::{Deserialize, Serialize};
use temporalio_common::ActivityError;
use temporalio_macros::activity_definitions;

/// A job the dispatcher claimed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimedJob {
    pub job_id: JobId,
    pub harness: String,
    pub origin: Option<String>,
    /// The case it evaluates, `slug@version/variant/engine`: the run's `BelayCase` and its
    /// summary. Claims recorded before it was carried have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// Every model it drives, each once (a gg run's slots may bind several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// What a run learns when it takes its job from `dispatched` to `starting`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartedJob {
    /// False when the job is no longer `dispatched` (it was cancelled): the run ends.
    pub proceed: bool,
    pub job_file: Option<JobFile>,
    pub adapter: Option<AdapterSpec>,
    pub case: Option<CasePin>,
    /// The ingested version's variants and engines, or `None` if the version is not ingested.
    pub version: Option<VersionFacts>,
}

/// An ingested case version's variants and engines. Histories recorded before it was named
/// carry it as a two-element array, which reads into it the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionFacts {
    pub variants: Vec<String>,
    pub engines: Vec<String>,
}

/// What the harness adapter activity runs: the job file and the harness's adapter. Histories
/// recorded before it was named carry it as a two-element array, which reads into it the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterRun {
    pub job: JobFile,
    pub adapter: AdapterSpec,
}

/// The harness adapter's outcome with the artifacts it kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterResult {
    pub outcome: AdapterOutcome,
    pub artifacts: Vec<Artifact>,
    /// Where and how the adapter ran (absent in results recorded before attempts were kept).
    #[serde(default)]
    pub report: Option<AttemptReport>,
}

/// What the harness worker saw of one adapter run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptReport {
    /// Wall clock, ms since the epoch.
    pub started_at: i64,
    pub ended_at: i64,
    pub worker: String,
    pub exit_code: Option<i32>,
    /// The end of the adapter's stderr, then of its stdout.
    pub log_tail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteInput {
    pub job_id: JobId,
    pub loaded: bool,
    pub artifacts: Vec<Artifact>,
    /// What the adapter's manifest said the run cost (absent from the payload when nothing, as
    /// in every history recorded before budgets).
    #[serde(default, skip_serializing_if = "belay_domain::budget::Reported::is_empty")]
    pub reported: belay_domain::budget::Reported,
    /// The agent failed the task (class `task`): the adapter's message. The run is recorded as a
    /// failed result.
    #[serde(default)]
    pub task_failure: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailInput {
    pub job_id: JobId,
    pub reason: String,
    /// An infrastructure failure is retried as a new job; a pin problem is not.
    pub infrastructure: bool,
    /// The attempt's failure class (absent before failure classes: decided by `infrastructure`).
    #[serde(default)]
    pub class: Option<FailureClass>,
}

/// One attempt of a job's adapter, to keep; `n` counts the job's attempts from 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptInput {
    pub job_id: JobId,
    pub n: i64,
    pub started_at: i64,
    pub ended_at: i64,
    pub worker: Option<String>,
    pub exit: Option<i64>,
    pub class: Option<FailureClass>,
    pub message: Option<String>,
    pub log_tail: Option<String>,
}

/// How a job ended, as far as its run knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    pub status: String,
    pub run_id: Option<RunId>,
    pub retry_job_id: Option<JobId>,
}

/// Database activities, on the `belay.db` queue.
pub struct StoreApi;

#[activity_definitions]
impl StoreApi {
    /// Claims the next jobs in queue order under each harness cap (idempotent per claim key).
    #[activity(name = "db.claim")]
    pub fn claim(claim_key: String) -> Result<Vec<ClaimedJob>, ActivityError> {
        unimplemented!()
    }

    /// dispatched → starting, and everything the run needs.
    #[activity(name = "db.start_job")]
    pub fn start_job(job_id: JobId) -> Result<StartedJob, ActivityError> {
        unimplemented!()
    }

    /// starting → running. False when the job was cancelled meanwhile.
    #[activity(name = "db.mark_running")]
    pub fn mark_running(job_id: JobId) -> Result<bool, ActivityError> {
        unimplemented!()
    }

    /// running → completed with a run row (once, however often it is called).
    #[activity(name = "db.complete_job")]
    pub fn complete_job(input: CompleteInput) -> Result<Ended, ActivityError> {
        unimplemented!()
    }

    /// → failed, and the retry the rule decides on (once, however often it is called).
    #[activity(name = "db.fail_job")]
    pub fn fail_job(input: FailInput) -> Result<Ended, ActivityError> {
        unimplemented!()
    }

    /// Keeps one attempt of the job's adapter (once per job and number).
    #[activity(name = "db.record_attempt")]
    pub fn record_attempt(input: AttemptInput) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Harness adapter activities, on the `belay.harness` queue.
pub struct HarnessApi;

#[activity_definitions]
impl HarnessApi {
    /// Runs the job's adapter, heartbeating; keeps its artifacts in the object store.
    #[activity(name = "harness.run_adapter")]
    pub fn run_adapter(input: AdapterRun) -> Result<AdapterResult, ActivityError> {
        unimplemented!()
    }
}

/// The run lane's calls to Temporal itself: starting runs and waking the dispatcher. Local
/// activities of the workflows pool (they hold its client; no task queue of their own).
pub struct ClientApi;

#[activity_definitions]
impl ClientApi {
    /// Starts a RunWorkflow per claimed job (id `run-{job_id}`; one that exists already counts as
    /// started). Answers how many it started now.
    #[activity(name = "runs.start")]
    pub fn start_runs(jobs: Vec<ClaimedJob>) -> Result<u64, ActivityError> {
        unimplemented!()
    }

    /// Signals the dispatcher that something changed (a run ended and freed its slot).
    #[activity(name = "runs.wake_dispatcher")]
    pub fn wake_dispatcher(input: ()) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// The marker types implementations name in `#[activity(definition = …)]` (the macro keeps its
/// generated modules private, so they are re-exported here).
pub mod definitions {
    pub use super::client_api::{StartRuns, WakeDispatcher};
    pub use super::harness_api::RunAdapter;
    pub use super::store_api::{Claim, CompleteJob, FailJob, MarkRunning, RecordAttempt, StartJob};
}

/// A no-op activity on the `belay.db` queue, for [`crate::probe::ProbeWorkflow`].
pub struct ProbeApi;

#[activity_definitions]
impl ProbeApi {
    #[activity(name = "probe.echo")]
    pub fn echo(input: String) -> Result<String, ActivityError> {
        unimplemented!()
    }
}

/// The probe's marker type, likewise re-exported.
pub mod probe_definitions {
    pub use super::probe_api::Echo;
}

/// A canonical repository at S0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionedSource {
    pub commit: String,
    pub tree: String,
    /// How many files the index and code manifest list.
    pub files: usize,
}

/// A project's canonical repository is provisioned at `source`. Histories recorded before it was
/// named carry it as a two-element array, which reads into it the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectProvisioned {
    pub project_id: ProjectId,
    pub source: ProvisionedSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectFailure {
    pub project_id: ProjectId,
    pub error: String,
}

/// Git activities, on the `belay.git` queue.
pub struct GitApi;

#[activity_definitions]
impl GitApi {
    /// Creates the canonical repository (S0: one commit holding `.gitignore`) and writes its file
    /// index, code manifest and blobs to the object store. Idempotent.
    #[activity(name = "git.provision_project")]
    pub fn provision_project(project_id: ProjectId) -> Result<ProvisionedSource, ActivityError> {
        unimplemented!()
    }
}

/// Project records, on the `belay.db` queue.
pub struct ProjectStoreApi;

#[activity_definitions]
impl ProjectStoreApi {
    #[activity(name = "db.mark_project_provisioned")]
    pub fn mark_provisioned(input: ProjectProvisioned) -> Result<(), ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.mark_project_failed")]
    pub fn mark_failed(input: ProjectFailure) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// The project markers, likewise re-exported.
pub mod project_definitions {
    pub use super::git_api::ProvisionProject;
    pub use super::project_store_api::{MarkFailed, MarkProvisioned};
}

/// What deleting a project removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    pub repositories: usize,
    pub objects: usize,
}

/// A deleted project's repositories (forks first, canonical last) and its `source/` objects.
/// Histories recorded before it was named carry it as a two-element array, which reads into it
/// the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectSources {
    pub project_id: ProjectId,
    pub repositories: Vec<String>,
}

/// Project cleanup, on the `belay.git` queue.
pub struct CleanupApi;

#[activity_definitions]
impl CleanupApi {
    /// Deletes the named repositories (in order) and the project's `source/` objects.
    #[activity(name = "git.remove_project_sources")]
    pub fn remove_project_sources(input: ProjectSources) -> Result<Removed, ActivityError> {
        unimplemented!()
    }
}

/// Project cleanup records, on the `belay.db` queue.
pub struct CleanupStoreApi;

#[activity_definitions]
impl CleanupStoreApi {
    /// The repository names the project's rows derive, forks first, canonical last.
    #[activity(name = "db.project_repository_names")]
    pub fn repository_names(project_id: ProjectId) -> Result<Vec<String>, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.delete_project_rows")]
    pub fn delete_rows(project_id: ProjectId) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// The cleanup markers, likewise re-exported.
pub mod cleanup_definitions {
    pub use super::cleanup_api::RemoveProjectSources;
    pub use super::cleanup_store_api::{DeleteRows, RepositoryNames};
}
