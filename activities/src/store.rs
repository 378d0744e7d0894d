//! StoreActivities: the database. Each activity is one store call (or one store transaction);
//! the store makes each idempotent, so a retry after a crash changes nothing twice. The `belay.db`
//! pool serves them all; the workflow worker runs the run lane's and promotion's as local
//! activities ([`LocalStoreActivities`]).

use crate::promotion::AFTER_CAS;
use crate::verification::{evidence_key, put_object};
use crate::{Plain, fatal, now_secs, store_error};
use belay_domain::adapter::{JobFile, MANIFEST_FILE};
use belay_domain::approval::Approval;
use belay_domain::candidate::CandidateMetrics;
use belay_domain::change::ChangeSetInput;
use belay_domain::check::CheckId;
use belay_domain::evidence::{Coverage, Evidence, EvidenceStatus, latest_per_check};
use belay_domain::ids::{CandidateId, ChangeId, ChangeSetId, JobId, ProjectId, TaskRunId};
use belay_domain::job::JobStatus;
use belay_domain::meter::{Reservation, close_of};
use belay_domain::promotion::PromotionOutcome;
use belay_domain::refusal::{Refusal, RefusalReason};
use belay_domain::repo::workspace_fork;
use belay_domain::selection_steps::{SelectionDone, SelectionStep};
use belay_store::Store;
use belay_store::candidates::NewEvidence;
use belay_store::jobs::{Completion, Transition};
use belay_store::meter::Reserve;
use belay_store::workspaces::Admission;
use belay_store::{StoreError, ladders, now_ms};
use belay_workflows::contracts::{
    AttemptInput, ClaimedJob, CompleteInput, Ended, FailInput, ProjectFailure, ProjectProvisioned, StartedJob,
    VersionFacts,
};
use belay_workflows::edit_session::{EndSession, ForkedRequest};
use belay_workflows::ladder::{ClimbStep, ClimbStepInput, ClimberLine};
use belay_workflows::promotion::{
    ApprovalRequest, CandidateForkToSweep, CasRequest, PromotionRowsFacts, ReleasedRequest, SettleOlderRequest,
    SettledOlder, WinnerFacts,
};
use belay_workflows::selection::{AcceptanceRecord, ApplyRequest, ClaimRequest};
use belay_workflows::top_up::{ClaimAnswer, ClaimInput, EnqueueInput, Enqueued, OneStepAnswer, ReleaseInput};
use belay_workflows::verification::{
    ComposedRecord, Loaded, LoadedChangeSet, ReserveRequest, StaleRequest, StatusRequest,
};
use belay_workflows::workspace::{Admit, Admitted, EndRequest, FinishRequest, OpenedRequest};
use object_store::ObjectStore;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{
    ActivityContext, ActivityDefinitions, ActivityError, ActivityImplementer, ExecutableActivity,
};
use tracing::{info, instrument};

/// The database's activities, for every workflow: the store, and what a few of them need besides.
pub struct StoreActivities {
    pub store: Store,
    /// Where a verification step's Evidence objects are written.
    pub objects: Arc<dyn ObjectStore>,
    /// When set, a completed run of a ladder signals that ladder's climb (`ladder-{id}`).
    pub client: Option<temporalio_client::Client>,
    /// How long a top-up's claim holds the plan or ladder when its top-up never releases it
    /// ([`belay_store::coverage::TOP_UP_LEASE_MS`] unless the worker is configured otherwise).
    pub top_up_lease_ms: i64,
}

impl StoreActivities {
    /// Tells the climb of the ladder that launched `job_id` (if one did) that a run ended. A climb
    /// that is not running (the ladder is disabled) is not an error: the next one reads the board.
    async fn poke_climb(&self, job_id: &str) {
        let Some(client) = &self.client else { return };
        let origin = match self.store.get_job(&JobId::from(job_id)).await {
            Ok(Some(job)) => job.origin,
            _ => None,
        };
        if let Some(belay_domain::job::Origin::Ladder(id)) = origin
            && let Err(e) = belay_client::poke_climb(client, &id).await
        {
            info!(ladder.id = %id, error = %e, "ladder climb not signalled");
        }
    }
}

/// The database steps the workflow worker runs as local activities, beside the workflows that
/// call them: the run lane's (claim, start, mark running, complete, fail) and promotion's (the
/// facts, the compare-and-swap, the sync records, the settle). The `belay.db` pool serves every
/// activity of [`StoreActivities`], these included.
pub struct LocalStoreActivities(pub Arc<StoreActivities>);

impl ActivityImplementer for LocalStoreActivities {
    fn register_all(self: Arc<Self>, defs: &mut ActivityDefinitions) {
        let s = &self.0;
        local(defs, s, StoreActivities::claim);
        local(defs, s, StoreActivities::start_job);
        local(defs, s, StoreActivities::mark_running);
        local(defs, s, StoreActivities::complete_job);
        local(defs, s, StoreActivities::fail_job);
        local(defs, s, StoreActivities::record_attempt);
        local(defs, s, StoreActivities::facts);
        local(defs, s, StoreActivities::cas);
        local(defs, s, StoreActivities::pushed);
        local(defs, s, StoreActivities::synced);
        local(defs, s, StoreActivities::promotion_settle);
        local(defs, s, StoreActivities::released);
        local(defs, s, StoreActivities::winner_facts);
        local(defs, s, StoreActivities::request_approval);
    }
}

/// Registers one activity of [`StoreActivities`], named by its method.
fn local<A>(defs: &mut ActivityDefinitions, store: &Arc<StoreActivities>, _activity: A)
where
    A: ExecutableActivity<Implementer = StoreActivities>,
    A::Input: Send + Sync,
    A::Output: Send + Sync,
{
    defs.register_activity::<A>(store.clone());
}

#[activities]
impl StoreActivities {
    // The run lane: the dispatcher's claim and RunWorkflow's steps.

    #[activity(definition = belay_workflows::contracts::definitions::Claim)]
    #[instrument(skip_all, fields(claim.key = %claim_key), err(Debug))]
    pub async fn claim(
        self: Arc<Self>,
        _ctx: ActivityContext,
        claim_key: String,
    ) -> Result<Vec<ClaimedJob>, ActivityError> {
        let jobs = self.store.claim(&claim_key).await.map_err(store_error)?;
        if !jobs.is_empty() {
            info!(claim.jobs = jobs.len(), "claimed jobs");
        }
        Ok(jobs
            .into_iter()
            .map(|j| ClaimedJob {
                harness: j.combination.harness().to_string(),
                origin: j.origin.map(|o| o.to_string()),
                case: Some(j.case.to_string()),
                models: j.combination.distinct_models(),
                job_id: j.id,
            })
            .collect())
    }

    #[activity(definition = belay_workflows::contracts::definitions::StartJob)]
    #[instrument(skip_all, fields(job.id = %job_id), err(Debug))]
    pub async fn start_job(self: Arc<Self>, _ctx: ActivityContext, job_id: JobId) -> Result<StartedJob, ActivityError> {
        let proceed = match self
            .store
            .advance_job(&job_id, JobStatus::Starting)
            .await
            .map_err(store_error)?
        {
            Transition::Moved(_) => true,
            // A retried start (or a replayed run) finds the job already further along.
            Transition::Already(_) => true,
            Transition::Refused(j) => j.status == JobStatus::Running,
        };
        let context = self.store.job_context(&job_id).await.map_err(store_error)?;
        let job = context.job;
        let job_file = JobFile {
            job_id: job.id.clone(),
            attempt: job.attempt,
            case: job.case.clone(),
            combination: job.combination.clone(),
            gg_config_name: job.gg_config_name.clone(),
            capabilities: context.capabilities,
            // The harness pool decides where a job's files live.
            output_dir: String::new(),
            manifest: MANIFEST_FILE.to_string(),
        };
        Ok(StartedJob {
            proceed,
            case: Some(job.case),
            job_file: Some(job_file),
            adapter: context.adapter,
            version: context.version.map(|v| VersionFacts {
                variants: v.variants,
                engines: v.engines,
            }),
        })
    }

    #[activity(definition = belay_workflows::contracts::definitions::MarkRunning)]
    #[instrument(skip_all, fields(job.id = %job_id), err(Debug))]
    pub async fn mark_running(self: Arc<Self>, _ctx: ActivityContext, job_id: JobId) -> Result<bool, ActivityError> {
        Ok(
            match self
                .store
                .advance_job(&job_id, JobStatus::Running)
                .await
                .map_err(store_error)?
            {
                Transition::Moved(_) | Transition::Already(_) => true,
                Transition::Refused(_) => false,
            },
        )
    }

    #[activity(definition = belay_workflows::contracts::definitions::CompleteJob)]
    #[instrument(skip_all, fields(job.id = %input.job_id), err(Debug))]
    pub async fn complete_job(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CompleteInput,
    ) -> Result<Ended, ActivityError> {
        let completion = self
            .store
            .complete_job_reported(
                &input.job_id,
                input.loaded,
                &input.artifacts,
                input.task_failure.as_deref(),
                input.reported,
            )
            .await
            .map_err(store_error)?;
        if matches!(completion, Completion::Recorded(_) | Completion::AlreadyRecorded(_)) {
            self.poke_climb(&input.job_id).await;
        }
        Ok(match completion {
            Completion::Recorded(run) | Completion::AlreadyRecorded(run) => Ended {
                status: "completed".into(),
                run_id: Some(run.id),
                retry_job_id: None,
            },
            Completion::Refused(job) => Ended {
                status: job.status.to_string(),
                run_id: None,
                retry_job_id: None,
            },
        })
    }

    #[activity(definition = belay_workflows::contracts::definitions::FailJob)]
    #[instrument(skip_all, fields(job.id = %input.job_id), err(Debug))]
    pub async fn fail_job(self: Arc<Self>, _ctx: ActivityContext, input: FailInput) -> Result<Ended, ActivityError> {
        let f = self
            .store
            .fail_job_as(&input.job_id, &input.reason, input.infrastructure, input.class)
            .await
            .map_err(store_error)?;
        info!(job.status = %f.job.status, job.retry = ?f.retry.as_ref().map(|r| &r.id), "recorded failure");
        Ok(Ended {
            status: f.job.status.to_string(),
            run_id: None,
            retry_job_id: f.retry.map(|r| r.id),
        })
    }

    #[activity(definition = belay_workflows::contracts::definitions::RecordAttempt)]
    #[instrument(skip_all, fields(job.id = %input.job_id, attempt.n = input.n), err(Debug))]
    pub async fn record_attempt(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: AttemptInput,
    ) -> Result<(), ActivityError> {
        let attempt = belay_store::attempts::NewAttempt {
            job_id: input.job_id,
            n: input.n,
            started_at: input.started_at,
            ended_at: input.ended_at,
            worker: input.worker,
            exit: input.exit,
            failure_class: input.class,
            message: input.message,
            log_tail: input.log_tail,
        };
        self.store.record_attempt(&attempt).await.map_err(store_error)
    }

    // ProjectProvisionWorkflow and ProjectCleanupWorkflow: the project's rows.

    #[activity(definition = belay_workflows::contracts::project_definitions::MarkProvisioned)]
    #[instrument(skip_all, fields(project.id = %input.project_id), err(Debug))]
    pub async fn mark_provisioned(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ProjectProvisioned,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_project_provisioned(&input.project_id, &input.source.commit, &input.source.tree)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::contracts::cleanup_definitions::RepositoryNames)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn repository_names(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<Vec<String>, ActivityError> {
        self.store
            .project_repository_names(&project_id)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::contracts::cleanup_definitions::DeleteRows)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn delete_rows(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<(), ActivityError> {
        self.store.delete_project_rows(&project_id).await.map_err(store_error)
    }

    #[activity(definition = belay_workflows::contracts::project_definitions::MarkFailed)]
    #[instrument(skip_all, fields(project.id = %input.project_id), err(Debug))]
    pub async fn mark_failed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ProjectFailure,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_project_failed(&input.project_id, &input.error)
            .await
            .map_err(store_error)
    }

    // WorkspaceWorkflow: admission and records.

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Admit)]
    #[instrument(skip_all, fields(run.id = %run_id), err(Debug))]
    pub async fn admit(self: Arc<Self>, _ctx: ActivityContext, run_id: TaskRunId) -> Result<Admit, ActivityError> {
        let refuse = |reason: RefusalReason, message: String| Ok(Admit::Refused(Refusal::new(reason, message)));
        let Some(plan) = self.store.workspace_plan(&run_id).await.map_err(store_error)? else {
            return refuse(RefusalReason::NotFound, format!("task run {run_id} not found"));
        };
        if plan.run_status != "running" {
            return refuse(
                RefusalReason::WorkspaceClosed,
                format!("task run {run_id} has ended ({})", plan.run_status),
            );
        }
        if !plan.task_kind.opens_workspace() {
            return refuse(
                RefusalReason::InvalidField,
                "task kind: only implement, migrate and test tasks open a workspace".into(),
            );
        }
        if plan.base_commit.is_none() {
            return refuse(
                RefusalReason::ProjectNotReady,
                format!("project {} is not provisioned", plan.project_id),
            );
        }
        if !plan.unpublished.is_empty() {
            return refuse(
                RefusalReason::StackUnpublished,
                format!(
                    "the tasks this one depends on have no ChangeSet yet: {}",
                    plan.unpublished.join(", ")
                ),
            );
        }
        let row = match self
            .store
            .admit_workspace(
                &run_id,
                &ChangeId::from(plan.change_id.as_str()),
                &ProjectId::from(plan.project_id.as_str()),
                now_secs(),
            )
            .await
            .map_err(store_error)?
        {
            Admission::Admitted(row) => row,
            Admission::Refused { open } => {
                return refuse(
                    RefusalReason::WorkspaceCap,
                    format!(
                        "change {} already has {open} open workspaces (at most 4)",
                        plan.change_id
                    ),
                );
            }
            Admission::CapRefused(cap) => return refuse(RefusalReason::SandboxCap, cap.to_string()),
        };
        if row.status != "open" {
            return refuse(
                RefusalReason::WorkspaceClosed,
                format!("the workspace of {run_id} has ended"),
            );
        }
        let reservation_id = row.reservation_id.ok_or_else(|| {
            fatal(StoreError::Corrupt(format!(
                "workspace {run_id} was admitted without a reservation"
            )))
        })?;
        let stacked = plan
            .stacked
            .iter()
            .map(|s| {
                Ok(belay_domain::repo::Tip {
                    label: s.task_key.clone(),
                    fork: workspace_fork(&s.run_id).map_err(fatal)?,
                    commit: s.commit.clone(),
                })
            })
            .collect::<Result<Vec<_>, ActivityError>>()?;
        Ok(Admit::Admitted(Admitted {
            project_id: plan.project_id.into(),
            change_id: plan.change_id.into(),
            stacked,
            policy: plan.policy,
            reservation_id: reservation_id.into(),
        }))
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Opened)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn opened(self: Arc<Self>, _ctx: ActivityContext, input: OpenedRequest) -> Result<(), ActivityError> {
        let OpenedRequest { run_id, base, start } = input;
        let row = self
            .store
            .get_workspace(&run_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(StoreError::not_found("workspace", run_id.as_str())))?;
        self.store
            .workspace_opened(
                &run_id,
                &base,
                &start,
                row.reservation_id.as_deref().unwrap_or_default(),
            )
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Record)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn workspace_record(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: belay_workflows::workspace::RecordRequest,
    ) -> Result<ChangeSetId, ActivityError> {
        let cs = self
            .store
            .insert_published_change_set(
                &input.run_id,
                &ChangeSetInput {
                    commit: input.commit,
                    contract_changes: input.contract_changes,
                    data_changes: input.data_changes,
                },
            )
            .await
            .map_err(store_error)?;
        Ok(cs.id)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::Finish)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn finish(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: FinishRequest,
    ) -> Result<serde_json::Value, ActivityError> {
        let cs = self
            .store
            .finish_publish(&input.run_id, &input.patch_ref)
            .await
            .map_err(store_error)?;
        serde_json::to_value(cs).map_err(fatal)
    }

    #[activity(definition = belay_workflows::workspace::workspace_definitions::End)]
    #[instrument(skip_all, fields(run.id = %input.run_id), err(Debug))]
    pub async fn workspace_end(self: Arc<Self>, _ctx: ActivityContext, input: EndRequest) -> Result<(), ActivityError> {
        let row = self.store.get_workspace(&input.run_id).await.map_err(store_error)?;
        if let Some(reservation) = row.as_ref().and_then(|r| r.reservation_id.clone()) {
            self.store
                .close_sandbox(&reservation, close_of(input.opened_at, now_secs()))
                .await
                .map_err(store_error)?;
        }
        if let Some(error) = &input.error {
            self.store
                .fail_workspace(&input.run_id, error)
                .await
                .map_err(store_error)?;
        }
        Ok(())
    }

    // EditSessionWorkflow: the Sandbox meter and the session's row.

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Reserve)]
    #[instrument(skip_all, fields(project.id = %project_id), err(Debug))]
    pub async fn edit_reserve(
        self: Arc<Self>,
        _ctx: ActivityContext,
        project_id: ProjectId,
    ) -> Result<belay_workflows::edit_session::Reserved, ActivityError> {
        match self
            .store
            .reserve_sandbox(&project_id, Reservation::EditSessionCommand, now_secs())
            .await
            .map_err(store_error)?
        {
            Reserve::Reserved { id, .. } => Ok(belay_workflows::edit_session::Reserved::Reserved(id.into())),
            Reserve::Refused(cap) => Ok(belay_workflows::edit_session::Reserved::Refused(Refusal::new(
                RefusalReason::SandboxCap,
                cap.to_string(),
            ))),
        }
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Settle)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn edit_settle(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: belay_workflows::edit_session::SettleRequest,
    ) -> Result<(), ActivityError> {
        // A start of 0 is a command that never started (histories recorded before a failed
        // command was charged carry it too).
        let started = (input.started_at > 0).then_some(input.started_at);
        self.store
            .close_sandbox(&input.reservation_id, close_of(started, input.ended_at))
            .await
            .map_err(store_error)?;
        self.store
            .touch_edit_session(&input.session_id)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::Forked)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn forked(self: Arc<Self>, _ctx: ActivityContext, input: ForkedRequest) -> Result<(), ActivityError> {
        self.store
            .edit_session_forked(&input.session_id, &input.start)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::edit_session::edit_definitions::End)]
    #[instrument(skip_all, fields(session.id = %input.session_id), err(Debug))]
    pub async fn edit_end(self: Arc<Self>, _ctx: ActivityContext, input: EndSession) -> Result<(), ActivityError> {
        self.store
            .end_edit_session(&input.session_id, &input.reason)
            .await
            .map_err(store_error)
            .map(|_| ())
    }

    // ForksSweepWorkflow: the forks to sweep and those swept.

    #[activity(definition = belay_workflows::sweep::sweep_definitions::Forks)]
    #[instrument(skip_all, err(Debug))]
    pub async fn forks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<Vec<belay_domain::repo::SweepFork>, ActivityError> {
        self.store.sweep_forks().await.map_err(store_error)
    }

    #[activity(definition = belay_workflows::sweep::sweep_definitions::MarkSwept)]
    #[instrument(skip_all, fields(repos = repos.len()), err(Debug))]
    pub async fn mark_swept(self: Arc<Self>, _ctx: ActivityContext, repos: Vec<String>) -> Result<(), ActivityError> {
        self.store.mark_forks_swept(&repos).await.map_err(store_error)
    }

    // ForksSweepWorkflow: the Candidate forks to sweep.

    #[activity(definition = belay_workflows::promotion::promotion_definitions::CandidateForks)]
    #[instrument(skip_all, err(Debug))]
    pub async fn candidate_forks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<Vec<CandidateForkToSweep>, ActivityError> {
        Ok(self
            .store
            .sweep_candidate_forks()
            .await
            .map_err(store_error)?
            .into_iter()
            .map(|r| CandidateForkToSweep {
                fork: r.fork,
                canonical: r.canonical,
                composed_commit: r.composed_commit,
            })
            .collect())
    }

    // TopUpWorkflow: each step one store transaction.

    #[activity(definition = belay_workflows::top_up::top_up_definitions::Claim)]
    #[instrument(skip_all, fields(plan.id = %input.plan_id), err(Debug))]
    pub async fn top_up_claim(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ClaimInput,
    ) -> Result<ClaimAnswer, ActivityError> {
        self.claim_step(input).await
    }

    #[activity(definition = belay_workflows::top_up::top_up_definitions::Enqueue)]
    #[instrument(skip_all, fields(plan.id = %input.plan_id, topup.id = %input.topup_id), err(Debug))]
    pub async fn top_up_enqueue(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: EnqueueInput,
    ) -> Result<Enqueued, ActivityError> {
        self.enqueue_step(input).await
    }

    /// The claim, then (when claimed) the enqueue and the release. A retry after a crash between
    /// them is the same holder: it takes its own claim again, finds its answer recorded (nothing
    /// is enqueued twice) and releases. An enqueue that fails still releases before the error is
    /// returned.
    #[activity(definition = belay_workflows::top_up::top_up_definitions::OneStep)]
    #[instrument(skip_all, fields(plan.id = %input.plan_id, topup.id = %input.holder), err(Debug))]
    pub async fn top_up_one_step(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ClaimInput,
    ) -> Result<OneStepAnswer, ActivityError> {
        let claim = self.claim_step(input.clone()).await?;
        if claim != ClaimAnswer::Claimed {
            return Ok(OneStepAnswer { claim, enqueued: 0 });
        }
        let enqueued = self
            .enqueue_step(EnqueueInput {
                plan_id: input.plan_id.clone(),
                account_id: input.account_id.clone(),
                topup_id: input.holder.clone(),
                of: input.of,
            })
            .await;
        let released = self
            .release_step(ReleaseInput {
                plan_id: input.plan_id,
                holder: input.holder,
                of: input.of,
            })
            .await;
        let enqueued = enqueued?;
        released?;
        Ok(OneStepAnswer {
            claim,
            enqueued: enqueued.enqueued,
        })
    }

    #[activity(definition = belay_workflows::top_up::top_up_definitions::Release)]
    #[instrument(skip_all, fields(plan.id = %input.plan_id), err(Debug))]
    pub async fn top_up_release(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReleaseInput,
    ) -> Result<bool, ActivityError> {
        self.release_step(input).await
    }

    // LadderClimbWorkflow: the climb's one step, one store transaction.

    #[activity(definition = belay_workflows::ladder::climb_definitions::Step)]
    #[instrument(skip_all, fields(ladder.id = %input.ladder_id), err(Debug))]
    pub async fn climb_step(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ClimbStepInput,
    ) -> Result<ClimbStep, ActivityError> {
        let mut tx = self.store.begin().await.map_err(store_error)?;
        let found = ladders::climb_step(&mut tx, &input.account_id, &input.ladder_id)
            .await
            .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        let Some((cancelled, p)) = found else {
            return Ok(ClimbStep::default());
        };
        if !cancelled.is_empty() {
            info!(ladder.cancelled = cancelled.len(), "early stop");
        }
        Ok(ClimbStep {
            active: true,
            climbers: p
                .board
                .climbers
                .into_iter()
                .map(|c| ClimberLine {
                    climber_key: c.climber_key.0,
                    status: c.status,
                    current_rung: c.current_rung.map(|r| r.0),
                    unlaunchable: c.unlaunchable.map(|u| {
                        serde_json::to_value(&u)
                            .ok()
                            .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_string))
                            .unwrap_or_else(|| "unlaunchable".to_string())
                    }),
                })
                .collect(),
            cancelled: cancelled.len() as u64,
        })
    }

    // CandidateVerificationWorkflow: loads and records.

    #[activity(definition = belay_workflows::verification::verify_definitions::Load)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn load(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Loaded, ActivityError> {
        let rows = self
            .store
            .verification_rows(&candidate_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(StoreError::not_found("candidate", candidate_id.as_str())))?;
        let policy = self
            .store
            .active_policy_for_worker(&rows.candidate.project_id)
            .await
            .map_err(store_error)?;
        let change_sets = rows
            .change_sets
            .into_iter()
            .map(|r| {
                Ok(LoadedChangeSet {
                    fork: belay_domain::repo::workspace_fork(r.change_set.run_id.as_str()).map_err(fatal)?,
                    canonical_base: r.workspace_base,
                    canonical_base_generation: r.workspace_base_generation,
                    workspace_base: r.workspace_start,
                    change_set: r.change_set,
                })
            })
            .collect::<Result<Vec<_>, ActivityError>>()?;
        Ok(Loaded {
            candidate: rows.candidate,
            change: rows.change,
            tasks: rows.tasks,
            change_sets,
            policy,
            canonical_generation: rows.canonical_generation,
            kept_criteria: rows.kept_criteria,
        })
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Status)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn status(self: Arc<Self>, _ctx: ActivityContext, input: StatusRequest) -> Result<bool, ActivityError> {
        self.store
            .set_candidate_status(&input.candidate_id, &input.from, input.to, input.reason.as_deref())
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Stale)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn stale(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: StaleRequest,
    ) -> Result<Option<CandidateId>, ActivityError> {
        Ok(self
            .store
            .recompose_stale(&input.candidate_id, &input.reason)
            .await
            .map_err(store_error)?
            .map(|c| c.id))
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Reserve)]
    #[instrument(skip_all, fields(project.id = %input.project_id, candidate.id = %input.candidate_id), err(Debug))]
    pub async fn verify_reserve(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReserveRequest,
    ) -> Result<belay_workflows::verification::Reserved, ActivityError> {
        let at = now_secs();
        Ok(
            match self
                .store
                .reserve_sandbox(&input.project_id, Reservation::CandidateChecks, at)
                .await
                .map_err(store_error)?
            {
                Reserve::Reserved { id, .. } => {
                    belay_workflows::verification::Reserved::Reserved { reservation_id: id, at }
                }
                Reserve::Refused(cap) => belay_workflows::verification::Reserved::Refused {
                    reason: cap.to_string(),
                },
            },
        )
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Settle)]
    #[instrument(skip_all, fields(reservation.id = %input.reservation_id), err(Debug))]
    pub async fn verify_settle(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: belay_workflows::verification::SettleRequest,
    ) -> Result<(), ActivityError> {
        let end = now_secs().max(input.start);
        self.store
            .settle_sandbox(&input.reservation_id, input.start, end)
            .await
            .map(drop)
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Composed)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, commit = %input.commit), err(Debug))]
    pub async fn composed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ComposedRecord,
    ) -> Result<bool, ActivityError> {
        self.store
            .record_composition(&input.candidate_id, &input.commit, &input.tree, &input.plan)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Record)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, check.id = %input.check_id, attempt = input.attempt), err(Debug))]
    pub async fn verify_record(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: belay_workflows::verification::RecordRequest,
    ) -> Result<Evidence, ActivityError> {
        let key = evidence_key(input.candidate_id.as_str(), &input.check_id, input.attempt);
        let mut detail = input.detail.clone();
        if let Some(o) = detail.as_object_mut() {
            o.insert("result".into(), serde_json::to_value(&input.result).map_err(fatal)?);
        }
        put_object(self.objects.as_ref(), &key, &detail).await?;
        let now = now_ms();
        let row = self
            .store
            .record_evidence(&NewEvidence {
                candidate_id: input.candidate_id.to_string(),
                check_id: input.check_id,
                attempt: input.attempt,
                result: input.result,
                object_key: Some(key),
                started_at: input.started_at.unwrap_or(now),
                completed_at: input.completed_at.unwrap_or(now),
            })
            .await
            .map_err(store_error)?;
        Ok(row.evidence)
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::Evidence)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn evidence(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Vec<Evidence>, ActivityError> {
        Ok(self
            .store
            .list_evidence(&candidate_id)
            .await
            .map_err(store_error)?
            .into_iter()
            .map(|r| r.evidence)
            .collect())
    }

    #[activity(definition = belay_workflows::verification::verify_definitions::AcceptanceRepair)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn acceptance_repair(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Option<belay_domain::ids::TaskId>, ActivityError> {
        self.store
            .repair_lone_after_acceptance(&candidate_id)
            .await
            .map_err(store_error)
    }

    // PromotionWorkflow and `winner_ready`: the precondition rows, the compare-and-swap, the sync
    // records and the settle.

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Facts)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn facts(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Option<PromotionRowsFacts>, ActivityError> {
        let Some(r) = self.store.promotion_rows(&candidate_id).await.map_err(store_error)? else {
            return Ok(None);
        };
        Ok(Some(PromotionRowsFacts {
            candidate: r.candidate,
            risk_tier: r.risk_tier,
            evidence: r.evidence,
            approval: r.approval,
            active_policy: r.active_policy,
            canonical_generation: r.canonical_generation,
            sibling_pending: r.sibling_pending,
            promoted_generation: r.promotion.map(|p| p.generation),
        }))
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Cas)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, generation = input.expected_generation), err(Debug))]
    pub async fn cas(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CasRequest,
    ) -> Result<PromotionOutcome, ActivityError> {
        let out = self
            .store
            .promote_cas(&input.candidate_id, input.expected_generation, &input.plan_policy)
            .await
            .map_err(store_error)?;
        if matches!(out, PromotionOutcome::Promoted { .. }) && crate::failpoint(AFTER_CAS) {
            tracing::warn!("failpoint {AFTER_CAS}: exiting after the compare-and-swap");
            std::process::exit(86);
        }
        Ok(out)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Pushed)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn pushed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_promotion_pushed(&candidate_id)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Synced)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn synced(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<(), ActivityError> {
        self.store
            .mark_promotion_synced(&candidate_id)
            .await
            .map(drop)
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Settle)]
    #[instrument(skip_all, fields(project.id = %input.project_id, generation = input.generation), err(Debug))]
    pub async fn promotion_settle(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: SettleOlderRequest,
    ) -> Result<SettledOlder, ActivityError> {
        self.settle_older(input.project_id.as_str(), input.generation).await
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::Released)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id, generation = input.generation), err(Debug))]
    pub async fn released(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReleasedRequest,
    ) -> Result<SettledOlder, ActivityError> {
        let id = input.candidate_id.as_str();
        self.store
            .mark_promotion_pushed(&CandidateId::from(id))
            .await
            .map_err(store_error)?;
        self.store
            .mark_promotion_synced(&CandidateId::from(id))
            .await
            .map_err(store_error)?;
        self.settle_older(input.project_id.as_str(), input.generation).await
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::WinnerFacts)]
    #[instrument(skip_all, fields(candidate.id = %candidate_id), err(Debug))]
    pub async fn winner_facts(
        self: Arc<Self>,
        _ctx: ActivityContext,
        candidate_id: CandidateId,
    ) -> Result<Option<WinnerFacts>, ActivityError> {
        let Some(r) = self.store.promotion_rows(&candidate_id).await.map_err(store_error)? else {
            return Ok(None);
        };
        let has_siblings = self.store.has_siblings(&candidate_id).await.map_err(store_error)?;
        let acceptance_passed = r
            .candidate
            .plan
            .as_ref()
            .and_then(|p| latest_per_check(p, &r.evidence).get(&CheckId::Acceptance).copied())
            .is_some_and(|e| e.status == EvidenceStatus::Pass && e.coverage == Coverage::CheckedSupported);
        Ok(Some(WinnerFacts {
            candidate: r.candidate,
            has_siblings,
            risk_tier: r.risk_tier,
            active_policy: r.active_policy,
            acceptance_passed,
        }))
    }

    #[activity(definition = belay_workflows::promotion::promotion_definitions::RequestApproval)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn request_approval(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ApprovalRequest,
    ) -> Result<Approval, ActivityError> {
        self.store
            .request_approval(&input.candidate_id, &input.tree, &input.gates, &input.reason)
            .await
            .map_err(store_error)
    }

    // Sibling selection and the acceptance check: the records.

    #[activity(definition = belay_workflows::selection::selection_definitions::AcceptanceStore)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn acceptance_store(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: AcceptanceRecord,
    ) -> Result<(), ActivityError> {
        let k = self
            .store
            .candidate_for_worker(&input.candidate_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| fatal(Plain(format!("candidate {} not found", input.candidate_id))))?;
        let judged = input.criteria.is_some();
        let metrics = CandidateMetrics {
            criteria_met: judged.then_some(input.outcome.criteria_met),
            criteria_total: judged.then_some(input.outcome.criteria_total),
            cost_usd: Some(input.cost_usd),
            ..k.metrics
        };
        self.store
            .set_acceptance(input.candidate_id.as_str(), input.criteria.as_deref(), &metrics)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::selection::selection_definitions::Claim)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn selection_claim(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ClaimRequest,
    ) -> Result<SelectionStep, ActivityError> {
        self.store
            .claim_selection(&input.candidate_id, &input.claimant)
            .await
            .map_err(store_error)
    }

    #[activity(definition = belay_workflows::selection::selection_definitions::Apply)]
    #[instrument(skip_all, fields(candidate.id = %input.candidate_id), err(Debug))]
    pub async fn apply(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ApplyRequest,
    ) -> Result<SelectionDone, ActivityError> {
        self.store
            .apply_selection(&input.candidate_id, &input.claimant, input.judge.as_ref())
            .await
            .map_err(store_error)
    }

    // The probe's no-op.

    #[activity(definition = belay_workflows::contracts::probe_definitions::Echo)]
    #[instrument(skip_all, err(Debug))]
    pub async fn echo(_ctx: ActivityContext, input: String) -> Result<String, ActivityError> {
        Ok(input)
    }
}
