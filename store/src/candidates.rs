//! Project policies, Candidates and their Evidence: what the verification workflow reads once per
//! run (the policy), moves through its statuses (the Candidate) and records per check attempt (one
//! Evidence row per Candidate, check and attempt, so a retried step writes no second row).
//!
//! Reads through the API are scoped to the owning account; the `*_for_worker` reads are the
//! workflow's, which has no account.

use crate::Tx;
use crate::rows::{enum_from, enum_text, json, to_json};
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::candidate::{Candidate, CandidateMetrics, CandidateStatus, ChosenRefusal, chosen_change_sets};
use belay_domain::change::{ChangeSet, ChangeStatus};
use belay_domain::check::CheckId;
use belay_domain::evidence::{CheckResult, Coverage, Evidence, EvidenceStatus};
use belay_domain::ids::{AccountId, CandidateId, ChangeId, ChangeSetId, EvidenceId, ProjectId};
use belay_domain::policy::{DEFAULT_POLICY, PolicyInput, ProjectPolicy};
use sqlx::Row;
use sqlx::any::AnyRow;

pub(crate) const CANDIDATE_COLUMNS: &str = "k.id, k.change_id, k.project_id, k.base_generation, k.base_commit, k.base_tree, \
     k.change_set_ids, k.status, k.status_reason, k.composed_commit, k.composed_tree, k.plan_json, k.selection_json, \
     k.acceptance_json, k.metrics_json, k.recomposed_as, k.created_at";

macro_rules! evidence_columns {
    () => {
        "id, candidate_id, check_id, kind, attempt, status, coverage, summary, metric_json, object_key, duration_ms, \
         started_at, completed_at"
    };
}

const EVIDENCE_COLUMNS: &str = evidence_columns!();

/// A Candidate's Evidence, oldest first.
const EVIDENCE_OF: &str = concat!(
    "select ",
    evidence_columns!(),
    " from evidence where candidate_id = $1 order by completed_at, check_id, attempt"
);

/// A Candidate's Evidence, oldest first, read in the caller's transaction.
pub(crate) async fn evidence_in(tx: &mut Tx, candidate_id: &CandidateId) -> Result<Vec<Evidence>, StoreError> {
    let rows = sqlx::query(EVIDENCE_OF)
        .bind(candidate_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    rows.iter().map(|r| evidence_row(r).map(|e| e.evidence)).collect()
}

fn opt_json<T: serde::de::DeserializeOwned>(r: &AnyRow, column: &str) -> Result<Option<T>, StoreError> {
    r.try_get::<Option<String>, _>(column)?
        .map(|t| json(&t, column))
        .transpose()
}

pub(crate) fn candidate_row(r: &AnyRow) -> Result<Candidate, StoreError> {
    Ok(Candidate {
        id: r.try_get::<String, _>("id")?.into(),
        change_id: r.try_get::<String, _>("change_id")?.into(),
        project_id: r.try_get::<String, _>("project_id")?.into(),
        base_generation: r.try_get("base_generation")?,
        base_commit: r.try_get("base_commit")?,
        base_tree: r.try_get("base_tree")?,
        change_set_ids: json(&r.try_get::<String, _>("change_set_ids")?, "change_set_ids")?,
        status: enum_from(&r.try_get::<String, _>("status")?, "candidate status")?,
        status_reason: r.try_get("status_reason")?,
        composed_commit: r.try_get("composed_commit")?,
        composed_tree: r.try_get("composed_tree")?,
        plan: opt_json(r, "plan_json")?,
        selection: opt_json(r, "selection_json")?,
        acceptance: opt_json(r, "acceptance_json")?,
        metrics: json(&r.try_get::<String, _>("metrics_json")?, "metrics_json")?,
        recomposed_as: r.try_get::<Option<String>, _>("recomposed_as")?.map(Into::into),
        created_at: r.try_get("created_at")?,
    })
}

/// An Evidence row with where its object (command, exit code, output tail) is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceRow {
    pub evidence: Evidence,
    pub object_key: Option<String>,
}

fn evidence_row(r: &AnyRow) -> Result<EvidenceRow, StoreError> {
    let check: String = r.try_get("check_id")?;
    let attempt: i64 = r.try_get("attempt")?;
    let duration: i64 = r.try_get("duration_ms")?;
    Ok(EvidenceRow {
        evidence: Evidence {
            id: r.try_get::<String, _>("id")?.into(),
            candidate_id: r.try_get::<String, _>("candidate_id")?.into(),
            check_id: check
                .parse::<CheckId>()
                .map_err(|_| StoreError::Corrupt(format!("unknown check id {check:?}")))?,
            kind: enum_from(&r.try_get::<String, _>("kind")?, "check kind")?,
            attempt: attempt as u32,
            status: enum_from::<EvidenceStatus>(&r.try_get::<String, _>("status")?, "evidence status")?,
            coverage: enum_from::<Coverage>(&r.try_get::<String, _>("coverage")?, "coverage")?,
            summary: r.try_get("summary")?,
            metric: opt_json(r, "metric_json")?,
            duration_ms: duration.max(0) as u64,
            started_at: r.try_get("started_at")?,
            completed_at: r.try_get("completed_at")?,
        },
        object_key: r.try_get("object_key")?,
    })
}

/// A ChangeSet of a Candidate with where its workspace started.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedRow {
    pub change_set: ChangeSet,
    /// Canonical `main` when its workspace forked.
    pub workspace_base: Option<String>,
    /// The canonical generation `workspace_base` was, when the project's rows know it.
    pub workspace_base_generation: Option<i64>,
    /// The workspace's start commit (base plus the stacked merges).
    pub workspace_start: Option<String>,
}

/// What [`Store::verification_rows`] reads.
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationRows {
    pub candidate: Candidate,
    pub change: belay_domain::change::Change,
    pub tasks: Vec<belay_domain::change::Task>,
    pub change_sets: Vec<LoadedRow>,
    pub canonical_generation: i64,
    /// The acceptance criteria of the project's other Changes promoted while this one ran, in
    /// promotion order: the kept criteria its acceptance check also judges.
    pub kept_criteria: Vec<String>,
}

/// What a check step records.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvidence {
    pub candidate_id: String,
    pub check_id: CheckId,
    pub attempt: u32,
    pub result: CheckResult,
    pub object_key: Option<String>,
    pub started_at: i64,
    pub completed_at: i64,
}

/// How a Candidate came to be: the verification start's default set, or an explicit composition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Start,
    Explicit,
}

pub(crate) async fn policy_of(tx: &mut Tx, project_id: &ProjectId) -> Result<ProjectPolicy, StoreError> {
    let row = sqlx::query("select policy from project_policies where project_id = $1 order by version desc limit 1")
        .bind(project_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    match row {
        Some(r) => json(&r.try_get::<String, _>("policy")?, "policy"),
        None => Ok(DEFAULT_POLICY.clone()),
    }
}

/// The active policy of a project the account owns: its latest version, or `DEFAULT_POLICY`.
pub async fn active_policy(
    tx: &mut Tx,
    account_id: &AccountId,
    project_id: &ProjectId,
) -> Result<ProjectPolicy, StoreError> {
    if crate::projects::get_project(tx, account_id, project_id)
        .await?
        .is_none()
    {
        return Err(StoreError::not_found("project", project_id.as_str()));
    }
    policy_of(tx, project_id).await
}

/// The active policy, read by the verification workflow once per run.
pub async fn active_policy_for_worker(tx: &mut Tx, project_id: &ProjectId) -> Result<ProjectPolicy, StoreError> {
    policy_of(tx, project_id).await
}

/// Writes the next version of a project's policy. Two writes racing for one version: one
/// wins, the other is built again on top of it.
pub async fn put_policy(
    tx: &mut Tx,
    account_id: &AccountId,
    project_id: &ProjectId,
    input: &PolicyInput,
) -> Result<ProjectPolicy, StoreError> {
    input.validate()?;
    for _ in 0..5 {
        let active = active_policy(tx, account_id, project_id).await?;
        let next = active.next_version(input)?;
        let inserted = sqlx::query(
            r#"insert into project_policies (project_id, version, policy, created_at) values ($1, $2, $3, $4)
               on conflict (project_id, version) do nothing"#,
        )
        .bind(project_id.as_str())
        .bind(next.version as i64)
        .bind(to_json(&next))
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
        if inserted.rows_affected() == 0 {
            continue;
        }
        sqlx::query("update projects set policy_ref = $2, updated_at = $3 where id = $1")
            .bind(project_id.as_str())
            .bind(&next.id)
            .bind(now_ms())
            .execute(tx.conn())
            .await?;
        events::append(
            tx.conn(),
            project_id,
            "policy.updated",
            &serde_json::json!({ "policyId": next.id, "version": next.version }),
        )
        .await?;
        return Ok(next);
    }
    Err(StoreError::Conflict("policy: written concurrently; try again".into()))
}

/// Starts verification of a Change: `verification.started`, the Change `verifying`, and one
/// Candidate holding the latest ChangeSet of every Task, in Work Graph order.
pub async fn start_verification(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
) -> Result<Candidate, StoreError> {
    new_candidate(tx, account_id, change_id, None, Origin::Start).await
}

/// Composes an explicit set of the Change's ChangeSets as a new Candidate.
pub async fn compose_candidate(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
    change_set_ids: &[String],
) -> Result<Candidate, StoreError> {
    new_candidate(tx, account_id, change_id, Some(change_set_ids), Origin::Explicit).await
}

/// The ChangeSets of a Change, each Task's in the order they were published, Tasks in Work
/// Graph order (a Task is created after the Tasks it depends on).
pub(crate) async fn change_sets_of(tx: &mut Tx, change_id: &ChangeId) -> Result<Vec<ChangeSet>, StoreError> {
    let rows = sqlx::query(
        r#"select s.id, s.task_id, s.run_id, s.commit_id, s.contract_changes, s.data_changes, s.patch_ref, s.created_at
           from change_sets s join tasks t on t.id = s.task_id
           where t.change_id = $1 order by t.created_at, t.key, s.created_at, s.id"#,
    )
    .bind(change_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(crate::changes::change_set_row).collect()
}

/// A Change that can still be verified, the account's, and its project's canonical commit and
/// tree (a new Candidate's base); a conflict when the Change has ended or the project has no
/// canonical commit yet.
pub(crate) struct VerifiableBase {
    pub project: belay_domain::project::Project,
    pub base_commit: String,
    pub base_tree: String,
}

pub(crate) async fn verifiable_base(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
) -> Result<VerifiableBase, StoreError> {
    let change = crate::changes::get_change(tx, account_id, change_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change", change_id.as_str()))?;
    let project = crate::projects::get_project(tx, account_id, &change.project_id)
        .await?
        .ok_or_else(|| StoreError::not_found("project", &change.project_id))?;
    if change.status.is_finished() {
        return Err(StoreError::Conflict(format!(
            "change {change_id} is {}; it can no longer be verified",
            enum_text(&change.status)
        )));
    }
    let (Some(base_commit), Some(base_tree)) = (project.canonical_commit.clone(), project.canonical_tree.clone())
    else {
        return Err(StoreError::Conflict(format!(
            "project {} has no canonical commit yet",
            project.id
        )));
    };
    Ok(VerifiableBase {
        project,
        base_commit,
        base_tree,
    })
}

async fn new_candidate(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
    explicit: Option<&[String]>,
    origin: Origin,
) -> Result<Candidate, StoreError> {
    let VerifiableBase {
        project,
        base_commit,
        base_tree,
    } = verifiable_base(tx, account_id, change_id).await?;
    let all = change_sets_of(tx, change_id).await?;
    let chosen = chosen_change_sets(&all, explicit).map_err(|refusal| {
        StoreError::Conflict(match refusal {
            // Well-formed, but not (or no longer) one of this Change's: a fact about the
            // Change's state, not about the request's shape.
            ChosenRefusal::NotOfChange(id) => format!("changeSetIds: {id} is not a ChangeSet of change {change_id}"),
            ChosenRefusal::Empty => format!("change {change_id} has no ChangeSet to verify"),
        })
    })?;
    let id = CandidateId::from_body(&new_id_body());
    let now = now_ms();
    if origin == Origin::Start {
        let moved = sqlx::query(
            "update changes set status = 'verifying', updated_at = $2 where id = $1 and status in ('running', 'verifying')",
        )
        .bind(change_id.as_str())
        .bind(now)
        .execute(tx.conn())
        .await?;
        if moved.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!(
                "change {change_id} can no longer be verified"
            )));
        }
        events::append(
            tx.conn(),
            change_id,
            "verification.started",
            &serde_json::json!({ "candidateId": id.as_str() }),
        )
        .await?;
    }
    insert_candidate(
        tx,
        &id,
        change_id,
        &project.id,
        project.generation,
        &base_commit,
        &base_tree,
        &chosen,
        now,
    )
    .await?;
    candidate_for_worker(tx, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("candidate", &id))
}

/// A Candidate of a Change the account owns.
pub async fn get_candidate(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &CandidateId,
) -> Result<Option<Candidate>, StoreError> {
    let sql = format!(
        "select {CANDIDATE_COLUMNS} from candidates k join projects p on p.id = k.project_id \
         where k.id = $1 and p.account_id = $2 and p.status <> 'deleting'"
    );
    let row = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(candidate_row).transpose()
}

pub async fn candidate_for_worker(tx: &mut Tx, id: &CandidateId) -> Result<Option<Candidate>, StoreError> {
    let sql = format!("select {CANDIDATE_COLUMNS} from candidates k where k.id = $1");
    let row = sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await?;
    row.as_ref().map(candidate_row).transpose()
}

/// A Change's Candidates, oldest first.
pub async fn list_candidates(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
) -> Result<Vec<Candidate>, StoreError> {
    if crate::changes::get_change(tx, account_id, change_id).await?.is_none() {
        return Err(StoreError::not_found("change", change_id.as_str()));
    }
    let sql =
        format!("select {CANDIDATE_COLUMNS} from candidates k where k.change_id = $1 order by k.created_at, k.id");
    let rows = sqlx::query(&sql).bind(change_id.as_str()).fetch_all(tx.conn()).await?;
    rows.iter().map(candidate_row).collect()
}

/// Moves a Candidate to `to` when it is in one of `from`; false when it was not (a retry of a
/// step already done, or a Candidate another run settled).
pub async fn set_candidate_status(
    tx: &mut Tx,
    id: &CandidateId,
    from: &[CandidateStatus],
    to: CandidateStatus,
    reason: Option<&str>,
) -> Result<bool, StoreError> {
    let from: Vec<String> = from.iter().map(|s| format!("'{}'", s.as_str())).collect();
    let sql = format!(
        "update candidates set status = $2, status_reason = $3, updated_at = $4 where id = $1 and status in ({})",
        from.join(", ")
    );
    let moved = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(to.as_str())
        .bind(reason)
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    if moved.rows_affected() == 1 {
        events::append(
            tx.conn(),
            id,
            &format!("candidate.{}", to.as_str()),
            &serde_json::json!({ "reason": reason }),
        )
        .await?;
        // A gap the gate found is repaired before a person sees it (once per Change).
        if let (CandidateStatus::Rejected, Some(reason)) = (to, reason) {
            crate::selection::repair_after_gate(tx, id, reason).await?;
        }
    }
    Ok(moved.rows_affected() == 1)
}

/// Records the composed commit and tree and the plan, moves the Candidate from `composing`
/// to `verifying` and appends `candidate.composed`; false when it was not composing.
pub async fn record_composition(
    tx: &mut Tx,
    id: &CandidateId,
    composed_commit: &str,
    composed_tree: &str,
    plan: &belay_domain::plan::VerificationPlan,
) -> Result<bool, StoreError> {
    let moved = sqlx::query(
        r#"update candidates set status = 'verifying', composed_commit = $2, composed_tree = $3, plan_json = $4, updated_at = $5
           where id = $1 and status = 'composing'"#,
    )
    .bind(id.as_str())
    .bind(composed_commit)
    .bind(composed_tree)
    .bind(to_json(plan))
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 1 {
        events::append(
            tx.conn(),
            id,
            "candidate.composed",
            &serde_json::json!({ "composedCommit": composed_commit, "policyId": plan.policy.policy_id }),
        )
        .await?;
    }
    Ok(moved.rows_affected() == 1)
}

/// Stores the Candidate's metrics (`metrics_json`).
pub async fn set_candidate_metrics(
    tx: &mut Tx,
    id: &CandidateId,
    metrics: &CandidateMetrics,
) -> Result<(), StoreError> {
    sqlx::query("update candidates set metrics_json = $2, updated_at = $3 where id = $1")
        .bind(id.as_str())
        .bind(to_json(metrics))
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Marks a Candidate stale (when it is not final yet) and composes the same ChangeSets on the
/// project's current canonical base as a new Candidate, recorded on the old one; a second
/// call answers the Candidate the first made.
pub async fn recompose_stale(tx: &mut Tx, id: &CandidateId, reason: &str) -> Result<Option<Candidate>, StoreError> {
    let Some(old) = candidate_for_worker(tx, id).await? else {
        return Err(StoreError::not_found("candidate", id.as_str()));
    };
    if let Some(new) = &old.recomposed_as {
        return candidate_for_worker(tx, new).await;
    }
    let project = sqlx::query("select generation, canonical_commit, canonical_tree from projects where id = $1")
        .bind(old.project_id.as_str())
        .fetch_one(tx.conn())
        .await?;
    let generation: i64 = project.try_get("generation")?;
    let commit: Option<String> = project.try_get("canonical_commit")?;
    let tree: Option<String> = project.try_get("canonical_tree")?;
    let (Some(commit), Some(tree)) = (commit, tree) else {
        return Ok(None);
    };
    let new_id = CandidateId::from_body(&new_id_body());
    let now = now_ms();
    let claimed = sqlx::query(
        r#"update candidates set status = case when status in ('composing', 'verifying', 'verified', 'stale') then 'stale' else status end,
               status_reason = case when status in ('composing', 'verifying', 'verified') then $3 else status_reason end,
               recomposed_as = $2, updated_at = $4
           where id = $1 and recomposed_as is null"#,
    )
    .bind(id.as_str())
    .bind(new_id.as_str())
    .bind(reason)
    .bind(now)
    .execute(tx.conn())
    .await?;
    if claimed.rows_affected() == 0 {
        return Box::pin(recompose_stale(tx, id, reason)).await;
    }
    events::append(
        tx.conn(),
        id,
        "candidate.stale",
        &serde_json::json!({ "reason": reason, "recomposedAs": new_id.as_str() }),
    )
    .await?;
    insert_candidate(
        tx,
        &new_id,
        &old.change_id,
        &old.project_id,
        generation,
        &commit,
        &tree,
        &old.change_set_ids,
        now,
    )
    .await?;
    candidate_for_worker(tx, &new_id).await
}

/// Records one check attempt. A second record for the same Candidate, check and attempt (a
/// retried step) writes nothing and answers the first.
pub async fn record_evidence(tx: &mut Tx, new: &NewEvidence) -> Result<EvidenceRow, StoreError> {
    let id = EvidenceId::from_body(&new_id_body());
    let duration = (new.completed_at - new.started_at).max(0);
    sqlx::query(
        r#"insert into evidence (id, candidate_id, check_id, kind, attempt, status, coverage, summary, metric_json,
               object_key, duration_ms, started_at, completed_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
           on conflict (candidate_id, check_id, attempt) do nothing"#,
    )
    .bind(id.as_str())
    .bind(&new.candidate_id)
    .bind(new.check_id.to_string())
    .bind(enum_text(&new.check_id.kind()))
    .bind(new.attempt as i64)
    .bind(enum_text(&new.result.status))
    .bind(enum_text(&new.result.coverage))
    .bind(&new.result.summary)
    .bind(new.result.metric.as_ref().map(to_json))
    .bind(new.object_key.as_deref())
    .bind(duration)
    .bind(new.started_at)
    .bind(new.completed_at)
    .execute(tx.conn())
    .await?;
    evidence_of(
        tx,
        &CandidateId::from(new.candidate_id.as_str()),
        &new.check_id,
        new.attempt,
    )
    .await?
    .ok_or_else(|| {
        StoreError::not_found(
            "evidence",
            format!("{} {} {}", new.candidate_id, new.check_id, new.attempt),
        )
    })
}

/// The Evidence record of one check attempt of a Candidate, by its key (Candidate, check,
/// attempt): what a retried check step answers instead of running again.
pub async fn evidence_of(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    check_id: &CheckId,
    attempt: u32,
) -> Result<Option<EvidenceRow>, StoreError> {
    let sql =
        format!("select {EVIDENCE_COLUMNS} from evidence where candidate_id = $1 and check_id = $2 and attempt = $3");
    let row = sqlx::query(&sql)
        .bind(candidate_id.as_str())
        .bind(check_id.to_string())
        .bind(attempt as i64)
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(evidence_row).transpose()
}

/// Every Evidence record of a Candidate, in the order they completed.
pub async fn list_evidence(tx: &mut Tx, candidate_id: &CandidateId) -> Result<Vec<EvidenceRow>, StoreError> {
    let rows = sqlx::query(EVIDENCE_OF)
        .bind(candidate_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    rows.iter().map(evidence_row).collect()
}

/// Everything the verification workflow's first step reads, or `None` for no such Candidate.
pub async fn verification_rows(
    tx: &mut Tx,
    candidate_id: &CandidateId,
) -> Result<Option<VerificationRows>, StoreError> {
    let Some(candidate) = candidate_for_worker(tx, candidate_id).await? else {
        return Ok(None);
    };
    let project = sqlx::query("select account_id, generation from projects where id = $1")
        .bind(candidate.project_id.as_str())
        .fetch_one(tx.conn())
        .await?;
    let account = AccountId(project.try_get("account_id")?);
    let generation: i64 = project.try_get("generation")?;
    let change = crate::changes::get_change(tx, &account, &candidate.change_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change", &candidate.change_id))?;
    let tasks = crate::changes::list_tasks(tx, &account, &candidate.change_id).await?;
    let all = change_sets_of(tx, &candidate.change_id).await?;
    let mut change_sets = Vec::new();
    for id in &candidate.change_set_ids {
        let cs = all
            .iter()
            .find(|c| &c.id == id)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt(format!("candidate {candidate_id} holds unknown ChangeSet {id}")))?;
        let ws = sqlx::query("select base_commit, start_commit from workspaces where run_id = $1")
            .bind(cs.run_id.as_str())
            .fetch_optional(tx.conn())
            .await?;
        let (base, start): (Option<String>, Option<String>) = match ws {
            Some(r) => (r.try_get("base_commit")?, r.try_get("start_commit")?),
            None => (None, None),
        };
        let workspace_base_generation = match &base {
            Some(b) => crate::promotion::generation_of_commit(tx, &candidate.project_id, b).await?,
            None => None,
        };
        change_sets.push(LoadedRow {
            change_set: cs,
            workspace_base_generation,
            workspace_base: base,
            workspace_start: start,
        });
    }
    let kept_criteria = kept_criteria(tx, &change, candidate.base_generation).await?;
    Ok(Some(VerificationRows {
        candidate,
        change,
        tasks,
        change_sets,
        canonical_generation: generation,
        kept_criteria,
    }))
}

/// The acceptance criteria of the other Changes of `change`'s project that went live while it
/// ran: promoted at or after it was created, onto a generation at most `base_generation` (a
/// later one is not in the Candidate's source; that Candidate is stale and recomposed).
pub async fn kept_criteria(
    tx: &mut Tx,
    change: &belay_domain::change::Change,
    base_generation: i64,
) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        r#"select c.acceptance_criteria from promotions p
           join candidates k on k.id = p.candidate_id
           join changes c on c.id = k.change_id
           where p.project_id = $1 and c.id <> $2 and p.created_at >= $3 and p.generation <= $4
           order by p.generation"#,
    )
    .bind(change.project_id.as_str())
    .bind(change.id.as_str())
    .bind(change.created_at)
    .bind(base_generation)
    .fetch_all(tx.conn())
    .await?;
    let mut kept = Vec::new();
    for r in &rows {
        let criteria: Vec<String> = json(&r.try_get::<String, _>("acceptance_criteria")?, "acceptance_criteria")?;
        kept.extend(criteria);
    }
    Ok(kept)
}

/// Whether a Change is cancelled, read by the workflow's first step.
pub async fn change_status_for_worker(tx: &mut Tx, change_id: &ChangeId) -> Result<ChangeStatus, StoreError> {
    let row = sqlx::query("select status from changes where id = $1")
        .bind(change_id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("change", change_id.as_str()))?;
    enum_from(&row.try_get::<String, _>("status")?, "change status")
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn insert_candidate(
    tx: &mut Tx,
    id: &CandidateId,
    change_id: &ChangeId,
    project_id: &ProjectId,
    base_generation: i64,
    base_commit: &str,
    base_tree: &str,
    change_set_ids: &[ChangeSetId],
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into candidates (id, change_id, project_id, base_generation, base_commit, base_tree, change_set_ids,
               status, metrics_json, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, $7, 'composing', '{}', $8, $8)"#,
    )
    .bind(id.as_str())
    .bind(change_id.as_str())
    .bind(project_id.as_str())
    .bind(base_generation)
    .bind(base_commit)
    .bind(base_tree)
    .bind(to_json(&change_set_ids))
    .bind(now)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        id.as_str(),
        "candidate.created",
        &serde_json::json!({ "changeId": change_id, "changeSetIds": change_set_ids }),
    )
    .await?;
    Ok(())
}

crate::one_step! {
    read active_policy(account_id: &AccountId, project_id: &ProjectId) -> ProjectPolicy;
    read active_policy_for_worker(project_id: &ProjectId) -> ProjectPolicy;
    write put_policy(account_id: &AccountId, project_id: &ProjectId, input: &PolicyInput) -> ProjectPolicy;
    write start_verification(account_id: &AccountId, change_id: &ChangeId) -> Candidate;
    write compose_candidate(account_id: &AccountId, change_id: &ChangeId, change_set_ids: &[String]) -> Candidate;
    read get_candidate(account_id: &AccountId, id: &CandidateId) -> Option<Candidate>;
    read candidate_for_worker(id: &CandidateId) -> Option<Candidate>;
    read list_candidates(account_id: &AccountId, change_id: &ChangeId) -> Vec<Candidate>;
    write set_candidate_status(id: &CandidateId, from: &[CandidateStatus], to: CandidateStatus, reason: Option<&str>) -> bool;
    write record_composition(id: &CandidateId, composed_commit: &str, composed_tree: &str, plan: &belay_domain::plan::VerificationPlan) -> bool;
    write set_candidate_metrics(id: &CandidateId, metrics: &CandidateMetrics) -> ();
    write recompose_stale(id: &CandidateId, reason: &str) -> Option<Candidate>;
    write record_evidence(new: &NewEvidence) -> EvidenceRow;
    read evidence_of(candidate_id: &CandidateId, check_id: &CheckId, attempt: u32) -> Option<EvidenceRow>;
    read list_evidence(candidate_id: &CandidateId) -> Vec<EvidenceRow>;
    read verification_rows(candidate_id: &CandidateId) -> Option<VerificationRows>;
    read kept_criteria(change: &belay_domain::change::Change, base_generation: i64) -> Vec<String>;
    read change_status_for_worker(change_id: &ChangeId) -> ChangeStatus;
}
