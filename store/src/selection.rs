//! Conflicts, the fork rule's verification round, and sibling selection: the claim on the anchor,
//! the ranking read from each sibling's rows, and the one transaction that applies the outcome
//! (losers rejected, `selection_json` on each, the Decision Receipt, `candidate.selected`, and
//! what happens to the Change). The rules are `belay_domain`'s; this module reads their inputs and
//! writes their outcome.

use crate::Tx;
use crate::candidates::{CANDIDATE_COLUMNS, candidate_row, insert_candidate};
use crate::receipts::insert_receipt;
use crate::rows::{enum_text, json, to_json};
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::acceptance::{AcceptanceOutcome, AcceptanceRun, acceptance_hold, acceptance_outcome};
use belay_domain::approval::{GateTrigger, approval_reason};
use belay_domain::candidate::{Candidate, CandidateStatus};
use belay_domain::candidate_sets::{OpenConflict, plan_candidate_sets};
use belay_domain::change::{ChangeSet, Task};
use belay_domain::conflict::{
    ChangeSetPaths, Conflict, ConflictInput, ConflictIntegration, ConflictStatus, TaskContracts, integration_for,
    tasks_to_reset,
};
use belay_domain::evidence::{Evidence, gate_required_checks};
use belay_domain::ids::{AccountId, CandidateId, ChangeId, ConflictId, TaskId};
use belay_domain::receipt::ReceiptKind;
use belay_domain::repair::{
    REPAIR_TASK_KEY, RepairDecision, RepairTrigger, acceptance_trigger, check_failure_trigger, check_failures,
    rejection_trigger, repair_decision,
};
use belay_domain::selection::{
    CandidateSelectionUpdate, ChangeAfterSelection, ClaimOutcome, JudgeOutcome, RankInput, Ranking, SelectionJson,
    Sibling, claim_outcome, rank, rank_input, selection_anchor, siblings_pending,
};
pub use belay_domain::selection_steps::{JudgeSnapshotEntry, SelectionDone, SelectionStep, SnapshotEvidence};
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};

/// One sibling with what ranking reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub candidate: Candidate,
    pub evidence: Vec<Evidence>,
}

impl Member {
    /// The acceptance outcome its stored results give (`None`: not judged).
    pub fn acceptance(&self) -> Option<AcceptanceOutcome> {
        self.candidate
            .acceptance
            .as_ref()
            .map(|j| acceptance_outcome(&AcceptanceRun::Judged(j.clone())))
    }

    pub fn rank(&self) -> RankInput {
        rank_input(
            &self.candidate.id,
            self.candidate.status,
            self.candidate.plan.as_ref(),
            &self.evidence,
            self.acceptance().as_ref(),
        )
    }
}

fn claim_text(claimant: &str, at: i64) -> String {
    to_json(&SelectionJson::Claimed {
        claimed_by: claimant.to_owned(),
        claimed_at: at,
    })
}

/// The paths a unified diff changes (both sides of a rename or deletion).
pub fn patch_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let Some(rest) = line.strip_prefix("diff --git a/") else {
            continue;
        };
        if let Some((a, b)) = rest.split_once(" b/") {
            for p in [a, b] {
                if !out.iter().any(|o| o == p) {
                    out.push(p.to_owned());
                }
            }
        }
    }
    out
}

/// The latest ChangeSet of each Task, Tasks in Work Graph order: the proposed ChangeSets.
pub(crate) async fn proposed_change_sets(tx: &mut Tx, change_id: &ChangeId) -> Result<Vec<ChangeSet>, StoreError> {
    let rejected: BTreeSet<String> = sqlx::query(
        "select s.id from change_sets s join tasks t on t.id = s.task_id where t.change_id = $1 and s.rejected_reason is not null",
    )
    .bind(change_id.as_str())
    .fetch_all(tx.conn())
    .await?
    .iter()
    .map(|r| r.try_get::<String, _>("id"))
    .collect::<Result<_, _>>()?;
    let all: Vec<ChangeSet> = crate::candidates::change_sets_of(tx, change_id)
        .await?
        .into_iter()
        .filter(|c| !rejected.contains(c.id.as_str()))
        .collect();
    let mut latest: Vec<ChangeSet> = Vec::new();
    for cs in all {
        match latest.iter_mut().find(|l| l.task_id == cs.task_id) {
            Some(l) => *l = cs,
            None => latest.push(cs),
        }
    }
    Ok(latest)
}

/// Each ChangeSet of a Change with its task run's workspace start commit, for the paths its
/// patch changes (the workspace fork is named after the run).
pub async fn change_set_origins(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
) -> Result<Vec<(ChangeSet, Option<String>)>, StoreError> {
    if crate::changes::get_change(tx, account_id, change_id).await?.is_none() {
        return Err(StoreError::not_found("change", change_id.as_str()));
    }
    let mut out = Vec::new();
    for cs in crate::candidates::change_sets_of(tx, change_id).await? {
        let start: Option<String> = sqlx::query("select start_commit from workspaces where run_id = $1")
            .bind(cs.run_id.as_str())
            .fetch_optional(tx.conn())
            .await?
            .map(|r| r.try_get::<Option<String>, _>("start_commit"))
            .transpose()?
            .flatten();
        out.push((cs, start));
    }
    Ok(out)
}

/// Records a conflict between two Tasks' ChangeSets as the review reported it. Every citation
/// is checked (`paths_of` gives the paths each of the Change's ChangeSets changes); a bad one
/// is a validation error naming it, and nothing is written.
pub async fn record_conflict(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
    input: &ConflictInput,
    paths_of: &BTreeMap<String, Vec<String>>,
) -> Result<Conflict, StoreError> {
    let change = crate::changes::get_change(tx, account_id, change_id)
        .await?
        .ok_or_else(|| StoreError::not_found("change", change_id.as_str()))?;
    if change.status.is_finished() {
        return Err(StoreError::Conflict(format!(
            "change {change_id} is {}; it takes no more conflicts",
            enum_text(&change.status)
        )));
    }
    let tasks = crate::changes::list_tasks(tx, account_id, change_id).await?;
    let sets = crate::candidates::change_sets_of(tx, change_id).await?;
    let empty = Vec::new();
    let cited: Vec<ChangeSetPaths<'_>> = sets
        .iter()
        .map(|c| ChangeSetPaths {
            change_set: c,
            changed_paths: paths_of.get(c.id.as_str()).unwrap_or(&empty),
        })
        .collect();
    input.validate(&tasks, &cited)?;
    let id = ConflictId::from_body(&new_id_body());
    let now = now_ms();
    let task_of = |i: usize| {
        tasks
            .iter()
            .find(|t| t.id == input.sides[i].task_id.0)
            .expect("validated")
    };
    let lines = |i: usize| -> Vec<String> {
        sets.iter()
            .filter(|c| c.task_id == input.sides[i].task_id.0)
            .flat_map(|c| c.contract_changes.clone())
            .collect()
    };
    let (la, lb) = (lines(0), lines(1));
    let integration = integration_for(
        input.status,
        TaskContracts {
            task: task_of(0),
            contract_lines: &la,
        },
        TaskContracts {
            task: task_of(1),
            contract_lines: &lb,
        },
        &tasks,
        &integrated_pairs(tx, change_id).await?,
    );
    sqlx::query(
        r#"insert into conflicts (id, change_id, task_a, task_b, status, sides_json, summary, resolved, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
    )
    .bind(id.as_str())
    .bind(change_id.as_str())
    .bind(input.sides[0].task_id.as_str())
    .bind(input.sides[1].task_id.as_str())
    .bind(enum_text(&input.status))
    .bind(to_json(&input.sides))
    .bind(input.summary.as_deref())
    .bind(i32::from(
        input.status == ConflictStatus::Dismissed || integration.is_some(),
    ))
    .bind(now)
    .execute(tx.conn())
    .await?;
    if let Some(integ) = &integration {
        integrate_in(tx, change_id, id.as_str(), integ, &tasks, &sets).await?;
    }
    events::append(
        tx.conn(),
        change_id,
        "change.conflict_recorded",
        &serde_json::json!({ "conflictId": id.as_str(), "status": input.status }),
    )
    .await?;
    Ok(Conflict {
        id,
        status: input.status,
        sides: input.sides.clone(),
        summary: input.summary.clone(),
        integrate: integration,
        created_at: now,
    })
}

/// The Task key pairs a conflict of this Change was already integrated on.
pub(crate) async fn integrated_pairs(
    tx: &mut Tx,
    change_id: &ChangeId,
) -> Result<BTreeSet<(String, String)>, StoreError> {
    let rows = sqlx::query("select review_json from conflicts where change_id = $1 and review_json is not null")
        .bind(change_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    let mut out = BTreeSet::new();
    for r in &rows {
        let v: serde_json::Value = json(&r.try_get::<String, _>("review_json")?, "review_json")?;
        if let Ok(i) = serde_json::from_value::<ConflictIntegration>(v["integrate"].clone()) {
            out.insert((i.dependent, i.depends_on));
        }
    }
    Ok(out)
}

/// The open (unresolved) conflicts of a Change, in the order they were recorded.
pub(crate) async fn open_conflicts(tx: &mut Tx, change_id: &ChangeId) -> Result<Vec<OpenConflict>, StoreError> {
    let rows = sqlx::query(
        "select id, status, task_a, task_b from conflicts where change_id = $1 and resolved = 0 order by created_at, id",
    )
    .bind(change_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(OpenConflict {
                id: r.try_get::<String, _>("id")?.into(),
                status: crate::rows::enum_from(&r.try_get::<String, _>("status")?, "conflict status")?,
                task_ids: [r.try_get("task_a")?, r.try_get("task_b")?],
            })
        })
        .collect()
}

/// Starts a verification round by the fork rule: `verification.started`, the Change
/// `verifying`, and the Candidates `planCandidateSets` gives (one without a counting conflict;
/// siblings sharing a group otherwise), all in one transaction. Oldest first.
pub async fn start_verification_round(
    tx: &mut Tx,
    account_id: &AccountId,
    change_id: &ChangeId,
) -> Result<Vec<Candidate>, StoreError> {
    let crate::candidates::VerifiableBase {
        project,
        base_commit,
        base_tree,
    } = crate::candidates::verifiable_base(tx, account_id, change_id).await?;
    let tasks: Vec<Task> = crate::changes::list_tasks(tx, account_id, change_id).await?;
    let proposed = proposed_change_sets(tx, change_id).await?;
    if proposed.is_empty() {
        return Err(StoreError::Conflict(format!(
            "change {change_id} has no ChangeSet to verify"
        )));
    }
    let conflicts = open_conflicts(tx, change_id).await?;
    let refs: Vec<&ChangeSet> = proposed.iter().collect();
    let plan = plan_candidate_sets(&tasks, &refs, &conflicts);
    let group = (plan.candidates.len() > 1).then(|| format!("grp-{}", new_id_body()));
    let ids: Vec<CandidateId> = plan
        .candidates
        .iter()
        .map(|_| CandidateId::from_body(&new_id_body()))
        .collect();
    let now = now_ms();
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
        &serde_json::json!({
            "candidateId": ids[0].as_str(),
            "candidateIds": ids.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
            "conflictId": plan.conflict_id.as_ref().map(|c| c.as_str()),
            "waiting": plan.waiting,
        }),
    )
    .await?;
    for (i, (id, planned)) in ids.iter().zip(&plan.candidates).enumerate() {
        // Distinct creation times keep the anchor (earliest `created_at`, then id) the first.
        insert_candidate(
            tx,
            id,
            change_id,
            &project.id,
            project.generation,
            &base_commit,
            &base_tree,
            &planned.change_set_ids,
            now + i as i64,
        )
        .await?;
        if let Some(g) = &group {
            sqlx::query("update candidates set sibling_group = $2 where id = $1")
                .bind(id.as_str())
                .bind(g)
                .execute(tx.conn())
                .await?;
        }
    }
    let mut out = Vec::new();
    for id in &ids {
        out.push(
            crate::candidates::candidate_for_worker(tx, id)
                .await?
                .ok_or_else(|| StoreError::not_found("candidate", id))?,
        );
    }
    Ok(out)
}

/// The siblings of a Candidate (itself included), oldest first; `None` without siblings.
pub async fn sibling_group(tx: &mut Tx, candidate_id: &CandidateId) -> Result<Option<Vec<Member>>, StoreError> {
    let row = sqlx::query("select sibling_group, base_generation from candidates where id = $1")
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?
        .ok_or_else(|| StoreError::not_found("candidate", candidate_id.as_str()))?;
    let Some(group): Option<String> = row.try_get("sibling_group")? else {
        return Ok(None);
    };
    let generation: i64 = row.try_get("base_generation")?;
    let sql = format!(
        "select {CANDIDATE_COLUMNS} from candidates k where k.sibling_group = $1 and k.base_generation = $2 \
         order by k.created_at, k.id"
    );
    let rows = sqlx::query(&sql)
        .bind(group.as_str())
        .bind(generation)
        .fetch_all(tx.conn())
        .await?;
    let mut members = Vec::new();
    for r in &rows {
        let candidate = candidate_row(r)?;
        let evidence = crate::candidates::list_evidence(tx, &candidate.id)
            .await?
            .into_iter()
            .map(|e| e.evidence)
            .collect();
        members.push(Member { candidate, evidence });
    }
    Ok((members.len() > 1).then_some(members))
}

/// The selection step of a gated Candidate: no siblings, a sibling still pending, the claim
/// held by another run (or the group decided), or claimed by `claimant` (by one conditional
/// update of the anchor's `selection_json` from null; a retry by the claimant continues).
pub async fn claim_selection(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    claimant: &str,
) -> Result<SelectionStep, StoreError> {
    let Some(members) = sibling_group(tx, candidate_id).await? else {
        return Ok(SelectionStep::NoSiblings);
    };
    let siblings: Vec<Sibling> = members
        .iter()
        .map(|m| Sibling {
            id: m.candidate.id.clone(),
            created_at: m.candidate.created_at,
            status: m.candidate.status,
        })
        .collect();
    if siblings_pending(&siblings) {
        return Ok(SelectionStep::Pending);
    }
    let anchor = selection_anchor(&siblings).cloned().expect("a group has members");
    let anchor_row = members
        .iter()
        .find(|m| m.candidate.id == anchor)
        .expect("anchor is a member");
    match claim_outcome(anchor_row.candidate.selection.as_ref(), claimant) {
        ClaimOutcome::Stop => return Ok(SelectionStep::Stopped),
        ClaimOutcome::Continue => {}
        ClaimOutcome::Claim => {
            let claimed = sqlx::query(
                "update candidates set selection_json = $2, updated_at = $3 where id = $1 and selection_json is null",
            )
            .bind(anchor.as_str())
            .bind(claim_text(claimant, now_ms()))
            .bind(now_ms())
            .execute(tx.conn())
            .await?;
            if claimed.rows_affected() == 0 {
                // Another run wrote first: read again (it is theirs, unless it is ours).
                return Box::pin(claim_selection(tx, candidate_id, claimant)).await;
            }
        }
    }
    let ranks: Vec<RankInput> = members.iter().map(Member::rank).collect();
    let tie = match rank(&ranks).1 {
        Ranking::Tie { ids } => Some(
            members
                .iter()
                .filter(|m| ids.contains(&m.candidate.id))
                .map(|m| JudgeSnapshotEntry {
                    candidate_id: m.candidate.id.clone(),
                    evidence: m
                        .evidence
                        .iter()
                        .map(|e| SnapshotEvidence {
                            id: e.id.clone(),
                            check_id: e.check_id.to_string(),
                            status: enum_text(&e.status),
                            coverage: enum_text(&e.coverage),
                            summary: e.summary.clone(),
                        })
                        .collect(),
                    acceptance: serde_json::to_value(&m.candidate.acceptance).unwrap_or_default(),
                })
                .collect(),
        ),
        _ => None,
    };
    Ok(SelectionStep::Claimed { anchor, tie })
}

/// Applies the selection `claimant` claimed, in one transaction: the outcome on every
/// sibling's `selection_json`, each verified loser `rejected` with its reason, the Decision
/// Receipt `CANDIDATE_SELECTION`, `candidate.selected`, and the Change's next state (the
/// winner through [`winner_selected`], a person to pick, or `failed` unless a repair is due).
pub async fn apply_selection(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    claimant: &str,
    judge: Option<&JudgeOutcome>,
) -> Result<SelectionDone, StoreError> {
    let Some(members) = sibling_group(tx, candidate_id).await? else {
        return Ok(SelectionDone::AlreadyApplied);
    };
    let siblings: Vec<Sibling> = members
        .iter()
        .map(|m| Sibling {
            id: m.candidate.id.clone(),
            created_at: m.candidate.created_at,
            status: m.candidate.status,
        })
        .collect();
    let anchor = selection_anchor(&siblings).cloned().expect("a group has members");
    let anchor_row = &members
        .iter()
        .find(|m| m.candidate.id == anchor)
        .expect("member")
        .candidate;
    let Some(SelectionJson::Claimed { claimed_by, claimed_at }) = &anchor_row.selection else {
        return Ok(SelectionDone::AlreadyApplied);
    };
    if claimed_by != claimant {
        return Ok(SelectionDone::AlreadyApplied);
    }
    let group: Vec<(RankInput, CandidateStatus)> = members.iter().map(|m| (m.rank(), m.candidate.status)).collect();
    let now = now_ms();
    let applied = belay_domain::selection::apply_selection(&anchor, &group, judge, now);
    let decided = to_json(&SelectionJson::Decided(applied.selection.clone()));
    let change_id = anchor_row.change_id.clone();
    let took =
        sqlx::query("update candidates set selection_json = $2, updated_at = $3 where id = $1 and selection_json = $4")
            .bind(anchor.as_str())
            .bind(decided.as_str())
            .bind(now)
            .bind(claim_text(claimant, *claimed_at))
            .execute(tx.conn())
            .await?;
    if took.rows_affected() == 0 {
        return Ok(SelectionDone::AlreadyApplied);
    }
    for m in members.iter().filter(|m| m.candidate.id != anchor) {
        sqlx::query("update candidates set selection_json = $2, updated_at = $3 where id = $1")
            .bind(m.candidate.id.as_str())
            .bind(decided.as_str())
            .bind(now)
            .execute(tx.conn())
            .await?;
    }
    reject_passed_over(tx, &applied.updates, now).await?;
    let inputs = serde_json::json!({
        "candidates": members.iter().map(|m| m.candidate.id.as_str()).collect::<Vec<_>>(),
        "ranking": applied.selection.ranking,
        "judge": judge,
    });
    let winner = applied.selection.winner.clone();
    let done = change_after_selection(tx, &applied.change, &members, &change_id).await?;
    insert_receipt(
        tx,
        &change_id,
        ReceiptKind::CandidateSelection,
        &format!("selection:{anchor}"),
        &inputs,
        &serde_json::json!({
            "winner": winner,
            "decidedBy": applied.selection.decided_by,
            "reason": applied.selection.reason,
            "rejected": applied.updates.iter().map(|u| serde_json::json!({"candidateId": u.id, "reason": u.reject_with})).collect::<Vec<_>>(),
            "then": done,
        }),
    )
    .await?;
    events::append(
        tx.conn(),
        &change_id,
        "candidate.selected",
        &serde_json::json!({
            "changeId": change_id,
            "winner": winner,
            "decidedBy": applied.selection.decided_by,
            "candidates": members.iter().map(|m| m.candidate.id.as_str()).collect::<Vec<_>>(),
        }),
    )
    .await?;
    Ok(done)
}

/// Rejects the verified siblings the selection passed over, each with its reason and event.
async fn reject_passed_over(tx: &mut Tx, updates: &[CandidateSelectionUpdate], now: i64) -> Result<(), StoreError> {
    for u in updates {
        let Some(reason) = &u.reject_with else { continue };
        let moved = sqlx::query(
            "update candidates set status = 'rejected', status_reason = $2, updated_at = $3 where id = $1 and status = 'verified'",
        )
        .bind(u.id.as_str())
        .bind(reason)
        .bind(now)
        .execute(tx.conn())
        .await?;
        if moved.rows_affected() == 1 {
            events::append(
                tx.conn(),
                u.id.as_str(),
                "candidate.rejected",
                &serde_json::json!({ "reason": reason }),
            )
            .await?;
        }
    }
    Ok(())
}

/// What the Change does after the selection: promote the winner, wait for a person, or (every
/// sibling failed) request the repair a failed check asks for, else fail.
async fn change_after_selection(
    tx: &mut Tx,
    change: &ChangeAfterSelection,
    members: &[Member],
    change_id: &ChangeId,
) -> Result<SelectionDone, StoreError> {
    Ok(match change {
        ChangeAfterSelection::Promote { winner } => {
            let m = members
                .iter()
                .find(|m| &m.candidate.id == winner)
                .expect("winner is a member");
            winner_selected(tx, m).await?
        }
        ChangeAfterSelection::AwaitPerson { reason } => {
            await_person(tx, change_id, None, reason, "selection").await?;
            SelectionDone::AwaitingPerson { reason: reason.clone() }
        }
        ChangeAfterSelection::Failed => {
            let trigger = members.iter().find_map(|m| {
                check_failure_trigger(
                    &m.candidate.id,
                    m.candidate.status_reason.as_deref().unwrap_or_default(),
                    m.candidate
                        .plan
                        .as_ref()
                        .map(|p| check_failures(p, &m.evidence))
                        .unwrap_or_default(),
                )
            });
            match trigger {
                Some(t) => match repair_in(tx, change_id, &members_held(members, &t), &t).await? {
                    Ok(task) => SelectionDone::Repair { task },
                    Err(_) => fail_change(tx, change_id).await?,
                },
                None => fail_change(tx, change_id).await?,
            }
        }
    })
}

/// Stores a Candidate's acceptance results (`acceptance_json`; null for a gap) and metrics.
pub async fn set_acceptance(
    tx: &mut Tx,
    id: &str,
    criteria: Option<&[belay_domain::acceptance::JudgedCriterion]>,
    metrics: &belay_domain::candidate::CandidateMetrics,
) -> Result<(), StoreError> {
    sqlx::query("update candidates set acceptance_json = $2, metrics_json = $3, updated_at = $4 where id = $1")
        .bind(id)
        .bind(criteria.map(|c| to_json(&c)))
        .bind(to_json(metrics))
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// A person rejected a gated Candidate with `reason`: the Change gets its one repair Task
/// (depending on every Task whose ChangeSet the Candidate holds, the reason in its objective)
/// and returns to `running`; a second shortfall goes to a person. `None` when there is no
/// reason to repair toward. The approval route calls this.
pub async fn repair_after_rejection(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    reason: Option<&str>,
) -> Result<Option<Result<TaskId, String>>, StoreError> {
    let id: CandidateId = candidate_id.to_owned();
    let Some(trigger) = rejection_trigger(&id, reason) else {
        return Ok(None);
    };
    let candidate = crate::candidates::candidate_for_worker(tx, candidate_id)
        .await?
        .ok_or_else(|| StoreError::not_found("candidate", candidate_id.as_str()))?;
    let held = held_task_ids(
        &candidate,
        &crate::candidates::change_sets_of(tx, &candidate.change_id).await?,
    );
    let out = repair_in(tx, &candidate.change_id, &held, &trigger).await?;
    if let Err(reason) = &out {
        await_person(tx, &candidate.change_id, Some(candidate_id), reason, "repair").await?;
    }
    Ok(Some(out))
}

/// A verified Candidate without siblings (a selected winner's repair is its selection's)
/// whose acceptance check judged criteria of the request `not_met` after every required
/// check passed: when no other Candidate of its Change can still ship and the Change has no
/// repair yet, the Change gets its one repair Task (its objective lists the unmet criteria),
/// returns to `running` and has the `ACCEPTANCE_REPAIR` receipt. `None`: no repair was made
/// (none is due, or the Change already had its repair: the winner is then held for a person
/// as any other acceptance shortfall). A retry finds the repair Task its first call made.
pub async fn repair_lone_after_acceptance(
    tx: &mut Tx,
    candidate_id: &CandidateId,
) -> Result<Option<TaskId>, StoreError> {
    let sql = format!("select {CANDIDATE_COLUMNS}, k.sibling_group from candidates k where k.id = $1");
    let Some(row) = sqlx::query(&sql)
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?
    else {
        return Ok(None);
    };
    let k = candidate_row(&row)?;
    if k.status != CandidateStatus::Verified {
        return Ok(None);
    }
    let change_id = ChangeId(k.change_id.to_string());
    // A retry: the repair this Candidate asked for is there already.
    let asked = sqlx::query(
        "select inputs_json, outcome_json from decision_receipts where change_id = $1 and kind = 'ACCEPTANCE_REPAIR'",
    )
    .bind(change_id.as_str())
    .fetch_optional(tx.conn())
    .await?;
    if let Some(r) = asked {
        let inputs: serde_json::Value = json(&r.try_get::<String, _>("inputs_json")?, "inputs_json")?;
        if inputs["trigger"] == "acceptance_not_met" && inputs["candidate_id"] == candidate_id.as_str() {
            let outcome: serde_json::Value = json(&r.try_get::<String, _>("outcome_json")?, "outcome_json")?;
            return Ok(outcome["taskId"].as_str().map(|t| TaskId::from(t.to_owned())));
        }
    }
    let Some(outcome) = k
        .acceptance
        .as_ref()
        .map(|j| acceptance_outcome(&AcceptanceRun::Judged(j.clone())))
    else {
        return Ok(None);
    };
    let evidence: Vec<Evidence> = crate::candidates::evidence_in(tx, candidate_id).await?;
    let required_passed = k
        .plan
        .as_ref()
        .is_some_and(|p| gate_required_checks(p, &evidence).gaps.is_empty());
    let Some(trigger) = acceptance_trigger(&k.id, required_passed, &outcome) else {
        return Ok(None);
    };
    let group: Option<String> = row.try_get("sibling_group")?;
    let others: i64 = sqlx::query_scalar(
        r#"select count(*) from candidates o
           where o.id <> $1 and ((o.change_id = $2 and o.status in ('composing', 'verifying', 'verified'))
                 or (o.sibling_group = $3 and o.base_generation = $4))"#,
    )
    .bind(candidate_id.as_str())
    .bind(change_id.as_str())
    .bind(group)
    .bind(k.base_generation)
    .fetch_one(tx.conn())
    .await?;
    if others > 0 {
        return Ok(None);
    }
    let held: Vec<String> = k.change_set_ids.iter().map(|c| c.to_string()).collect();
    match repair_in(tx, &change_id, &held, &trigger).await? {
        Ok(task) => Ok(Some(task)),
        Err(_) => Ok(None),
    }
}

/// A Candidate the gate just rejected for a failed required or preview check, in the rejection's
/// transaction: when it has no siblings (a group's repair is its selection's) and no other
/// Candidate of its Change can still ship, the Change gets its one repair Task (objective: each
/// failing check with what its Evidence says); a Change that already had its repair goes to a
/// person. `None`: no repair is due here.
pub(crate) async fn repair_after_gate(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    reason: &str,
) -> Result<Option<Result<TaskId, String>>, StoreError> {
    let sql = format!("select {CANDIDATE_COLUMNS}, k.sibling_group from candidates k where k.id = $1");
    let Some(row) = sqlx::query(&sql)
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?
    else {
        return Ok(None);
    };
    let k = candidate_row(&row)?;
    let evidence: Vec<Evidence> = crate::candidates::evidence_in(tx, candidate_id).await?;
    let failures = k
        .plan
        .as_ref()
        .map(|p| check_failures(p, &evidence))
        .unwrap_or_default();
    let Some(trigger) = check_failure_trigger(&k.id, reason, failures) else {
        return Ok(None);
    };
    let group: Option<String> = row.try_get("sibling_group")?;
    let others: i64 = sqlx::query_scalar(
        r#"select count(*) from candidates o
           where o.id <> $1 and ((o.change_id = $2 and o.status in ('composing', 'verifying', 'verified'))
                 or (o.sibling_group = $3 and o.base_generation = $4))"#,
    )
    .bind(candidate_id.as_str())
    .bind(k.change_id.as_str())
    .bind(group)
    .bind(k.base_generation)
    .fetch_one(tx.conn())
    .await?;
    let change_status: String = sqlx::query_scalar("select status from changes where id = $1")
        .bind(k.change_id.as_str())
        .fetch_one(tx.conn())
        .await?;
    if others > 0 || !["running", "verifying", "awaiting_approval"].contains(&change_status.as_str()) {
        return Ok(None);
    }
    let held: Vec<String> = k.change_set_ids.iter().map(|c| c.to_string()).collect();
    let out = repair_in(tx, &k.change_id, &held, &trigger).await?;
    if let Err(reason) = &out {
        await_person(tx, &k.change_id, Some(candidate_id), reason, "repair").await?;
    }
    Ok(Some(out))
}

/// The integrate rule's six steps, in the conflict's transaction: the conflict resolved
/// (`review_json.integrate`), the edge in `task_dependencies`, the ChangeSets of the dependent
/// Task and of the Tasks built on it rejected, those Tasks reset (`task.reset`, a fresh attempt
/// window), the Change from `verifying` to `running`, the Decision Receipt
/// `CONFLICT_INTEGRATION`; then `conflict.integrated`.
async fn integrate_in(
    tx: &mut Tx,
    change_id: &ChangeId,
    conflict_id: &str,
    integ: &ConflictIntegration,
    tasks: &[Task],
    sets: &[ChangeSet],
) -> Result<(), StoreError> {
    let now = now_ms();
    let by_key = |k: &str| tasks.iter().find(|t| t.key == k).expect("a Task of the Change");
    let (dependent, on) = (by_key(&integ.dependent), by_key(&integ.depends_on));
    sqlx::query("update conflicts set review_json = $2, resolved = 1 where id = $1")
        .bind(conflict_id)
        .bind(to_json(&serde_json::json!({ "integrate": integ })))
        .execute(tx.conn())
        .await?;
    sqlx::query("insert into task_dependencies (task_id, depends_on) values ($1, $2) on conflict do nothing")
        .bind(dependent.id.as_str())
        .bind(on.id.as_str())
        .execute(tx.conn())
        .await?;
    let reset = tasks_to_reset(&integ.dependent, tasks);
    let reason = format!(
        "integrated: task {} now depends on task {} ({:?})",
        integ.dependent, integ.depends_on, integ.rule
    );
    let mut rejected = Vec::new();
    for key in &reset {
        let t = by_key(key);
        for cs in sets.iter().filter(|c| c.task_id == t.id) {
            sqlx::query("update change_sets set rejected_reason = $2 where id = $1 and rejected_reason is null")
                .bind(cs.id.as_str())
                .bind(reason.as_str())
                .execute(tx.conn())
                .await?;
            rejected.push(cs.id.to_string());
        }
        // Its other open conflicts are resolved with it.
        sqlx::query(
            "update conflicts set resolved = 1 where change_id = $1 and resolved = 0 and (task_a = $2 or task_b = $2)",
        )
        .bind(change_id.as_str())
        .bind(t.id.as_str())
        .execute(tx.conn())
        .await?;
        events::append(
            tx.conn(),
            change_id,
            "task.reset",
            &serde_json::json!({ "taskId": t.id.as_str(), "key": key, "reason": reason, "attemptWindowFrom": now }),
        )
        .await?;
    }
    sqlx::query("update changes set status = 'running', updated_at = $2 where id = $1 and status = 'verifying'")
        .bind(change_id.as_str())
        .bind(now)
        .execute(tx.conn())
        .await?;
    let outcome = serde_json::json!({
        "edge": { "task": integ.dependent, "dependsOn": integ.depends_on, "rule": integ.rule },
        "rejectedChangeSets": rejected,
        "resetTasks": reset,
    });
    insert_receipt(
        tx,
        change_id,
        ReceiptKind::ConflictIntegration,
        &format!("integration:{conflict_id}"),
        &serde_json::json!({ "conflictId": conflict_id }),
        &outcome,
    )
    .await?;
    events::append(
        tx.conn(),
        change_id,
        "conflict.integrated",
        &serde_json::json!({ "conflictId": conflict_id, "integrate": integ, "rejectedChangeSets": rejected }),
    )
    .await?;
    Ok(())
}

fn held_task_ids(candidate: &Candidate, sets: &[ChangeSet]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in &candidate.change_set_ids {
        if let Some(cs) = sets.iter().find(|c| &c.id == id)
            && !out.contains(&cs.task_id.to_string())
        {
            out.push(cs.task_id.to_string());
        }
    }
    out
}

fn members_held(members: &[Member], trigger: &RepairTrigger) -> Vec<String> {
    let id = match trigger {
        RepairTrigger::AcceptanceNotMet { candidate_id, .. }
        | RepairTrigger::PersonRejected { candidate_id, .. }
        | RepairTrigger::CheckFailed { candidate_id, .. } => candidate_id,
    };
    members
        .iter()
        .find(|m| &m.candidate.id == id)
        .map(|m| m.candidate.change_set_ids.iter().map(|c| c.to_string()).collect())
        .unwrap_or_default()
}

async fn fail_change(tx: &mut Tx, change_id: &ChangeId) -> Result<SelectionDone, StoreError> {
    let moved = sqlx::query(
        "update changes set status = 'failed', updated_at = $2 where id = $1 and status in ('running', 'verifying', 'awaiting_approval')",
    )
    .bind(change_id.as_str())
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if moved.rows_affected() == 1 {
        events::append(
            tx.conn(),
            change_id,
            "change.failed",
            &serde_json::json!({ "reason": "no Candidate can ship" }),
        )
        .await?;
    }
    Ok(SelectionDone::Failed)
}

/// The Change waits for a person: `awaiting_approval` and `approval.requested` with the reason.
/// Unless a verified Candidate is the one held (its own request, for its tree, follows on the
/// promotion path), the Change gets a request of its own, so a person finds what waits on them
/// and can cancel the Change: no Change waits on a person who cannot see it.
async fn await_person(
    tx: &mut Tx,
    change_id: &ChangeId,
    candidate_id: Option<&str>,
    reason: &str,
    trigger: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "update changes set status = 'awaiting_approval', updated_at = $2 where id = $1 and status in ('running', 'verifying')",
    )
    .bind(change_id.as_str())
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    let held_verified = match candidate_id {
        Some(id) => {
            let status: Option<String> = sqlx::query_scalar("select status from candidates where id = $1")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?;
            status.as_deref() == Some("verified")
        }
        None => false,
    };
    let approval_id = if held_verified {
        None
    } else {
        let kind = match trigger {
            "selection" => GateTrigger::Selection,
            "acceptance" => GateTrigger::Acceptance,
            _ => GateTrigger::Repair,
        };
        let reason = belay_domain::approval::change_request_reason(reason);
        crate::approvals::request_person_for_change(tx, change_id, kind, &reason).await?
    };
    events::append(
        tx.conn(),
        change_id,
        "approval.requested",
        &serde_json::json!({
            "changeId": change_id,
            "candidateId": candidate_id,
            "approvalId": approval_id.as_ref().map(|a| a.as_str()),
            "reason": reason,
            "trigger": trigger,
        }),
    )
    .await?;
    Ok(())
}

/// The selected winner, in the selection's transaction. It stays `verified` and selected until
/// the promotion path takes it. Acceptance not `pass`/`checked_supported`: the one repair when
/// acceptance found criteria `not_met` on a promotable winner, else `holdForAcceptance` (the
/// human gate on its plan, its status reason, the Change `awaiting_approval`,
/// `approval.requested` with the reason).
pub async fn winner_selected(tx: &mut Tx, winner: &Member) -> Result<SelectionDone, StoreError> {
    let k = &winner.candidate;
    let change_id = ChangeId(k.change_id.to_string());
    let Some(outcome) = winner.acceptance().or_else(|| acceptance_from_evidence(winner)) else {
        // No acceptance check planned: nothing holds it here.
        return Ok(SelectionDone::Winner {
            id: k.id.clone(),
            held: None,
            repair: None,
        });
    };
    if outcome.passed() {
        return Ok(SelectionDone::Winner {
            id: k.id.clone(),
            held: None,
            repair: None,
        });
    }
    let required_passed = k
        .plan
        .as_ref()
        .is_some_and(|p| gate_required_checks(p, &winner.evidence).gaps.is_empty());
    if let Some(trigger) = acceptance_trigger(&k.id, required_passed, &outcome) {
        let held: Vec<String> = k.change_set_ids.iter().map(|c| c.to_string()).collect();
        if let Ok(task) = repair_in(tx, &change_id, &held, &trigger).await? {
            return Ok(SelectionDone::Winner {
                id: k.id.clone(),
                held: None,
                repair: Some(task),
            });
        }
    }
    let reason = hold_for_acceptance(tx, k, &outcome).await?;
    Ok(SelectionDone::Winner {
        id: k.id.clone(),
        held: Some(reason),
        repair: None,
    })
}

/// The acceptance outcome when only the Evidence says it (a gap: no results stored).
fn acceptance_from_evidence(m: &Member) -> Option<AcceptanceOutcome> {
    let planned = m
        .candidate
        .plan
        .as_ref()
        .and_then(|p| p.check(&belay_domain::check::CheckId::Acceptance))
        .is_some();
    if !planned {
        return None;
    }
    let e = m
        .evidence
        .iter()
        .rev()
        .find(|e| e.check_id == belay_domain::check::CheckId::Acceptance);
    let result = match e {
        Some(e) => belay_domain::evidence::CheckResult::new(e.status, e.coverage, &e.summary),
        None => belay_domain::evidence::CheckResult::new(
            belay_domain::evidence::EvidenceStatus::Error,
            belay_domain::evidence::Coverage::NotChecked,
            "the acceptance check recorded nothing",
        ),
    };
    Some(AcceptanceOutcome {
        result,
        criteria_met: 0,
        criteria_total: 0,
        not_met: vec![],
        unclear: vec![],
        kept_not_met: vec![],
    })
}

/// `holdForAcceptance`: adds the human gate to the plan, sets the status reason, moves the Change
/// to `awaiting_approval` and records `approval.requested` with the reason.
pub async fn hold_for_acceptance(
    tx: &mut Tx,
    k: &Candidate,
    outcome: &AcceptanceOutcome,
) -> Result<String, StoreError> {
    let gate = acceptance_hold(outcome);
    let mut plan = k.plan.clone();
    let mut gates = Vec::new();
    if let Some(p) = plan.as_mut() {
        if !p.human_gates.contains(&gate) {
            p.human_gates.push(gate.clone());
        }
        gates = p.human_gates.clone();
    }
    if gates.is_empty() {
        gates.push(gate);
    }
    let reason = approval_reason(&gates).unwrap_or_default();
    sqlx::query("update candidates set plan_json = $2, status_reason = $3, updated_at = $4 where id = $1")
        .bind(k.id.as_str())
        .bind(plan.as_ref().map(to_json))
        .bind(reason.as_str())
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    await_person(tx, &k.change_id, Some(&k.id), &reason, "acceptance").await?;
    Ok(reason)
}

/// The one repair Task of a Change, in the caller's transaction: `Ok(task)` when added (the
/// Change back to `running`, Decision Receipt `ACCEPTANCE_REPAIR`, `task.repair_requested` with
/// the objective for the agents); `Err(reason)` when the Change already had its repair.
/// `held_change_sets`: the ChangeSet (or Task) ids the Candidate holds.
async fn repair_in(
    tx: &mut Tx,
    change_id: &ChangeId,
    held_change_sets: &[String],
    trigger: &RepairTrigger,
) -> Result<Result<TaskId, String>, StoreError> {
    let rows = sqlx::query(
        r#"select t.id, t.key, t.semantic_resources, s.id as cs from tasks t left join change_sets s on s.task_id = t.id
           where t.change_id = $1 order by t.created_at, t.key"#,
    )
    .bind(change_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut resources: Vec<String> = Vec::new();
    let mut has_repair = false;
    for r in &rows {
        let id: String = r.try_get("id")?;
        let key: String = r.try_get("key")?;
        let cs: Option<String> = r.try_get("cs")?;
        if key == REPAIR_TASK_KEY {
            has_repair = true;
        }
        let held = held_change_sets.contains(&id) || cs.as_ref().is_some_and(|c| held_change_sets.contains(c));
        if held && !keys.iter().any(|(k, _)| k == &key) {
            let res: Vec<String> = json(&r.try_get::<String, _>("semantic_resources")?, "semantic_resources")?;
            resources.extend(res);
            keys.push((key, id));
        }
    }
    let key_list: Vec<String> = keys.iter().map(|(k, _)| k.clone()).collect();
    let plan = match repair_decision(trigger, has_repair, &key_list, &resources) {
        RepairDecision::ToPerson { reason } => return Ok(Err(reason)),
        RepairDecision::Repair(plan) => plan,
    };
    let id = TaskId::from_body(&new_id_body());
    let now = now_ms();
    let inserted = sqlx::query(
        r#"insert into tasks (id, change_id, key, kind, title, semantic_resources, created_at)
           values ($1, $2, $3, $4, $5, $6, $7) on conflict (change_id, key) do nothing"#,
    )
    .bind(id.as_str())
    .bind(change_id.as_str())
    .bind(plan.task.key.as_str())
    .bind(enum_text(&plan.task.kind))
    .bind(plan.task.title.as_str())
    .bind(to_json(&plan.task.semantic_resources))
    .bind(now)
    .execute(tx.conn())
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(Err("The change already had its repair.".into()));
    }
    let mut deps = BTreeSet::new();
    for (key, task) in &keys {
        if plan.task.dependencies.contains(key) && deps.insert(task.clone()) {
            sqlx::query("insert into task_dependencies (task_id, depends_on) values ($1, $2)")
                .bind(id.as_str())
                .bind(task)
                .execute(tx.conn())
                .await?;
        }
    }
    sqlx::query(
        "update changes set status = 'running', updated_at = $2 where id = $1 and status in ('verifying', 'awaiting_approval')",
    )
    .bind(change_id.as_str())
    .bind(now)
    .execute(tx.conn())
    .await?;
    let outcome = serde_json::json!({
        "taskId": id.as_str(),
        "key": plan.task.key,
        "dependencies": plan.task.dependencies,
        "objective": plan.objective,
    });
    insert_receipt(
        tx,
        change_id,
        ReceiptKind::AcceptanceRepair,
        &format!("repair:{change_id}"),
        &serde_json::to_value(trigger).unwrap_or_default(),
        &outcome,
    )
    .await?;
    events::append(tx.conn(), change_id, "task.repair_requested", &outcome).await?;
    Ok(Ok(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_paths_name_both_sides_once() {
        let p = "diff --git a/src/a.ts b/src/a.ts\n--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1 +1 @@\n-x\n+y\n\
                 diff --git a/old.ts b/new.ts\nrename from old.ts\n";
        assert_eq!(patch_paths(p), vec!["src/a.ts", "old.ts", "new.ts"]);
    }
}

crate::one_step! {
    read change_set_origins(account_id: &AccountId, change_id: &ChangeId) -> Vec<(ChangeSet, Option<String>)>;
    write record_conflict(account_id: &AccountId, change_id: &ChangeId, input: &ConflictInput, paths_of: &BTreeMap<String, Vec<String>>) -> Conflict;
    write start_verification_round(account_id: &AccountId, change_id: &ChangeId) -> Vec<Candidate>;
    read sibling_group(candidate_id: &CandidateId) -> Option<Vec<Member>>;
    write claim_selection(candidate_id: &CandidateId, claimant: &str) -> SelectionStep;
    write apply_selection(candidate_id: &CandidateId, claimant: &str, judge: Option<&JudgeOutcome>) -> SelectionDone;
    write set_acceptance(id: &str, criteria: Option<&[belay_domain::acceptance::JudgedCriterion]>, metrics: &belay_domain::candidate::CandidateMetrics) -> ();
    write repair_after_rejection(candidate_id: &CandidateId, reason: Option<&str>) -> Option<Result<TaskId, String>>;
    write repair_lone_after_acceptance(candidate_id: &CandidateId) -> Option<TaskId>;
}
