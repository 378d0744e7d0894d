//! Approvals: what waits on a person, for which exact composed tree, and the one decision that
//! settles it. The rules are `belay_domain::approval` (a grant counts only for the tree the request
//! is for, the first decision is final); this module makes them durable: one row per Candidate,
//! decided by one conditional update, so two people deciding at once never both count.

use crate::Tx;
use crate::rows::{enum_from, enum_text, to_json};
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::approval::{
    Approval, ApprovalDecision, ApprovalInput, ApprovalRefusal, ApprovalStatus, ApprovalVerdict, ApprovalView,
    GateTrigger, HumanGate, approval_actions, decide,
};
use belay_domain::candidate::Candidate;
use belay_domain::ids::{AccountId, ApprovalId, CandidateId, ChangeId};
use belay_domain::plan::VerificationPlan;
use belay_domain::repair::{RepairTrigger, rejection_trigger};
use sqlx::Row;
use sqlx::any::AnyRow;

const APPROVAL_COLUMNS: &str = "a.id, a.candidate_id, a.status, a.tree, a.trigger_kind, a.reason, a.requested_at, \
     a.decided_at, a.decided_by, a.decision_reason";

fn approval_row(r: &AnyRow) -> Result<Approval, StoreError> {
    Ok(Approval {
        id: r.try_get::<String, _>("id")?.into(),
        candidate_id: r.try_get::<Option<String>, _>("candidate_id")?.map(Into::into),
        status: enum_from(&r.try_get::<String, _>("status")?, "approval status")?,
        tree: r.try_get("tree")?,
        trigger: enum_from(&r.try_get::<String, _>("trigger_kind")?, "gate trigger")?,
        reason: r.try_get("reason")?,
        requested_at: r.try_get("requested_at")?,
        decided_at: r.try_get("decided_at")?,
        decided_by: r.try_get::<Option<String>, _>("decided_by")?.map(Into::into),
        decision_reason: r.try_get("decision_reason")?,
    })
}

/// What a recorded decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub approval: Approval,
    /// The decision was recorded now (false: the same decision again, nothing changed).
    pub recorded: bool,
    /// A rejection with a reason: the repair it asked for.
    pub repair: Option<RepairTrigger>,
}

/// A refusal as the 409 the API answers, naming what to fix.
fn refusal(r: ApprovalRefusal) -> StoreError {
    StoreError::Conflict(match r {
        ApprovalRefusal::NotRequested => "approval: nothing waits on a person for this candidate".into(),
        ApprovalRefusal::AlreadyDecided { status } => format!(
            "approval: the first decision is final; this candidate's approval is already {}",
            enum_text(&status)
        ),
        ApprovalRefusal::OtherTree { tree } => {
            format!("tree: a grant counts only for the exact composed tree the approval is for ({tree})")
        }
    })
}

/// THE place a person's rejection with a reason turns into a repair (the spec's "A person
/// rejects a gated Candidate with a reason. The reason goes into the objective."). It records the
/// trigger as the event `repair.requested`, in the decision's own transaction; the repair Task
/// itself (key `repair`, one per Change) is then made by [`Store::repair_after_rejection`], which
/// the approval route calls once the decision is recorded.
async fn request_repair_for_rejection(
    tx: &mut Tx,
    change_id: &ChangeId,
    trigger: &RepairTrigger,
) -> Result<(), StoreError> {
    events::append(
        tx.conn(),
        change_id,
        "repair.requested",
        &serde_json::to_value(trigger).unwrap_or_default(),
    )
    .await
}

/// The Candidate's approval, if one was requested.
pub async fn approval_for_worker(tx: &mut Tx, candidate_id: &CandidateId) -> Result<Option<Approval>, StoreError> {
    let sql = format!("select {APPROVAL_COLUMNS} from approvals a where a.candidate_id = $1");
    let row = sqlx::query(&sql)
        .bind(candidate_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(approval_row).transpose()
}

/// Asks a person to approve a verified winner: one approval row for its composed tree, the
/// gates added to its plan (the policy hold and the acceptance hold join the plan), the status
/// reason, the Change `awaiting_approval`, and `approval.requested` with the reason. A second
/// call answers the row the first made and writes nothing.
pub async fn request_approval(
    tx: &mut Tx,
    candidate_id: &CandidateId,
    tree: &str,
    gates: &[HumanGate],
    reason: &str,
) -> Result<Approval, StoreError> {
    if let Some(a) = approval_for_worker(tx, candidate_id).await? {
        return Ok(a);
    }
    let candidate = crate::candidates::candidate_for_worker(tx, candidate_id)
        .await?
        .ok_or_else(|| StoreError::not_found("candidate", candidate_id.as_str()))?;
    let trigger = gates
        .iter()
        .find(|g| g.trigger == GateTrigger::Acceptance)
        .map_or(GateTrigger::Policy, |g| g.trigger);
    let now = now_ms();
    let id = ApprovalId::from_body(&new_id_body());
    let inserted = sqlx::query(
        r#"insert into approvals (id, candidate_id, change_id, project_id, status, tree, trigger_kind, reason, requested_at)
           values ($1, $2, $8, $3, 'requested', $4, $5, $6, $7)
           on conflict (candidate_id) do nothing"#,
    )
    .bind(id.as_str())
    .bind(candidate_id.as_str())
    .bind(candidate.project_id.as_str())
    .bind(tree)
    .bind(enum_text(&trigger))
    .bind(reason)
    .bind(now)
    .bind(candidate.change_id.as_str())
    .execute(tx.conn())
    .await?;
    if inserted.rows_affected() == 1 {
        let plan: Option<VerificationPlan> = candidate.plan.clone().map(|mut p| {
            for g in gates {
                if !p.human_gates.contains(g) {
                    p.human_gates.push(g.clone());
                }
            }
            p
        });
        sqlx::query("update candidates set status_reason = $2, plan_json = $3, updated_at = $4 where id = $1")
            .bind(candidate_id.as_str())
            .bind(reason)
            .bind(plan.as_ref().map(to_json))
            .bind(now)
            .execute(tx.conn())
            .await?;
        let started_waiting = sqlx::query(
            "update changes set status = 'awaiting_approval', updated_at = $2 where id = $1 and status in ('running', 'verifying')",
        )
        .bind(candidate.change_id.as_str())
        .bind(now)
        .execute(tx.conn())
        .await?
        .rows_affected()
            == 1;
        // `approval.requested` is recorded when the Change starts waiting on a person; a
        // selected winner held for acceptance recorded it with the hold, in the selection's
        // transaction, and its approval row is added here without a second one.
        if started_waiting {
            events::append(
                tx.conn(),
                candidate_id,
                "approval.requested",
                &serde_json::json!({
                    "approvalId": id.as_str(),
                    "changeId": candidate.change_id.as_str(),
                    "tree": tree,
                    "trigger": enum_text(&trigger),
                    "reason": reason,
                    "policyId": candidate.plan.as_ref().map(|p| p.policy.policy_id.clone()),
                }),
            )
            .await?;
        }
    }
    approval_for_worker(tx, candidate_id)
        .await?
        .ok_or_else(|| StoreError::not_found("approval", candidate_id.as_str()))
}

/// A person's decision on a Candidate the account owns. A grant naming another tree, a
/// decision where none was requested and a second, different decision are refused (409,
/// nothing written). A rejection also rejects the Candidate and, with a reason, requests the
/// repair; all of it in one transaction.
pub async fn decide_approval(
    tx: &mut Tx,
    account_id: &AccountId,
    candidate_id: &CandidateId,
    input: &ApprovalInput,
) -> Result<Decided, StoreError> {
    input.validate()?;
    let candidate = crate::candidates::get_candidate(tx, account_id, candidate_id)
        .await?
        .ok_or_else(|| StoreError::not_found("candidate", candidate_id.as_str()))?;
    for _ in 0..5 {
        let existing = approval_for_worker(tx, candidate_id).await?;
        let status = match decide(existing.as_ref(), input) {
            ApprovalVerdict::Refused(r) => return Err(refusal(r)),
            ApprovalVerdict::Unchanged => {
                return Ok(Decided {
                    approval: existing.expect("an unchanged decision has a row"),
                    recorded: false,
                    repair: None,
                });
            }
            ApprovalVerdict::Record { status } => status,
        };
        let reason = input.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
        let now = now_ms();
        let moved = sqlx::query(
            r#"update approvals set status = $2, decided_at = $3, decided_by = $4, decision_reason = $5
               where candidate_id = $1 and status = 'requested' and tree = $6"#,
        )
        .bind(candidate_id.as_str())
        .bind(enum_text(&status))
        .bind(now)
        .bind(account_id.as_str())
        .bind(reason)
        .bind(&input.tree)
        .execute(tx.conn())
        .await?;
        if moved.rows_affected() == 0 {
            // Someone decided first: read their decision and answer against it.
            continue;
        }
        let kind = match input.decision {
            ApprovalDecision::Grant => "approval.granted",
            ApprovalDecision::Reject => "approval.rejected",
        };
        events::append(
            tx.conn(),
            candidate_id,
            kind,
            &serde_json::json!({ "tree": input.tree, "by": account_id, "reason": reason }),
        )
        .await?;
        let repair = match input.decision {
            ApprovalDecision::Reject => reject_by_person(tx, &candidate, reason, now).await?,
            ApprovalDecision::Grant => None,
        };
        let approval = approval_for_worker(tx, candidate_id)
            .await?
            .ok_or_else(|| StoreError::not_found("approval", candidate_id))?;
        return Ok(Decided {
            approval,
            recorded: true,
            repair,
        });
    }
    Err(StoreError::Conflict("approval: decided concurrently; try again".into()))
}

/// A person's rejection: the Candidate `rejected` (while it could still ship), and with a
/// reason, the repair requested for its Change. Answers the repair's trigger, if any.
async fn reject_by_person(
    tx: &mut Tx,
    candidate: &Candidate,
    reason: Option<&str>,
    now: i64,
) -> Result<Option<RepairTrigger>, StoreError> {
    let why = match reason {
        Some(r) => format!("Rejected by a person: {r}"),
        None => "Rejected by a person.".to_owned(),
    };
    let rejected = sqlx::query(
        r#"update candidates set status = 'rejected', status_reason = $2, updated_at = $3
           where id = $1 and status in ('composing', 'verifying', 'verified')"#,
    )
    .bind(candidate.id.as_str())
    .bind(&why)
    .bind(now)
    .execute(tx.conn())
    .await?;
    if rejected.rows_affected() == 1 {
        events::append(
            tx.conn(),
            &candidate.id,
            "candidate.rejected",
            &serde_json::json!({ "reason": why }),
        )
        .await?;
    }
    let repair = rejection_trigger(&candidate.id, reason);
    if let Some(t) = &repair {
        request_repair_for_rejection(tx, &candidate.change_id, t).await?;
    }
    Ok(repair)
}

/// The approvals of the account's projects in `status`, oldest first. `requested` is what
/// waits on a person: a Candidate's request while the Candidate is verified, a Change's own
/// request while the Change is `awaiting_approval`. A Candidate that went stale or was
/// rejected since waits on no one.
pub async fn list_approvals(
    tx: &mut Tx,
    account_id: &AccountId,
    status: ApprovalStatus,
    limit: i64,
) -> Result<Vec<ApprovalView>, StoreError> {
    let sql = format!(
        "select {APPROVAL_COLUMNS}, a.change_id, a.project_id, k.composed_commit, k.status as candidate_status \
         from approvals a join changes c on c.id = a.change_id join projects p on p.id = a.project_id \
         left join candidates k on k.id = a.candidate_id \
         where p.account_id = $1 and p.status <> 'deleting' and a.status = $2 \
         and (a.status <> 'requested' or k.status = 'verified' \
              or (a.candidate_id is null and c.status = 'awaiting_approval')) \
         order by a.requested_at, a.id limit $3"
    );
    let rows = sqlx::query(&sql)
        .bind(account_id.as_str())
        .bind(enum_text(&status))
        .bind(limit)
        .fetch_all(tx.conn())
        .await?;
    rows.iter()
        .map(|r| {
            let approval = approval_row(r)?;
            let verified = r.try_get::<Option<String>, _>("candidate_status")?.as_deref() == Some("verified");
            let actions = if approval.status == ApprovalStatus::Requested {
                approval_actions(verified)
            } else {
                Vec::new()
            };
            Ok(ApprovalView {
                approval,
                change_id: r.try_get("change_id")?,
                project_id: r.try_get("project_id")?,
                composed_commit: r.try_get("composed_commit")?,
                actions,
            })
        })
        .collect()
}

/// A Change that waits on a person with no promotable Candidate: its own request (no Candidate,
/// no tree), in the caller's transaction, so `GET /v1/approvals?status=requested` lists it and the
/// person can cancel the Change. One open request per Change: a second call writes nothing.
pub(crate) async fn request_person_for_change(
    tx: &mut Tx,
    change_id: &ChangeId,
    trigger: GateTrigger,
    reason: &str,
) -> Result<Option<ApprovalId>, StoreError> {
    // The Change waits again: its open request says why now.
    let open: Option<String> = sqlx::query_scalar(
        r#"update approvals set trigger_kind = $2, reason = $3
           where change_id = $1 and candidate_id is null and status = 'requested' returning id"#,
    )
    .bind(change_id.as_str())
    .bind(enum_text(&trigger))
    .bind(reason)
    .fetch_optional(tx.conn())
    .await?;
    if let Some(id) = open {
        return Ok(Some(id.into()));
    }
    let id = ApprovalId::from_body(&new_id_body());
    let inserted = sqlx::query(
        r#"insert into approvals (id, candidate_id, change_id, project_id, status, tree, trigger_kind, reason, requested_at)
           select $1, null, c.id, c.project_id, 'requested', null, $3, $4, $5 from changes c where c.id = $2
           on conflict do nothing"#,
    )
    .bind(id.as_str())
    .bind(change_id.as_str())
    .bind(enum_text(&trigger))
    .bind(reason)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    Ok((inserted.rows_affected() == 1).then_some(id))
}

crate::one_step! {
    read approval_for_worker(candidate_id: &CandidateId) -> Option<Approval>;
    write request_approval(candidate_id: &CandidateId, tree: &str, gates: &[HumanGate], reason: &str) -> Approval;
    write decide_approval(account_id: &AccountId, candidate_id: &CandidateId, input: &ApprovalInput) -> Decided;
    read list_approvals(account_id: &AccountId, status: ApprovalStatus, limit: i64) -> Vec<ApprovalView>;
}
