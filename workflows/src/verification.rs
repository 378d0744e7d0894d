//! CandidateVerificationWorkflow (id `verify-{cand}`): the spec's verification flowchart for one
//! Candidate, every step idempotent.
//!
//! Load; skip a Candidate that is verified, rejected or promoted; a base behind canonical makes it
//! `stale` (the same ChangeSets are recomposed on the new base as a new Candidate, verified by its
//! own workflow); a cancelled Change rejects it; `checkCompatibility`; fork `cand-<id>` and
//! reserve 900 Sandbox seconds; merge the ChangeSets in Work Graph order; the composition build;
//! the Candidate patch; the plan; `verifying` and `candidate.composed`; one step per check, each
//! with its own timeout, each recording one Evidence row per attempt; the meter settles after the
//! last check; preview-smoke only for a live app whose build passed; `gateRequiredChecks`;
//! `verified`, or `rejected` with the gaps as the reason.

use crate::{metadata, options, queues, search};
use belay_domain::acceptance::acceptance_criteria_to_judge;
use belay_domain::candidate::{Candidate, CandidateStatus, VerificationStart, verification_start};
use belay_domain::change::{Change, ChangeSet, Task};
use belay_domain::check::CheckId;
use belay_domain::client_assets::check_client_assets;
use belay_domain::compatibility::{ChangeSetFacts, check_compatibility};
use belay_domain::evidence::{CheckResult, Coverage, Evidence, EvidenceStatus, Gap, gaps_before, gate_required_checks};
use belay_domain::ids::{CandidateId, ProjectId, TaskId};
use belay_domain::plan::{PlanInput, PlannedCheck, TaskScope, VerificationPlan, build_verification_plan};
use belay_domain::policy::{PolicyCommands, ProjectPolicy};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::ActivityError;
use temporalio_common::search_attributes::SearchAttributes;
use temporalio_macros::{activity_definitions, workflow, workflow_methods};
use temporalio_sdk::{
    ChildWorkflowOptions, ParentClosePolicy, WorkflowContext, WorkflowContextView, WorkflowIdReusePolicy,
    WorkflowResult,
};

/// The workflow id of a Candidate's verification.
pub fn verify_workflow_id(candidate_id: &str) -> String {
    format!("verify-{candidate_id}")
}

/// Sandbox seconds reserved for a Candidate's checks.
pub const CANDIDATE_RESERVATION_SECS: u64 = 900;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyInput {
    pub candidate_id: CandidateId,
}

/// One ChangeSet of the Candidate, with where it lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedChangeSet {
    pub change_set: ChangeSet,
    /// The workspace fork holding its commit.
    pub fork: String,
    /// The commit its workspace started from (canonical at the time, plus stacked merges).
    pub workspace_base: Option<String>,
    /// The canonical commit its workspace forked from.
    pub canonical_base: Option<String>,
    /// The canonical generation that commit was (absent from histories recorded before it).
    #[serde(default)]
    pub canonical_base_generation: Option<i64>,
}

/// What the first step reads: everything the later steps decide on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loaded {
    pub candidate: Candidate,
    pub change: Change,
    pub tasks: Vec<Task>,
    pub change_sets: Vec<LoadedChangeSet>,
    /// Read once per workflow run.
    pub policy: ProjectPolicy,
    pub canonical_generation: i64,
    /// The acceptance criteria of the project's Changes promoted while this one ran (absent from
    /// histories recorded before they were read).
    #[serde(default)]
    pub kept_criteria: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRequest {
    pub candidate_id: CandidateId,
    pub from: Vec<CandidateStatus>,
    pub to: CandidateStatus,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleRequest {
    pub candidate_id: CandidateId,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reserved {
    /// `at`: unix seconds the use began.
    Reserved {
        reservation_id: String,
        at: i64,
    },
    Refused {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleRequest {
    pub reservation_id: String,
    pub start: i64,
}

/// A ChangeSet tip to compose, and where its workspace started (for the paths it changes). Its
/// JSON is the tip's fields and `workspace_base` side by side, as recorded histories hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComposeTip {
    #[serde(flatten)]
    pub tip: belay_domain::repo::Tip,
    pub workspace_base: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathsRequest {
    pub base_commit: String,
    pub tips: Vec<ComposeTip>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComposeRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub tips: Vec<ComposeTip>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Composed {
    Merged { base: String, commit: String },
    Conflict { label: String, paths: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InspectRequest {
    pub candidate_id: CandidateId,
    pub base: String,
    pub commit: String,
}

/// The composed tree as the plan and client-assets need it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspected {
    pub tree: String,
    /// Paths that differ between base and commit.
    pub changed_paths: Vec<String>,
    /// The composed `package.json`'s `build` script.
    pub build_script: Option<String>,
    pub index_html: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub commit: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub commit: String,
    pub commands: PolicyCommands,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Built {
    /// The build passed; `commit` is `Build <candidate>` when it changed files.
    Passed { commit: Option<String> },
    Failed {
        command: String,
        exit_code: Option<i64>,
        output_tail: String,
        started_at: i64,
        completed_at: i64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub base: String,
    pub commit: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComposedRecord {
    pub candidate_id: CandidateId,
    pub commit: String,
    pub tree: String,
    pub plan: VerificationPlan,
}

/// One check step in the Sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRequest {
    pub project_id: ProjectId,
    pub candidate_id: CandidateId,
    pub check: PlannedCheck,
    pub attempt: u32,
    pub commands: PolicyCommands,
    pub base_commit: String,
    /// Every contract line the ChangeSets declare.
    pub contract_changes: Vec<String>,
}

/// A result the workflow itself decided (procedure gaps, client-assets, a step that threw).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordRequest {
    pub candidate_id: CandidateId,
    pub check_id: CheckId,
    pub attempt: u32,
    pub result: CheckResult,
    /// What the object holds besides the result (command, exit code, output tail).
    pub detail: serde_json::Value,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
}

/// What the query answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyProgress {
    pub step: String,
    pub gaps: Vec<Gap>,
}

/// Verification activities on the `belay.db` queue.
pub struct VerifyStoreApi;

#[activity_definitions]
impl VerifyStoreApi {
    #[activity(name = "db.verify_load")]
    pub fn load(candidate_id: CandidateId) -> Result<Loaded, ActivityError> {
        unimplemented!()
    }

    /// Moves the Candidate when it is in one of `from`; false when it was not.
    #[activity(name = "db.verify_status")]
    pub fn status(input: StatusRequest) -> Result<bool, ActivityError> {
        unimplemented!()
    }

    /// Marks it stale and recomposes its ChangeSets on canonical; the new Candidate's id.
    #[activity(name = "db.verify_stale")]
    pub fn stale(input: StaleRequest) -> Result<Option<CandidateId>, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.verify_reserve")]
    pub fn reserve(input: ReserveRequest) -> Result<Reserved, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.verify_settle")]
    pub fn settle(input: SettleRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.verify_composed")]
    pub fn composed(input: ComposedRecord) -> Result<bool, ActivityError> {
        unimplemented!()
    }

    /// Records a result the workflow decided, with its object; one row per attempt.
    #[activity(name = "db.verify_record")]
    pub fn record(input: RecordRequest) -> Result<Evidence, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "db.verify_evidence")]
    pub fn evidence(candidate_id: CandidateId) -> Result<Vec<Evidence>, ActivityError> {
        unimplemented!()
    }

    /// A verified Candidate without siblings whose acceptance check found criteria `not_met`:
    /// the Change's one repair Task, when it has none yet. The repair Task's id; `None` when no
    /// repair was made (the winner then goes on, and a shortfall is held for a person).
    #[activity(name = "db.verify_acceptance_repair")]
    pub fn acceptance_repair(candidate_id: CandidateId) -> Result<Option<TaskId>, ActivityError> {
        unimplemented!()
    }
}

/// Verification activities on the `belay.git` queue.
pub struct VerifyGitApi;

#[activity_definitions]
impl VerifyGitApi {
    /// The paths each tip changes against where its workspace started.
    #[activity(name = "git.verify_paths")]
    pub fn paths(input: PathsRequest) -> Result<Vec<Vec<String>>, ActivityError> {
        unimplemented!()
    }

    /// Forks canonical as `cand-<id>` (copying the tips' objects into it) and merges the tips in
    /// order into its `main`.
    #[activity(name = "git.verify_compose")]
    pub fn compose(input: ComposeRequest) -> Result<Composed, ActivityError> {
        unimplemented!()
    }

    #[activity(name = "git.verify_inspect")]
    pub fn inspect(input: InspectRequest) -> Result<Inspected, ActivityError> {
        unimplemented!()
    }

    /// Writes `source/<project>/patches/candidates/<cand>.patch`; returns its key.
    #[activity(name = "git.verify_patch")]
    pub fn patch(input: PatchRequest) -> Result<String, ActivityError> {
        unimplemented!()
    }
}

/// Verification activities on the `belay.sandbox` queue.
pub struct VerifySandboxApi;

#[activity_definitions]
impl VerifySandboxApi {
    /// Clones `cand-<id>` afresh into `/workspace/cand-<id>` and checks HEAD.
    #[activity(name = "sandbox.verify_checkout")]
    pub fn checkout(input: CheckoutRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// `bun install`, `bun run build`, and commits and pushes what the build changed.
    #[activity(name = "sandbox.verify_build")]
    pub fn build(input: BuildRequest) -> Result<Built, ActivityError> {
        unimplemented!()
    }

    /// Runs one check and records its Evidence row and object (once per attempt).
    #[activity(name = "sandbox.verify_check")]
    pub fn check(input: CheckRequest) -> Result<Evidence, ActivityError> {
        unimplemented!()
    }
}

/// The markers, re-exported for the implementations.
pub mod verify_definitions {
    pub use super::verify_git_api::{Compose, Inspect, Patch, Paths};
    pub use super::verify_sandbox_api::{Build, Check, Checkout};
    pub use super::verify_store_api::{
        AcceptanceRepair, Composed, Evidence, Load, Record, Reserve, Settle, Stale, Status,
    };
}

/// The `patched` marker of the repair a lone verified Candidate gets when its acceptance check
/// found criteria `not_met` (a selected winner gets it from the selection).
pub const LONE_ACCEPTANCE_REPAIR: &str = "verification-lone-acceptance-repair";

/// The `patched` marker of the gaps so far read from the rows the steps answered.
pub const STEP_ROWS_KEPT: &str = "verification-step-rows-kept";

/// The `patched` marker of the preview smoke check running after the Sandbox meter settles.
pub const PREVIEW_AFTER_SETTLE: &str = "verification-preview-after-settle";

/// What the checks left for the workflow: the plan, and the preview smoke check when it runs
/// after the meter settles.
struct Checked {
    plan: VerificationPlan,
    preview: Option<PreviewStep>,
}

/// How the composition build went.
enum BuildOutcome {
    /// It passed; the commit it made, if any, with its tree.
    Passed(Option<(String, Inspected)>),
    /// It failed: the Evidence row that says so.
    Failed(Evidence),
}

/// What every check step of one composition reads.
struct CheckStep<'a> {
    id: &'a CandidateId,
    project: &'a ProjectId,
    loaded: &'a Loaded,
    plan: &'a VerificationPlan,
    commands: &'a PolicyCommands,
    base: &'a str,
    composed: &'a str,
    final_tree: &'a Inspected,
    criteria: &'a [belay_domain::acceptance::AcceptanceCriterion],
    contract_changes: &'a [String],
    rows_kept: bool,
}

/// The preview smoke check's inputs.
struct PreviewStep {
    project_id: ProjectId,
    check: PlannedCheck,
    commands: PolicyCommands,
    base_commit: String,
    build_passed: bool,
}

/// Room on top of a check's own timeout for the clone of the base, the kill and the record.
const CHECK_MARGIN: Duration = Duration::from_secs(90);
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

#[workflow]
#[derive(Default)]
pub struct CandidateVerificationWorkflow {
    pub(crate) step: String,
    gaps: Vec<Gap>,
}

/// Why an activity failure ends the run: it is recorded as the reason.
fn failed(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[workflow_methods]
impl CandidateVerificationWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, input: VerifyInput) -> WorkflowResult<String> {
        let id = input.candidate_id;
        ctx.state_mut(|s| s.step = "load".into());
        let loaded = ctx
            .execute_activity(VerifyStoreApi::load, id.clone(), options::db())
            .await?;
        let k = &loaded.candidate;
        match verification_start(
            k.status,
            k.base_generation,
            loaded.canonical_generation,
            loaded.change.status,
        ) {
            VerificationStart::Skip => return Ok(k.status.as_str().to_owned()),
            VerificationStart::Stale { reason } => {
                ctx.state_mut(|s| s.step = "stale".into());
                let new = ctx
                    .execute_activity(
                        VerifyStoreApi::stale,
                        StaleRequest {
                            candidate_id: id.clone(),
                            reason,
                        },
                        options::db(),
                    )
                    .await?;
                if let Some(new) = new {
                    let described = metadata::verification(&new, &loaded.candidate.change_id);
                    let opts = ChildWorkflowOptions::builder()
                        .workflow_id(verify_workflow_id(new.as_str()))
                        .task_queue(queues::WORKFLOWS.to_string())
                        .parent_close_policy(ParentClosePolicy::Abandon)
                        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
                        .search_attributes(search_attributes(&new, &loaded))
                        .static_summary(described.summary)
                        .static_details(described.details)
                        .build();
                    // A start refused because the workflow exists was made by an earlier attempt.
                    let _ = ctx
                        .start_child_workflow(
                            CandidateVerificationWorkflow::run,
                            VerifyInput { candidate_id: new },
                            opts,
                        )
                        .await;
                }
                return Ok(CandidateStatus::Stale.as_str().to_owned());
            }
            VerificationStart::Reject { reason } => {
                Self::finish(ctx, &id, CandidateStatus::Rejected, Some(reason)).await?;
                return Ok(CandidateStatus::Rejected.as_str().to_owned());
            }
            VerificationStart::Proceed => {}
        }
        let status = Self::verify(ctx, &id, &loaded).await?;
        if ctx.patched(crate::selection::SIBLING_SELECTION) {
            let done = Self::select_siblings(ctx, &id, &loaded.candidate.change_id).await?;
            // The selected winner (one no repair took back to the agents) goes the way a lone
            // winner does: auto-promotion, or a person on its composed tree.
            if let Some(belay_domain::selection_steps::SelectionDone::Winner {
                id: winner,
                repair: None,
                ..
            }) = done
                && ctx.patched(crate::promotion::SELECTED_WINNER_READY_PATCH)
            {
                crate::promotion::winner_ready(ctx, &winner, crate::promotion::Winner::Selected).await?;
            }
        }
        Ok(status.as_str().to_owned())
    }

    async fn finish(
        ctx: &mut WorkflowContext<Self>,
        id: &CandidateId,
        to: CandidateStatus,
        reason: Option<String>,
    ) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.step = to.as_str().into());
        ctx.execute_activity(
            VerifyStoreApi::status,
            StatusRequest {
                candidate_id: id.clone(),
                from: vec![CandidateStatus::Composing, CandidateStatus::Verifying],
                to,
                reason,
            },
            options::db(),
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn record(ctx: &mut WorkflowContext<Self>, req: RecordRequest) -> WorkflowResult<Evidence> {
        Ok(ctx.execute_activity(VerifyStoreApi::record, req, options::db()).await?)
    }

    async fn verify(
        ctx: &mut WorkflowContext<Self>,
        id: &CandidateId,
        loaded: &Loaded,
    ) -> WorkflowResult<CandidateStatus> {
        let k = &loaded.candidate;
        let project = k.project_id.clone();
        let tips: Vec<ComposeTip> = loaded
            .change_sets
            .iter()
            .map(|c| {
                let key = loaded
                    .tasks
                    .iter()
                    .find(|t| t.id == c.change_set.task_id)
                    .map_or_else(|| c.change_set.id.to_string(), |t| t.key.clone());
                ComposeTip {
                    tip: belay_domain::repo::Tip {
                        label: key,
                        fork: c.fork.clone(),
                        commit: c.change_set.commit.clone(),
                    },
                    workspace_base: c.workspace_base.clone(),
                }
            })
            .collect();

        ctx.state_mut(|s| s.step = "checkCompatibility".into());
        let paths = ctx
            .execute_activity(
                VerifyGitApi::paths,
                PathsRequest {
                    base_commit: k.base_commit.clone(),
                    tips: tips.clone(),
                },
                options::git(Duration::from_secs(300)),
            )
            .await?;
        let stacked: Vec<Vec<String>> = loaded
            .change_sets
            .iter()
            .map(|c| {
                let task = loaded.tasks.iter().find(|t| t.id == c.change_set.task_id);
                loaded
                    .change_sets
                    .iter()
                    .filter(|o| {
                        task.is_some_and(|t| {
                            loaded
                                .tasks
                                .iter()
                                .any(|d| d.id == o.change_set.task_id && t.dependencies.contains(&d.key))
                        })
                    })
                    .map(|o| o.change_set.id.to_string())
                    .collect()
            })
            .collect();
        let facts: Vec<ChangeSetFacts<'_>> = loaded
            .change_sets
            .iter()
            .zip(&paths)
            .zip(&stacked)
            .filter_map(|((c, p), st)| {
                let task = loaded.tasks.iter().find(|t| t.id == c.change_set.task_id)?;
                Some(ChangeSetFacts {
                    change_set: &c.change_set,
                    task,
                    changed_paths: p,
                    base_generation: c
                        .canonical_base_generation
                        .or((c.canonical_base.as_deref() == Some(k.base_commit.as_str())).then_some(k.base_generation)),
                    stacked_on: st,
                })
            })
            .collect();
        let compat = check_compatibility(k.base_generation, &facts, &loaded.policy.protected_resources);
        if let Some(reason) = compat.rejection_reason() {
            Self::record(
                ctx,
                RecordRequest {
                    candidate_id: id.clone(),
                    check_id: CheckId::Composition,
                    attempt: 1,
                    result: CheckResult::new(EvidenceStatus::Fail, Coverage::CheckedSupported, &reason),
                    detail: serde_json::to_value(&compat).unwrap_or_default(),
                    started_at: None,
                    completed_at: None,
                },
            )
            .await?;
            Self::finish(ctx, id, CandidateStatus::Rejected, Some(reason)).await?;
            return Ok(CandidateStatus::Rejected);
        }

        ctx.state_mut(|s| s.step = "reserve".into());
        let (reservation, reserved_at) = match ctx
            .execute_activity(
                VerifyStoreApi::reserve,
                ReserveRequest {
                    project_id: project.clone(),
                    candidate_id: id.clone(),
                },
                options::db(),
            )
            .await?
        {
            Reserved::Reserved { reservation_id, at } => (reservation_id, at),
            Reserved::Refused { reason } => {
                let reason = format!("no Sandbox budget: {reason}");
                Self::finish(ctx, id, CandidateStatus::Rejected, Some(reason)).await?;
                return Ok(CandidateStatus::Rejected);
            }
        };

        let outcome = Self::compose_and_check(ctx, id, loaded, tips).await;
        ctx.state_mut(|s| s.step = "settle".into());
        ctx.execute_activity(
            VerifyStoreApi::settle,
            SettleRequest {
                reservation_id: reservation,
                start: reserved_at,
            },
            options::db(),
        )
        .await?;
        let Checked { plan, preview } = match outcome? {
            Ok(checked) => checked,
            Err(reason) => {
                Self::finish(ctx, id, CandidateStatus::Rejected, Some(reason)).await?;
                return Ok(CandidateStatus::Rejected);
            }
        };
        if let Some(preview) = preview {
            Self::preview_smoke(ctx, id, preview).await?;
        }

        ctx.state_mut(|s| s.step = "gateRequiredChecks".into());
        let evidence = ctx
            .execute_activity(VerifyStoreApi::evidence, id.clone(), options::db())
            .await?;
        let gate = gate_required_checks(&plan, &evidence);
        ctx.state_mut(|s| s.gaps = gate.gaps.clone());
        match gate.rejection_reason() {
            None => {
                Self::finish(ctx, id, CandidateStatus::Verified, None).await?;
                // A gated Candidate without siblings is the winner: promotion's next step.
                if ctx.patched(crate::promotion::WINNER_READY_PATCH) {
                    ctx.state_mut(|s| s.step = "winnerReady".into());
                    // Criteria not met on a Candidate that passed every required check: the
                    // Change's one repair before a person.
                    let repaired = if ctx.patched(LONE_ACCEPTANCE_REPAIR) {
                        ctx.execute_activity(VerifyStoreApi::acceptance_repair, id.clone(), options::db())
                            .await?
                            .is_some()
                    } else {
                        false
                    };
                    if !repaired {
                        crate::promotion::winner_ready(ctx, id, crate::promotion::Winner::IfAlone).await?;
                    }
                }
                Ok(CandidateStatus::Verified)
            }
            Some(reason) => {
                Self::finish(ctx, id, CandidateStatus::Rejected, Some(reason)).await?;
                Ok(CandidateStatus::Rejected)
            }
        }
    }

    /// From the merge to the last check. `Ok(Err(reason))`: composition rejected the Candidate.
    async fn compose_and_check(
        ctx: &mut WorkflowContext<Self>,
        id: &CandidateId,
        loaded: &Loaded,
        tips: Vec<ComposeTip>,
    ) -> WorkflowResult<Result<Checked, String>> {
        let k = &loaded.candidate;
        let project = k.project_id.clone();
        ctx.state_mut(|s| s.step = "merge".into());
        let merged = ctx
            .execute_activity(
                VerifyGitApi::compose,
                ComposeRequest {
                    project_id: project.clone(),
                    candidate_id: id.clone(),
                    tips,
                },
                options::git(Duration::from_secs(600)),
            )
            .await?;
        let (base, merged) = match merged {
            Composed::Merged { base, commit } => (base, commit),
            Composed::Conflict { label, paths } => {
                let reason = format!(
                    "merge conflict: the ChangeSet of task {label} conflicts in {}",
                    paths.join(", ")
                );
                Self::record(
                    ctx,
                    RecordRequest {
                        candidate_id: id.clone(),
                        check_id: CheckId::Composition,
                        attempt: 1,
                        result: CheckResult::new(EvidenceStatus::Fail, Coverage::CheckedSupported, &reason),
                        detail: serde_json::json!({ "conflict": { "task": label, "paths": paths } }),
                        started_at: None,
                        completed_at: None,
                    },
                )
                .await?;
                return Ok(Err(reason));
            }
        };
        let inspect = |commit: &str| InspectRequest {
            candidate_id: id.clone(),
            base: base.clone(),
            commit: commit.to_owned(),
        };
        let pre_build = ctx
            .execute_activity(
                VerifyGitApi::inspect,
                inspect(&merged),
                options::git(Duration::from_secs(300)),
            )
            .await?;

        ctx.state_mut(|s| s.step = "checkout".into());
        ctx.execute_activity(
            VerifySandboxApi::checkout,
            CheckoutRequest {
                project_id: project.clone(),
                candidate_id: id.clone(),
                commit: merged.clone(),
            },
            options::sandbox(Duration::from_secs(600)),
        )
        .await?;

        let commands = loaded.policy.commands.clone();
        let mut composed = merged.clone();
        let mut final_tree = pre_build.clone();
        let mut build_failed = false;
        // The Evidence rows this run recorded so far, as their steps answered them.
        let mut recorded: Vec<Evidence> = Vec::new();
        if pre_build.build_script.is_some() {
            match Self::composition_build(ctx, id, &project, &base, &merged, &commands).await? {
                BuildOutcome::Passed(Some((commit, tree))) => {
                    composed = commit;
                    final_tree = tree;
                }
                BuildOutcome::Passed(None) => {}
                BuildOutcome::Failed(row) => {
                    build_failed = true;
                    recorded.push(row);
                }
            }
        }

        ctx.execute_activity(
            VerifyGitApi::patch,
            PatchRequest {
                project_id: project.clone(),
                candidate_id: id.clone(),
                base: base.clone(),
                commit: merged.clone(),
            },
            options::git(Duration::from_secs(300)),
        )
        .await?;

        ctx.state_mut(|s| s.step = "plan".into());
        let scopes: Vec<(Task, Vec<String>)> = loaded
            .tasks
            .iter()
            .filter(|t| loaded.change_sets.iter().any(|c| c.change_set.task_id == t.id))
            .map(|t| (t.clone(), pre_build.changed_paths.clone()))
            .collect();
        let task_scopes: Vec<TaskScope<'_>> = scopes
            .iter()
            .map(|(t, p)| TaskScope {
                task: t,
                changed_paths: p,
            })
            .collect();
        let criteria = acceptance_criteria_to_judge(&loaded.change.acceptance_criteria, &loaded.kept_criteria);
        let plan = build_verification_plan(&PlanInput {
            change: &loaded.change,
            policy: &loaded.policy,
            tasks: &task_scopes,
            changed_paths: &pre_build.changed_paths,
            has_build_script: pre_build.build_script.is_some(),
            criteria_to_judge: &criteria,
        });
        ctx.execute_activity(
            VerifyStoreApi::composed,
            ComposedRecord {
                candidate_id: id.clone(),
                commit: composed.clone(),
                tree: final_tree.tree.clone(),
                plan: plan.clone(),
            },
            options::db(),
        )
        .await?;

        let contract_changes: Vec<String> = loaded
            .change_sets
            .iter()
            .flat_map(|c| c.change_set.contract_changes.clone())
            .collect();
        let mut build_passed = !build_failed;
        // Since this marker the gaps so far are read from the rows the steps answered, not
        // read back from the store after each step (one activity a step fewer).
        let rows_kept = ctx.patched(STEP_ROWS_KEPT);
        let step = CheckStep {
            id,
            project: &project,
            loaded,
            plan: &plan,
            commands: &commands,
            base: &base,
            composed: &composed,
            final_tree: &final_tree,
            criteria: &criteria,
            contract_changes: &contract_changes,
            rows_kept,
        };
        for check in plan.checks.clone() {
            if check.check_id == CheckId::PreviewSmoke {
                continue; // after the meter settles, below
            }
            if check.check_id == CheckId::Build && build_failed {
                continue; // the failed composition build is the result
            }
            ctx.state_mut(|s| s.step = check.check_id.to_string());
            let evidence = Self::check_step(ctx, &step, &check, &recorded).await?;
            if let Some(e) = evidence {
                if check.check_id == CheckId::Build {
                    build_passed = e.status == EvidenceStatus::Pass;
                }
                // A retried step answers the row it recorded before: one row a check and attempt.
                recorded.retain(|r| (&r.check_id, r.attempt) != (&e.check_id, e.attempt));
                recorded.push(e);
            }
            let so_far = if rows_kept {
                recorded.clone()
            } else {
                ctx.execute_activity(VerifyStoreApi::evidence, id.clone(), options::db())
                    .await?
            };
            let next = plan
                .checks
                .iter()
                .skip_while(|c| c.check_id != check.check_id)
                .nth(1)
                .map(|c| c.check_id.clone());
            let gaps = match next {
                Some(n) => gaps_before(&plan, &so_far, &n),
                None => gate_required_checks(&plan, &so_far).gaps,
            };
            ctx.state_mut(|s| s.gaps = gaps);
        }

        if let Some(check) = plan.check(&CheckId::PreviewSmoke).cloned() {
            let preview = PreviewStep {
                project_id: project.clone(),
                check,
                commands: commands.clone(),
                base_commit: base.clone(),
                build_passed,
            };
            // The spec settles the Sandbox meter after the last check and before the preview;
            // histories from before this marker ran the preview first.
            if ctx.patched(PREVIEW_AFTER_SETTLE) {
                return Ok(Ok(Checked {
                    plan,
                    preview: Some(preview),
                }));
            }
            Self::preview_smoke(ctx, id, preview).await?;
        }
        Ok(Ok(Checked { plan, preview: None }))
    }

    /// The composition build (the composed package.json has a build script): the commit it made,
    /// inspected afresh, or the failed build's Evidence row.
    async fn composition_build(
        ctx: &mut WorkflowContext<Self>,
        id: &CandidateId,
        project: &ProjectId,
        base: &str,
        merged: &str,
        commands: &PolicyCommands,
    ) -> WorkflowResult<BuildOutcome> {
        ctx.state_mut(|s| s.step = "build".into());
        Ok(
            match ctx
                .execute_activity(
                    VerifySandboxApi::build,
                    BuildRequest {
                        project_id: project.clone(),
                        candidate_id: id.clone(),
                        commit: merged.to_owned(),
                        commands: commands.clone(),
                    },
                    options::sandbox(BUILD_TIMEOUT),
                )
                .await?
            {
                Built::Passed { commit: Some(commit) } => {
                    let tree = ctx
                        .execute_activity(
                            VerifyGitApi::inspect,
                            InspectRequest {
                                candidate_id: id.clone(),
                                base: base.to_owned(),
                                commit: commit.clone(),
                            },
                            options::git(Duration::from_secs(300)),
                        )
                        .await?;
                    BuildOutcome::Passed(Some((commit, tree)))
                }
                Built::Passed { commit: None } => BuildOutcome::Passed(None),
                Built::Failed {
                    command,
                    exit_code,
                    output_tail,
                    started_at,
                    completed_at,
                } => {
                    let row = Self::record(
                    ctx,
                    RecordRequest {
                        candidate_id: id.clone(),
                        check_id: CheckId::Build,
                        attempt: 1,
                        result: CheckResult::new(
                            EvidenceStatus::Fail,
                            Coverage::CheckedSupported,
                            &format!("the composition build failed ({command}, exit {exit_code:?}): {}", tail(&output_tail, 400)),
                        ),
                        detail: serde_json::json!({ "command": command, "exitCode": exit_code, "outputTail": output_tail }),
                        started_at: Some(started_at),
                        completed_at: Some(completed_at),
                    },
                )
                .await?;
                    BuildOutcome::Failed(row)
                }
            },
        )
    }

    /// One check of the plan, by its kind: a procedure or the client-assets rule recorded here,
    /// the browser, the acceptance judge, or a command in the Sandbox; a step that failed is
    /// recorded as thrown. Answers the Evidence row, if any.
    async fn check_step(
        ctx: &mut WorkflowContext<Self>,
        s: &CheckStep<'_>,
        check: &PlannedCheck,
        recorded: &[Evidence],
    ) -> WorkflowResult<Option<Evidence>> {
        let record = |result: CheckResult, detail: serde_json::Value| RecordRequest {
            candidate_id: s.id.clone(),
            check_id: check.check_id.clone(),
            attempt: 1,
            result,
            detail,
            started_at: None,
            completed_at: None,
        };
        Ok(match &check.check_id {
            CheckId::ProtectedInvariant { .. } => {
                let what = check.procedure.clone().unwrap_or_else(|| check.check_id.to_string());
                Some(
                    Self::record(
                        ctx,
                        record(CheckResult::procedure(&what), serde_json::json!({ "procedure": what })),
                    )
                    .await?,
                )
            }
            CheckId::ClientAssets => {
                let out = check_client_assets(
                    &s.final_tree.changed_paths,
                    s.final_tree.build_script.as_deref().unwrap_or_default(),
                    s.final_tree.index_html.as_deref(),
                );
                Some(
                    Self::record(
                        ctx,
                        record(out.result.clone(), serde_json::to_value(&out).unwrap_or_default()),
                    )
                    .await?,
                )
            }
            CheckId::Browser if ctx.patched(crate::browser::BROWSER_CHECK) => {
                let req = crate::browser::BrowserCheckRequest {
                    project_id: s.project.clone(),
                    candidate_id: s.id.clone(),
                    attempt: 1,
                    commands: s.commands.clone(),
                };
                match ctx
                    .execute_activity(crate::browser::VerifyBrowserApi::check, req, crate::browser::options())
                    .await
                {
                    Ok(e) => Some(e),
                    Err(e) => {
                        Some(Self::record(ctx, record(CheckResult::thrown(&failed(e)), serde_json::json!({}))).await?)
                    }
                }
            }
            CheckId::Browser => Some(
                Self::record(
                    ctx,
                    record(
                        CheckResult::thrown("the browser check is not available in this deployment yet"),
                        serde_json::json!({}),
                    ),
                )
                .await?,
            ),
            CheckId::Acceptance if ctx.patched(crate::selection::ACCEPTANCE_CHECK) => {
                let so_far = if s.rows_kept {
                    recorded.to_vec()
                } else {
                    ctx.execute_activity(VerifyStoreApi::evidence, s.id.clone(), options::db())
                        .await?
                };
                let earlier_gap = !gaps_before(s.plan, &so_far, &CheckId::Acceptance).is_empty();
                let source = crate::selection::AcceptanceSourceRequest {
                    project_id: s.project.clone(),
                    candidate_id: s.id.clone(),
                    base: s.base.to_owned(),
                    composed: s.composed.to_owned(),
                };
                Some(
                    Self::acceptance_step(
                        ctx,
                        record(CheckResult::thrown("not judged"), serde_json::json!({})),
                        earlier_gap,
                        source,
                        s.loaded.candidate.change_id.clone(),
                        s.criteria.to_vec(),
                    )
                    .await?,
                )
            }
            CheckId::Acceptance => Some(
                Self::record(
                    ctx,
                    record(
                        CheckResult::new(
                            EvidenceStatus::Skipped,
                            Coverage::NotChecked,
                            "acceptance is judged by sibling selection; not run here",
                        ),
                        serde_json::json!({}),
                    ),
                )
                .await?,
            ),
            _ => {
                let req = CheckRequest {
                    project_id: s.project.clone(),
                    candidate_id: s.id.clone(),
                    check: check.clone(),
                    attempt: 1,
                    commands: s.commands.clone(),
                    base_commit: s.base.to_owned(),
                    contract_changes: s.contract_changes.to_vec(),
                };
                let timeout = Duration::from_millis(check.timeout_ms) + CHECK_MARGIN;
                match ctx
                    .execute_activity(VerifySandboxApi::check, req, options::sandbox(timeout))
                    .await
                {
                    Ok(e) => Some(e),
                    Err(e) => {
                        Some(Self::record(ctx, record(CheckResult::thrown(&failed(e)), serde_json::json!({}))).await?)
                    }
                }
            }
        })
    }

    /// The preview smoke check: the composed app started with the dev command in the Sandbox and
    /// probed, when the build check passed; skipped otherwise.
    async fn preview_smoke(ctx: &mut WorkflowContext<Self>, id: &CandidateId, p: PreviewStep) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.step = "preview-smoke".into());
        if p.build_passed {
            let req = CheckRequest {
                project_id: p.project_id,
                candidate_id: id.clone(),
                check: p.check.clone(),
                attempt: 1,
                commands: p.commands,
                base_commit: p.base_commit,
                contract_changes: vec![],
            };
            let timeout = Duration::from_millis(p.check.timeout_ms) + CHECK_MARGIN;
            if let Err(e) = ctx
                .execute_activity(VerifySandboxApi::check, req, options::sandbox(timeout))
                .await
            {
                Self::record(
                    ctx,
                    RecordRequest {
                        candidate_id: id.clone(),
                        check_id: CheckId::PreviewSmoke,
                        attempt: 1,
                        result: CheckResult::thrown(&failed(e)),
                        detail: serde_json::json!({}),
                        started_at: None,
                        completed_at: None,
                    },
                )
                .await?;
            }
        } else {
            Self::record(
                ctx,
                RecordRequest {
                    candidate_id: id.clone(),
                    check_id: CheckId::PreviewSmoke,
                    attempt: 1,
                    result: CheckResult::new(
                        EvidenceStatus::Skipped,
                        Coverage::NotChecked,
                        "no preview: the build check did not pass",
                    ),
                    detail: serde_json::json!({}),
                    started_at: None,
                    completed_at: None,
                },
            )
            .await?;
        }
        Ok(())
    }

    /// The step running now and the gaps so far.
    #[query]
    pub fn progress(&self, _ctx: &WorkflowContextView) -> VerifyProgress {
        VerifyProgress {
            step: self.step.clone(),
            gaps: self.gaps.clone(),
        }
    }
}

/// The last `n` characters of `s`.
fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

/// `BelayCandidateId`, `BelayChangeId`, `BelayProjectId`.
pub fn search_attributes(candidate: &CandidateId, loaded: &Loaded) -> SearchAttributes {
    SearchAttributes::new(vec![
        search::CANDIDATE_ID.value_set(candidate.to_string()),
        search::CHANGE_ID.value_set(loaded.candidate.change_id.to_string()),
        search::PROJECT_ID.value_set(loaded.candidate.project_id.to_string()),
    ])
}
