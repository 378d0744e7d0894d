//! Promotion's rows: the facts the preconditions read, the compare-and-swap on the canonical
//! generation as one transaction, the record of how far the source sync got (so a retry after a
//! crash repairs what was left behind), and the settling of the project's older-base Candidates.
//!
//! The decisions are `belay_domain::promotion`'s (`compare_and_swap`, `settle_older_base`); the
//! transaction here reads the facts they compare and applies the answer with conditional updates,
//! so two promotions racing for one generation advance it once.

use crate::Tx;
use crate::rows::{enum_from, json};
use crate::{StoreError, events, now_ms};
use belay_domain::approval::Approval;
use belay_domain::candidate::{Candidate, CandidateStatus};
use belay_domain::change::{ChangeStatus, RiskTier};
use belay_domain::evidence::Evidence;
use belay_domain::ids::{CandidateId, ProjectId};
use belay_domain::policy::{DEFAULT_POLICY, PolicyStamp, ProjectPolicy};
use belay_domain::promotion::{Block, CasFacts, ProjectCandidate, PromotionOutcome, compare_and_swap};
use belay_domain::repo::{CandidateEnd, ForkFacts, ForkKind, SweepFork, candidate_fork};
use serde::{Deserialize, Serialize};
use sqlx::Row;

/// Everything the preconditions read from the database, as of now.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotionRows {
    pub candidate: Candidate,
    pub change_status: ChangeStatus,
    pub risk_tier: Option<RiskTier>,
    pub evidence: Vec<Evidence>,
    pub approval: Option<Approval>,
    pub active_policy: ProjectPolicy,
    pub canonical_generation: i64,
    pub canonical_commit: Option<String>,
    pub canonical_tree: Option<String>,
    /// A sibling on the same base still composes or verifies.
    pub sibling_pending: bool,
    pub promotion: Option<PromotionRecord>,
}

/// A promotion that advanced canonical, and how far its source sync got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromotionRecord {
    pub candidate_id: String,
    pub project_id: String,
    pub generation: i64,
    pub base_commit: String,
    pub commit: String,
    pub tree: String,
    pub pushed_at: Option<i64>,
    pub synced_at: Option<i64>,
    pub released_at: Option<i64>,
}

fn record_row(r: &sqlx::any::AnyRow) -> Result<PromotionRecord, StoreError> {
    Ok(PromotionRecord {
        candidate_id: r.try_get("candidate_id")?,
        project_id: r.try_get("project_id")?,
        generation: r.try_get("generation")?,
        base_commit: r.try_get("base_commit")?,
        commit: r.try_get("commit_id")?,
        tree: r.try_get("tree")?,
        pushed_at: r.try_get("pushed_at")?,
        synced_at: r.try_get("synced_at")?,
        released_at: r.try_get("released_at")?,
    })
}

const RECORD_COLUMNS: &str =
    "candidate_id, project_id, generation, base_commit, commit_id, tree, pushed_at, synced_at, released_at";

/// What the settle after a promotion did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// Candidates that became `stale`.
    pub stale: Vec<String>,
    /// New Candidates composed on the new base, to verify.
    pub recomposed: Vec<String>,
}

async fn policy_in(tx: &mut Tx, project_id: &ProjectId) -> Result<ProjectPolicy, StoreError> {
    let row = sqlx::query("select policy from project_policies where project_id = $1 order by version desc limit 1")
        .bind(project_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    match row {
        Some(r) => json(&r.try_get::<String, _>("policy")?, "policy"),
        None => Ok(DEFAULT_POLICY.clone()),
    }
}

/// The promotion a Candidate made, if it advanced canonical.
pub async fn promotion_for_worker(
    tx: &mut Tx,
    candidate_id: &CandidateId,
) -> Result<Option<PromotionRecord>, StoreError> {
    let sql = format!("select {RECORD_COLUMNS} from promotions where candidate_id = $1");
    let row = sqlx::query(&sql)
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(record_row).transpose()
}

/// The rows the promotion preconditions read, or `None` for no such Candidate.
pub async fn promotion_rows(tx: &mut Tx, candidate_id: &CandidateId) -> Result<Option<PromotionRows>, StoreError> {
    let Some(candidate) = crate::candidates::candidate_for_worker(tx, candidate_id).await? else {
        return Ok(None);
    };
    let project = sqlx::query("select generation, canonical_commit, canonical_tree from projects where id = $1")
        .bind(candidate.project_id.as_str())
        .fetch_one(tx.conn())
        .await?;
    let change = sqlx::query("select status, risk_tier from changes where id = $1")
        .bind(candidate.change_id.as_str())
        .fetch_one(tx.conn())
        .await?;
    let risk_tier = change
        .try_get::<Option<String>, _>("risk_tier")?
        .map(|t| enum_from::<RiskTier>(&t, "risk tier"))
        .transpose()?;
    let pending = sqlx::query(
        r#"select count(*) as n from candidates where change_id = $1 and base_generation = $2 and id <> $3
           and status in ('composing', 'verifying')"#,
    )
    .bind(candidate.change_id.as_str())
    .bind(candidate.base_generation)
    .bind(candidate_id.as_str())
    .fetch_one(tx.conn())
    .await?
    .try_get::<i64, _>("n")?;
    let evidence = crate::candidates::list_evidence(tx, candidate_id)
        .await?
        .into_iter()
        .map(|r| r.evidence)
        .collect();
    Ok(Some(PromotionRows {
        change_status: enum_from(&change.try_get::<String, _>("status")?, "change status")?,
        risk_tier,
        evidence,
        approval: crate::approvals::approval_for_worker(tx, candidate_id).await?,
        active_policy: crate::candidates::active_policy_for_worker(tx, &candidate.project_id).await?,
        canonical_generation: project.try_get("generation")?,
        canonical_commit: project.try_get("canonical_commit")?,
        canonical_tree: project.try_get("canonical_tree")?,
        sibling_pending: pending > 0,
        promotion: promotion_for_worker(tx, candidate_id).await?,
        candidate,
    }))
}

/// The compare-and-swap, in one transaction: the expected generation, the expected canonical
/// tree and the plan's policy version match → generation + 1, canonical at the composed commit
/// and tree, the Candidate and its Change `promoted`, the promotion recorded, and
/// `canonical.advanced`. Already promoted → `AlreadyPromoted`; canonical moved → `Stale`; the
/// policy changed → `Blocked`. A retry reads the same answer.
pub async fn promote_cas(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    expected_generation: i64,
    plan_policy: &PolicyStamp,
) -> Result<PromotionOutcome, StoreError> {
    for _ in 0..5 {
        // The project row is read before the Candidate's: a promotion that commits between
        // the two reads is then seen as this Candidate `promoted` (an answer), never as a
        // generation that moved under a Candidate still `verified` (which would read stale).
        let p = sqlx::query(
            "select p.generation, p.canonical_tree from projects p join candidates k on k.project_id = p.id where k.id = $1",
        )
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("candidate", candidate_id.as_str()))?;
        let current_generation: i64 = p.try_get("generation")?;
        let current_tree: Option<String> = p.try_get("canonical_tree")?;
        let k = sqlx::query(
            "select status, project_id, change_id, base_commit, base_tree, composed_commit, composed_tree from candidates where id = $1",
        )
        .bind(candidate_id.as_str())
        .fetch_one(tx.conn())
        .await?;
        let status: CandidateStatus = enum_from(&k.try_get::<String, _>("status")?, "candidate status")?;
        let project_id = ProjectId(k.try_get("project_id")?);
        let change_id: String = k.try_get("change_id")?;
        let active = policy_in(tx, &project_id).await?.stamp();
        let facts = CasFacts {
            expected_generation,
            expected_tree: k.try_get("base_tree")?,
            plan_policy: plan_policy.clone(),
            current_generation,
            current_tree: current_tree.clone().unwrap_or_default(),
            active_policy: active,
            already_promoted: status == CandidateStatus::Promoted,
        };
        let outcome = compare_and_swap(&facts);
        let PromotionOutcome::Promoted { generation } = outcome else {
            return Ok(outcome);
        };
        if status != CandidateStatus::Verified {
            return Ok(PromotionOutcome::Blocked {
                blocks: vec![Block::NotVerified { status }],
            });
        }
        let (Some(commit), Some(tree)) = (
            k.try_get::<Option<String>, _>("composed_commit")?,
            k.try_get::<Option<String>, _>("composed_tree")?,
        ) else {
            return Ok(PromotionOutcome::Blocked {
                blocks: vec![Block::ComposedCommitMissing],
            });
        };
        let now = now_ms();
        let advanced = sqlx::query(
            r#"update projects set generation = $2, canonical_commit = $3, canonical_tree = $4, updated_at = $5
               where id = $1 and generation = $6 and canonical_tree = $7"#,
        )
        .bind(project_id.as_str())
        .bind(generation)
        .bind(commit.as_str())
        .bind(tree.as_str())
        .bind(now)
        .bind(expected_generation)
        .bind(facts.expected_tree.as_str())
        .execute(tx.conn())
        .await?;
        if advanced.rows_affected() == 0 {
            // Another promotion committed between the read and the update: read again.
            continue;
        }
        let base_commit: String = k.try_get("base_commit")?;
        let promoted = Promoted {
            candidate_id,
            project_id: &project_id,
            change_id: &change_id,
            generation,
            base_commit: &base_commit,
            commit: &commit,
            tree: &tree,
            now,
        };
        record_promoted(tx, &promoted).await?;
        return Ok(PromotionOutcome::Promoted { generation });
    }
    Err(StoreError::Conflict(
        "promotion: canonical advanced concurrently; try again".into(),
    ))
}

/// A compare-and-swap that won: what the rows and events record of it.
struct Promoted<'a> {
    candidate_id: &'a CandidateId,
    project_id: &'a ProjectId,
    change_id: &'a str,
    generation: i64,
    base_commit: &'a str,
    commit: &'a str,
    tree: &'a str,
    now: i64,
}

/// Marks the Candidate and its Change `promoted`, records the promotion, and appends
/// `canonical.advanced` and `candidate.promoted`.
async fn record_promoted(tx: &mut Tx, p: &Promoted<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "update candidates set status = 'promoted', status_reason = null, updated_at = $2 where id = $1 and status = 'verified'",
    )
    .bind(p.candidate_id.as_str())
    .bind(p.now)
    .execute(tx.conn())
    .await?;
    sqlx::query("update changes set status = 'promoted', updated_at = $2 where id = $1")
        .bind(p.change_id)
        .bind(p.now)
        .execute(tx.conn())
        .await?;
    sqlx::query(
        r#"insert into promotions (candidate_id, project_id, generation, base_commit, commit_id, tree, created_at)
           values ($1, $2, $3, $4, $5, $6, $7)"#,
    )
    .bind(p.candidate_id.as_str())
    .bind(p.project_id.as_str())
    .bind(p.generation)
    .bind(p.base_commit)
    .bind(p.commit)
    .bind(p.tree)
    .bind(p.now)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        p.project_id,
        "canonical.advanced",
        &serde_json::json!({
            "generation": p.generation, "commit": p.commit, "tree": p.tree,
            "candidateId": p.candidate_id, "changeId": p.change_id,
        }),
    )
    .await?;
    events::append(
        tx.conn(),
        p.candidate_id,
        "candidate.promoted",
        &serde_json::json!({ "generation": p.generation }),
    )
    .await?;
    Ok(())
}

/// Canonical `main` points at the promotion's commit (the push landed, or a retry found it
/// there).
pub async fn mark_promotion_pushed(tx: &mut Tx, candidate_id: &CandidateId) -> Result<(), StoreError> {
    sqlx::query("update promotions set pushed_at = coalesce(pushed_at, $2) where candidate_id = $1")
        .bind(candidate_id.as_str())
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// The file index and code manifest of the new tree are written: the source sync is done. The
/// first call records `release.started`; the project's mirror of canonical is brought back to
/// the promotion's commit when it is still the project's latest generation.
pub async fn mark_promotion_synced(tx: &mut Tx, candidate_id: &CandidateId) -> Result<PromotionRecord, StoreError> {
    let now = now_ms();
    let sql = format!("select {RECORD_COLUMNS} from promotions where candidate_id = $1");
    let rec = sqlx::query(&sql)
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .as_ref()
        .map(record_row)
        .transpose()?
        .ok_or_else(|| StoreError::not_found("promotion", candidate_id.as_str()))?;
    sqlx::query(
        r#"update projects set canonical_commit = $3, canonical_tree = $4
           where id = $1 and generation = $2 and (canonical_commit <> $3 or canonical_tree <> $4
               or canonical_commit is null or canonical_tree is null)"#,
    )
    .bind(rec.project_id.as_str())
    .bind(rec.generation)
    .bind(rec.commit.as_str())
    .bind(rec.tree.as_str())
    .execute(tx.conn())
    .await?;
    let released = sqlx::query(
        "update promotions set synced_at = coalesce(synced_at, $2), released_at = $2 where candidate_id = $1 and released_at is null",
    )
    .bind(candidate_id.as_str())
    .bind(now)
    .execute(tx.conn())
    .await?;
    if released.rows_affected() == 1 {
        events::append(
            tx.conn(),
            &rec.project_id,
            "release.started",
            &serde_json::json!({ "generation": rec.generation, "commit": rec.commit, "candidateId": candidate_id }),
        )
        .await?;
    }
    promotion_for_worker(tx, candidate_id)
        .await?
        .ok_or_else(|| StoreError::not_found("promotion", candidate_id.as_str()))
}

/// After a promotion to `new_generation`: every open Candidate of the project on an older
/// generation becomes `stale` (and stays so); a Change still verifying or awaiting approval
/// gets a new Candidate of the same ChangeSets on the new base. Idempotent: a second call finds
/// them stale and answers the Candidates the first composed.
pub async fn settle_older_base(
    tx: &mut Tx,
    project_id: &ProjectId,
    new_generation: i64,
) -> Result<Settled, StoreError> {
    let rows = sqlx::query(
        r#"select k.id, k.change_id, c.status as change_status, k.base_generation, k.status, k.change_set_ids,
                  k.recomposed_as
           from candidates k join changes c on c.id = k.change_id
           where k.project_id = $1 and k.base_generation < $2
           order by k.created_at, k.id"#,
    )
    .bind(project_id.as_str())
    .bind(new_generation)
    .fetch_all(tx.conn())
    .await?;
    let mut all = Vec::new();
    let mut out = Settled::default();
    for r in &rows {
        let id: String = r.try_get("id")?;
        let status: CandidateStatus = enum_from(&r.try_get::<String, _>("status")?, "candidate status")?;
        // A retry: stale already, with the Candidate it was recomposed as.
        if status == CandidateStatus::Stale
            && let Some(new) = r.try_get::<Option<String>, _>("recomposed_as")?
        {
            out.recomposed.push(new);
        }
        all.push(ProjectCandidate {
            id: id.clone().into(),
            change_id: r.try_get::<String, _>("change_id")?.into(),
            change_status: enum_from(&r.try_get::<String, _>("change_status")?, "change status")?,
            base_generation: r.try_get("base_generation")?,
            status,
            change_set_ids: json(&r.try_get::<String, _>("change_set_ids")?, "change_set_ids")?,
        });
    }
    let plan = belay_domain::promotion::settle_older_base(&all, new_generation);
    for (id, reason) in &plan.stale {
        let moved = sqlx::query(
            r#"update candidates set status = 'stale', status_reason = $2, updated_at = $3
               where id = $1 and status in ('composing', 'verifying', 'verified')"#,
        )
        .bind(id.as_str())
        .bind(reason)
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
        if moved.rows_affected() == 1 {
            events::append(
                tx.conn(),
                id.as_str(),
                "candidate.stale",
                &serde_json::json!({ "reason": reason, "generation": new_generation }),
            )
            .await?;
            out.stale.push(id.to_string());
        }
    }
    for (id, _, _) in &plan.recompose {
        let reason = plan
            .stale
            .iter()
            .find(|(s, _)| s == id)
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        if let Some(new) = crate::candidates::recompose_stale(tx, id, &reason).await?
            && !out.recomposed.contains(&new.id.to_string())
        {
            out.recomposed.push(new.id.to_string());
        }
    }
    Ok(out)
}

/// Whether the Candidate has siblings: other Candidates of its sibling group (one round's
/// fork) on its base generation, as the selection reads them. An earlier Candidate of the
/// Change (rejected, or verified and sent back for its repair) is not a sibling: the lone
/// Candidate after it is the winner.
pub async fn has_siblings(tx: &mut Tx, candidate_id: &CandidateId) -> Result<bool, StoreError> {
    let n: i64 = sqlx::query(
        r#"select count(*) as n from candidates o join candidates k on k.sibling_group = o.sibling_group
           and k.base_generation = o.base_generation and o.id <> k.id
           where k.id = $1 and o.status <> 'stale'"#,
    )
    .bind(candidate_id.as_str())
    .fetch_one(tx.conn())
    .await?
    .try_get("n")?;
    Ok(n > 0)
}

/// Every Candidate fork the sweep has not deleted yet: how its Candidate ended and when, and
/// for the promoted ones canonical's repository and the composed commit, which the sweep asks
/// git about.
pub async fn sweep_candidate_forks(tx: &mut Tx) -> Result<Vec<CandidateForkRow>, StoreError> {
    let rows = sqlx::query(
        r#"select k.id, k.project_id, k.status, k.updated_at, k.composed_commit from candidates k
           where not exists (select 1 from swept_forks s where s.repo = 'cand-' || substr(k.id, 6))
           order by k.created_at, k.id"#,
    )
    .fetch_all(tx.conn())
    .await?;
    let mut out = Vec::new();
    for r in &rows {
        let id: String = r.try_get("id")?;
        let status: CandidateStatus = enum_from(&r.try_get::<String, _>("status")?, "candidate status")?;
        let end = match status {
            CandidateStatus::Rejected => Some(CandidateEnd::Rejected),
            CandidateStatus::Stale => Some(CandidateEnd::Stale),
            CandidateStatus::Promoted => Some(CandidateEnd::Promoted),
            _ => None,
        };
        let project_id: String = r.try_get("project_id")?;
        out.push(CandidateForkRow {
            fork: SweepFork {
                kind: ForkKind::Candidate,
                repo: candidate_fork(&id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                project_id: project_id.clone().into(),
                ended_at_secs: end
                    .map(|_| r.try_get::<i64, _>("updated_at").map(|t| t.div_euclid(1000)))
                    .transpose()?,
                facts: ForkFacts {
                    candidate_end: end,
                    ..Default::default()
                },
                session: None,
            },
            canonical: project_id,
            composed_commit: r.try_get("composed_commit")?,
        });
    }
    Ok(out)
}

/// The canonical generation `commit` was in the project: the current one, one a promotion
/// advanced to, or the one a promotion advanced from; `None` when the rows do not know it.
pub async fn generation_of_commit(
    tx: &mut Tx,
    project_id: &ProjectId,
    commit: &str,
) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(
        r#"select generation from projects where id = $1 and canonical_commit = $2
           union all select generation from promotions where project_id = $1 and commit_id = $2
           union all select generation - 1 as generation from promotions where project_id = $1 and base_commit = $2"#,
    )
    .bind(project_id.as_str())
    .bind(commit)
    .fetch_all(tx.conn())
    .await?;
    Ok(row.first().map(|r| r.try_get::<i64, _>("generation")).transpose()?)
}

/// A Candidate fork the sweep considers (see [`Store::sweep_candidate_forks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateForkRow {
    pub fork: SweepFork,
    /// Canonical's repository (the project id).
    pub canonical: String,
    pub composed_commit: Option<String>,
}

crate::one_step! {
    read promotion_for_worker(candidate_id: &CandidateId) -> Option<PromotionRecord>;
    read promotion_rows(candidate_id: &CandidateId) -> Option<PromotionRows>;
    write promote_cas(candidate_id: &CandidateId, expected_generation: i64, plan_policy: &PolicyStamp) -> PromotionOutcome;
    write mark_promotion_pushed(candidate_id: &CandidateId) -> ();
    write mark_promotion_synced(candidate_id: &CandidateId) -> PromotionRecord;
    write settle_older_base(project_id: &ProjectId, new_generation: i64) -> Settled;
    read has_siblings(candidate_id: &CandidateId) -> bool;
    read sweep_candidate_forks() -> Vec<CandidateForkRow>;
    read generation_of_commit(project_id: &ProjectId, commit: &str) -> Option<i64>;
}
