//! Sibling selection: which of a Change's Candidates on one base goes on to promotion.
//!
//! No sibling promotes alone. When every sibling is gated, one workflow run claims the selection
//! on the anchor (the earliest Candidate), ranks the group, asks the Integration Judge only on a
//! tie, and applies the outcome: losers rejected with a reason, a winner to the promotion path, or
//! a person to pick when the Judge gives no valid preference. The ranking, the claim rule, the
//! Judge's closed verdict and its validation, and the texts live here.

use crate::acceptance::{AcceptanceOutcome, ToolCall};
use crate::candidate::CandidateStatus;
use crate::evidence::{Evidence, evaluate, gate_required_checks, latest_per_check};
use crate::ids::{CandidateId, EvidenceId};
use crate::plan::VerificationPlan;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeSet;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The Judge's tool.
pub const RECORD_VERDICT: &str = "record_verdict";

/// A sibling as selection sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sibling {
    pub id: CandidateId,
    pub created_at: i64,
    pub status: CandidateStatus,
}

/// The anchor of a group: the earliest Candidate (`created_at`, then id).
pub fn selection_anchor(group: &[Sibling]) -> Option<&CandidateId> {
    group
        .iter()
        .min_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
        .map(|s| &s.id)
}

/// Whether a sibling still composes or verifies: then this run ends and the last one selects.
pub fn siblings_pending(group: &[Sibling]) -> bool {
    group.iter().any(|s| s.status.is_pending())
}

/// `selection_json` of a Candidate: first the claim on the anchor, then the outcome on each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SelectionJson {
    /// Written on the anchor by one conditional update from null.
    Claimed {
        claimed_by: String,
        claimed_at: i64,
    },
    Decided(Selection),
}

/// What a run does after trying the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The anchor's `selection_json` is null: write the claim (a conditional update; zero rows
    /// means another run won, so read again).
    Claim,
    /// This run holds the claim (a retry): go on.
    Continue,
    /// Another run holds it, or the group is decided: stop.
    Stop,
}

/// The claim rule, given the anchor's `selection_json` and this run's id.
pub fn claim_outcome(anchor_selection: Option<&SelectionJson>, run_id: &str) -> ClaimOutcome {
    match anchor_selection {
        None => ClaimOutcome::Claim,
        Some(SelectionJson::Claimed { claimed_by, .. }) if claimed_by == run_id => ClaimOutcome::Continue,
        Some(_) => ClaimOutcome::Stop,
    }
}

/// What ranking reads of one Candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RankInput {
    pub id: CandidateId,
    /// Verified, and every required check satisfied.
    pub promotable: bool,
    pub criteria_met: u32,
    pub criteria_total: u32,
    /// Required checks not satisfied.
    pub gaps: u32,
    /// Optional checks whose latest record is not satisfied.
    pub optional_failures: u32,
    /// Planned checks whose latest record is satisfied.
    pub passing_checks: u32,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Reads a Candidate's rank from its status, plan, Evidence and acceptance outcome.
pub fn rank_input(
    id: &CandidateId,
    status: CandidateStatus,
    plan: Option<&VerificationPlan>,
    evidence: &[Evidence],
    acceptance: Option<&AcceptanceOutcome>,
) -> RankInput {
    let (gaps, optional_failures, passing) = match plan {
        None => (1, 0, 0),
        Some(plan) => {
            let gate = gate_required_checks(plan, evidence);
            let latest = latest_per_check(plan, evidence);
            let passing = plan
                .checks
                .iter()
                .filter(|c| evaluate(c, latest.get(&c.check_id).copied()).is_ok())
                .count();
            let optional_failures = plan
                .checks
                .iter()
                .filter(|c| !c.required)
                .filter(|c| latest.get(&c.check_id).is_some_and(|e| evaluate(c, Some(e)).is_err()))
                .count();
            (gate.gaps.len(), optional_failures, passing)
        }
    };
    RankInput {
        id: id.clone(),
        promotable: status == CandidateStatus::Verified && plan.is_some() && gaps == 0,
        criteria_met: acceptance.map_or(0, |a| a.criteria_met),
        criteria_total: acceptance.map_or(0, |a| a.criteria_total),
        gaps: count(gaps),
        optional_failures: count(optional_failures),
        passing_checks: count(passing),
    }
}

/// The ranking order: promotable first, then most criteria met, then fewer gaps and optional
/// failures, then more passing checks. `Equal` is a tie.
pub fn rank_order(a: &RankInput, b: &RankInput) -> Ordering {
    b.promotable
        .cmp(&a.promotable)
        .then(b.criteria_met.cmp(&a.criteria_met))
        .then((a.gaps + a.optional_failures).cmp(&(b.gaps + b.optional_failures)))
        .then(b.passing_checks.cmp(&a.passing_checks))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Ranking {
    /// One best promotable Candidate.
    Winner { id: CandidateId },
    /// Several promotable Candidates rank equal at the top: the Integration Judge decides.
    Tie { ids: Vec<CandidateId> },
    /// No Candidate can ship.
    NonePromotable,
}

/// Ranks a group: the order (best first; ties by id so it is stable) and the outcome.
pub fn rank(group: &[RankInput]) -> (Vec<CandidateId>, Ranking) {
    let mut sorted: Vec<&RankInput> = group.iter().collect();
    sorted.sort_by(|a, b| rank_order(a, b).then_with(|| a.id.cmp(&b.id)));
    let order = sorted.iter().map(|r| r.id.clone()).collect();
    let outcome = match sorted.first() {
        Some(best) if best.promotable => {
            let tied: Vec<CandidateId> = sorted
                .iter()
                .filter(|r| rank_order(best, r) == Ordering::Equal)
                .map(|r| r.id.clone())
                .collect();
            if tied.len() > 1 {
                Ranking::Tie { ids: tied }
            } else {
                Ranking::Winner { id: best.id.clone() }
            }
        }
        _ => Ranking::NonePromotable,
    };
    (order, outcome)
}

/// The Integration Judge's closed verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum JudgeVerdict {
    PreferCandidate {
        #[serde(rename = "candidateId")]
        candidate_id: CandidateId,
        #[serde(rename = "evidenceIds")]
        evidence_ids: Vec<EvidenceId>,
        reason: String,
    },
    RejectCandidate {
        #[serde(rename = "candidateId")]
        candidate_id: CandidateId,
        #[serde(rename = "evidenceIds", default)]
        evidence_ids: Vec<EvidenceId>,
        reason: String,
    },
    NeedsMoreEvidence {
        reason: String,
    },
    EscalateToHuman {
        reason: String,
    },
}

/// The JSON schema of the Judge's `record_verdict` tool.
pub fn record_verdict_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["verdict", "reason"],
        "properties": {
            "verdict": {"type": "string", "enum": ["prefer_candidate", "reject_candidate", "needs_more_evidence", "escalate_to_human"]},
            "candidateId": {"type": "string", "description": "for prefer_candidate and reject_candidate: one of the tied candidates"},
            "evidenceIds": {"type": "array", "items": {"type": "string"}, "description": "the Evidence ids the verdict rests on"},
            "reason": {"type": "string"}
        }
    })
}

/// What the Judge's answer decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum JudgeOutcome {
    /// A valid `prefer_candidate`.
    Winner { id: CandidateId, reason: String },
    /// Anything else: the Change waits for a person to pick.
    ToPerson { reason: String },
}

/// Validates the Judge's answer: exactly one `record_verdict` call of the schema. Only a
/// `prefer_candidate` naming one of the `tied` Candidates and citing at least one Evidence id,
/// every one of them from the `snapshot` the Judge was shown, picks a winner.
pub fn judge_outcome(calls: &[ToolCall], tied: &[CandidateId], snapshot: &BTreeSet<EvidenceId>) -> JudgeOutcome {
    let to_person = |why: String| JudgeOutcome::ToPerson {
        reason: format!(
            "Candidates {} rank equal and {why}. Pick one to ship or cancel the change.",
            tied.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    let [call] = calls else {
        return to_person(format!("the Integration Judge gave {} answers, not one", calls.len()));
    };
    if call.name != RECORD_VERDICT {
        return to_person(format!("the Integration Judge called {}", call.name));
    }
    let verdict: JudgeVerdict = match serde_json::from_value(call.input.clone()) {
        Ok(v) => v,
        Err(e) => return to_person(format!("the Integration Judge's answer is not a verdict ({e})")),
    };
    match verdict {
        JudgeVerdict::PreferCandidate {
            candidate_id,
            evidence_ids,
            reason,
        } => {
            if !tied.contains(&candidate_id) {
                to_person(format!(
                    "the Integration Judge preferred {candidate_id}, which is not tied"
                ))
            } else if evidence_ids.is_empty() {
                to_person("the Integration Judge cited no Evidence".into())
            } else if let Some(bad) = evidence_ids.iter().find(|e| !snapshot.contains(*e)) {
                to_person(format!("the Integration Judge cited {bad}, which it was not shown"))
            } else {
                JudgeOutcome::Winner {
                    id: candidate_id,
                    reason,
                }
            }
        }
        JudgeVerdict::RejectCandidate { candidate_id, .. } => to_person(format!(
            "the Integration Judge rejected {candidate_id} without preferring another"
        )),
        JudgeVerdict::NeedsMoreEvidence { .. } => to_person("the Integration Judge needs more evidence".into()),
        JudgeVerdict::EscalateToHuman { .. } => to_person("the Integration Judge asks a person".into()),
    }
}

/// Why a verified Candidate lost: "Lost to cand_x: met 3 of 3 criteria, this met 2 of 3." The
/// first ranking key that tells them apart gives the words; the Judge's reason when it decided.
pub fn loser_reason(winner: &RankInput, loser: &RankInput, judge_reason: Option<&str>) -> String {
    let w = &winner.id;
    if let Some(r) = judge_reason {
        return format!("Lost to {w}: the Integration Judge preferred it ({r}).");
    }
    if winner.promotable != loser.promotable {
        return format!("Lost to {w}: this did not pass every required check.");
    }
    if winner.criteria_met != loser.criteria_met {
        return format!(
            "Lost to {w}: met {} of {} criteria, this met {} of {}.",
            winner.criteria_met, winner.criteria_total, loser.criteria_met, loser.criteria_total
        );
    }
    let (wg, lg) = (
        winner.gaps + winner.optional_failures,
        loser.gaps + loser.optional_failures,
    );
    if wg != lg {
        return format!("Lost to {w}: {wg} gaps and optional failures, this had {lg}.");
    }
    format!(
        "Lost to {w}: {} checks passed, this passed {}.",
        winner.passing_checks, loser.passing_checks
    )
}

/// How the group was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    Ranking,
    Judge,
    /// No valid preference: a person picks.
    Person,
    /// No Candidate can ship.
    NoWinner,
}

/// The outcome each Candidate of the group stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    pub anchor: CandidateId,
    /// Best first.
    pub ranking: Vec<RankInput>,
    pub winner: Option<CandidateId>,
    pub decided_by: DecidedBy,
    /// For the whole group: why a person must pick, or the Judge's reason.
    pub reason: Option<String>,
    pub decided_at: i64,
}

/// What applying a selection does to one Candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateSelectionUpdate {
    pub id: CandidateId,
    /// A verified loser becomes `rejected` with this reason.
    pub reject_with: Option<String>,
}

/// What applying a selection does to the Change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeAfterSelection {
    /// The winner goes on the promotion path.
    Promote { winner: CandidateId },
    /// A person picks (`awaiting_approval`), with this reason.
    AwaitPerson { reason: String },
    /// No Candidate can ship: the Change fails (unless a repair Task is planned instead).
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectionApplied {
    pub selection: Selection,
    pub updates: Vec<CandidateSelectionUpdate>,
    pub change: ChangeAfterSelection,
}

/// Applies a ranking (and the Judge's outcome on a tie) to the group: every verified loser is
/// rejected with its reason; a person picks when a tie has no valid preference.
pub fn apply_selection(
    anchor: &CandidateId,
    group: &[(RankInput, CandidateStatus)],
    judge: Option<&JudgeOutcome>,
    decided_at: i64,
) -> SelectionApplied {
    let inputs: Vec<RankInput> = group.iter().map(|(r, _)| r.clone()).collect();
    let (order, ranking) = rank(&inputs);
    let by_id = |id: &CandidateId| inputs.iter().find(|r| &r.id == id);
    let (winner, decided_by, reason, judge_reason) = match (&ranking, judge) {
        (Ranking::Winner { id }, _) => (Some(id.clone()), DecidedBy::Ranking, None, None),
        (Ranking::Tie { .. }, Some(JudgeOutcome::Winner { id, reason })) => (
            Some(id.clone()),
            DecidedBy::Judge,
            Some(reason.clone()),
            Some(reason.as_str()),
        ),
        (Ranking::Tie { .. }, Some(JudgeOutcome::ToPerson { reason })) => {
            (None, DecidedBy::Person, Some(reason.clone()), None)
        }
        (Ranking::Tie { ids }, None) => (
            None,
            DecidedBy::Person,
            Some(format!(
                "Candidates {} rank equal and no Integration Judge answered. Pick one to ship or cancel the change.",
                ids.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
            )),
            None,
        ),
        (Ranking::NonePromotable, _) => (None, DecidedBy::NoWinner, None, None),
    };
    let updates = group
        .iter()
        .filter(|(r, status)| *status == CandidateStatus::Verified && Some(&r.id) != winner.as_ref())
        .filter_map(|(r, _)| {
            let w = by_id(winner.as_ref()?)?;
            Some(CandidateSelectionUpdate {
                id: r.id.clone(),
                reject_with: Some(loser_reason(w, r, judge_reason)),
            })
        })
        .collect();
    let change = match (&winner, decided_by) {
        (Some(w), _) => ChangeAfterSelection::Promote { winner: w.clone() },
        (None, DecidedBy::Person) => ChangeAfterSelection::AwaitPerson {
            reason: reason.clone().unwrap_or_default(),
        },
        (None, _) => ChangeAfterSelection::Failed,
    };
    let ranking_rows = order.iter().filter_map(|id| by_id(id).cloned()).collect();
    SelectionApplied {
        selection: Selection {
            anchor: anchor.clone(),
            ranking: ranking_rows,
            winner,
            decided_by,
            reason,
            decided_at,
        },
        updates,
        change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cand(id: &str) -> CandidateId {
        CandidateId::from_body(id)
    }

    fn sib(id: &str, created_at: i64, status: CandidateStatus) -> Sibling {
        Sibling {
            id: cand(id),
            created_at,
            status,
        }
    }

    #[test]
    fn the_anchor_is_the_earliest_candidate_then_the_smallest_id() {
        let group = [
            sib("b", 10, CandidateStatus::Verified),
            sib("a", 10, CandidateStatus::Rejected),
            sib("c", 5, CandidateStatus::Verified),
        ];
        assert_eq!(selection_anchor(&group), Some(&cand("c")));
        assert_eq!(selection_anchor(&group[..2]), Some(&cand("a")));
        assert_eq!(selection_anchor(&[]), None);
    }

    #[test]
    fn a_sibling_still_composing_or_verifying_holds_selection_back() {
        assert!(siblings_pending(&[sib("a", 1, CandidateStatus::Verifying)]));
        assert!(siblings_pending(&[sib("a", 1, CandidateStatus::Composing)]));
        assert!(!siblings_pending(&[
            sib("a", 1, CandidateStatus::Verified),
            sib("b", 1, CandidateStatus::Rejected)
        ]));
    }

    #[test]
    fn the_claimant_continues_and_every_other_run_stops() {
        assert_eq!(claim_outcome(None, "run-1"), ClaimOutcome::Claim);
        let claimed = SelectionJson::Claimed {
            claimed_by: "run-1".into(),
            claimed_at: 5,
        };
        assert_eq!(claim_outcome(Some(&claimed), "run-1"), ClaimOutcome::Continue);
        assert_eq!(claim_outcome(Some(&claimed), "run-2"), ClaimOutcome::Stop);
    }

    fn r(id: &str, promotable: bool, met: u32, gaps: u32, opt: u32, passing: u32) -> RankInput {
        RankInput {
            id: cand(id),
            promotable,
            criteria_met: met,
            criteria_total: 3,
            gaps,
            optional_failures: opt,
            passing_checks: passing,
        }
    }

    #[test]
    fn promotable_comes_first_then_criteria_then_fewer_gaps_then_more_passing_checks() {
        let (order, outcome) = rank(&[
            r("a", false, 3, 1, 0, 9),
            r("b", true, 2, 0, 0, 5),
            r("c", true, 3, 0, 1, 5),
            r("d", true, 3, 0, 0, 4),
            r("e", true, 3, 0, 0, 5),
        ]);
        let names: Vec<&str> = order.iter().map(|c| c.as_str()).collect();
        assert_eq!(names, ["cand_e", "cand_d", "cand_c", "cand_b", "cand_a"]);
        assert_eq!(outcome, Ranking::Winner { id: cand("e") });
    }

    #[test]
    fn equal_promotable_candidates_at_the_top_are_a_tie() {
        let (_, outcome) = rank(&[
            r("b", true, 3, 0, 0, 5),
            r("a", true, 3, 0, 0, 5),
            r("c", true, 2, 0, 0, 9),
        ]);
        assert_eq!(
            outcome,
            Ranking::Tie {
                ids: vec![cand("a"), cand("b")]
            }
        );
        let (_, none) = rank(&[r("a", false, 3, 1, 0, 5), r("b", false, 3, 1, 0, 5)]);
        assert_eq!(none, Ranking::NonePromotable);
    }

    fn verdict(v: serde_json::Value) -> Vec<ToolCall> {
        vec![ToolCall {
            name: RECORD_VERDICT.into(),
            input: v,
        }]
    }

    fn snapshot() -> BTreeSet<EvidenceId> {
        [EvidenceId::from_body("1"), EvidenceId::from_body("2")].into()
    }

    #[test]
    fn only_a_valid_prefer_candidate_picks_a_winner() {
        let tied = [cand("a"), cand("b")];
        let ok = judge_outcome(
            &verdict(
                json!({"verdict": "prefer_candidate", "candidateId": "cand_b", "evidenceIds": ["ev_2"], "reason": "faster"}),
            ),
            &tied,
            &snapshot(),
        );
        assert_eq!(
            ok,
            JudgeOutcome::Winner {
                id: cand("b"),
                reason: "faster".into()
            }
        );
        for bad in [
            json!({"verdict": "prefer_candidate", "candidateId": "cand_b", "evidenceIds": ["ev_9"], "reason": "x"}),
            json!({"verdict": "prefer_candidate", "candidateId": "cand_z", "evidenceIds": ["ev_1"], "reason": "x"}),
            json!({"verdict": "prefer_candidate", "candidateId": "cand_b", "evidenceIds": [], "reason": "x"}),
            json!({"verdict": "reject_candidate", "candidateId": "cand_a", "evidenceIds": ["ev_1"], "reason": "x"}),
            json!({"verdict": "needs_more_evidence", "reason": "x"}),
            json!({"verdict": "escalate_to_human", "reason": "x"}),
            json!({"verdict": "prefer_candidate", "candidateId": "cand_b"}),
            json!({"verdict": "pick", "reason": "x"}),
        ] {
            assert!(
                matches!(
                    judge_outcome(&verdict(bad.clone()), &tied, &snapshot()),
                    JudgeOutcome::ToPerson { .. }
                ),
                "{bad}"
            );
        }
        let mut two = verdict(json!({"verdict": "escalate_to_human", "reason": "x"}));
        two.extend(two.clone());
        let JudgeOutcome::ToPerson { reason } = judge_outcome(&two, &tied, &snapshot()) else {
            panic!("two answers picked a winner")
        };
        assert_eq!(
            reason,
            "Candidates cand_a, cand_b rank equal and the Integration Judge gave 2 answers, not one. Pick one to ship or cancel the change."
        );
    }

    #[test]
    fn a_loser_is_told_why_in_the_specs_words() {
        let winner = r("x", true, 3, 0, 0, 5);
        assert_eq!(
            loser_reason(&winner, &r("y", true, 2, 0, 0, 5), None),
            "Lost to cand_x: met 3 of 3 criteria, this met 2 of 3."
        );
        assert_eq!(
            loser_reason(&winner, &r("y", false, 3, 1, 0, 5), None),
            "Lost to cand_x: this did not pass every required check."
        );
        assert_eq!(
            loser_reason(&winner, &r("y", true, 3, 0, 1, 5), None),
            "Lost to cand_x: 0 gaps and optional failures, this had 1."
        );
        assert_eq!(
            loser_reason(&winner, &r("y", true, 3, 0, 0, 4), None),
            "Lost to cand_x: 5 checks passed, this passed 4."
        );
        assert_eq!(
            loser_reason(&winner, &r("y", true, 3, 0, 0, 5), Some("covers the calendar")),
            "Lost to cand_x: the Integration Judge preferred it (covers the calendar)."
        );
    }

    #[test]
    fn applying_rejects_every_verified_loser_and_sends_the_winner_on() {
        let group = [
            (r("a", true, 2, 0, 0, 5), CandidateStatus::Verified),
            (r("b", true, 3, 0, 0, 5), CandidateStatus::Verified),
            (r("c", false, 3, 2, 0, 3), CandidateStatus::Rejected),
        ];
        let applied = apply_selection(&cand("a"), &group, None, 99);
        assert_eq!(applied.change, ChangeAfterSelection::Promote { winner: cand("b") });
        assert_eq!(
            applied.updates,
            [CandidateSelectionUpdate {
                id: cand("a"),
                reject_with: Some("Lost to cand_b: met 3 of 3 criteria, this met 2 of 3.".into())
            }]
        );
        assert_eq!(applied.selection.decided_by, DecidedBy::Ranking);
        assert_eq!(applied.selection.ranking[0].id, cand("b"));
        let json = serde_json::to_value(SelectionJson::Decided(applied.selection)).unwrap();
        assert_eq!(json["state"], "decided");
        assert_eq!(json["decidedBy"], "ranking");
    }

    #[test]
    fn a_tie_without_a_valid_preference_goes_to_a_person_and_no_winner_fails_the_change() {
        let group = [
            (r("a", true, 3, 0, 0, 5), CandidateStatus::Verified),
            (r("b", true, 3, 0, 0, 5), CandidateStatus::Verified),
        ];
        let person = JudgeOutcome::ToPerson { reason: "pick".into() };
        let applied = apply_selection(&cand("a"), &group, Some(&person), 1);
        assert_eq!(
            applied.change,
            ChangeAfterSelection::AwaitPerson { reason: "pick".into() }
        );
        assert!(applied.updates.is_empty(), "nobody loses before the person picks");
        let judged = JudgeOutcome::Winner {
            id: cand("a"),
            reason: "clearer".into(),
        };
        let applied = apply_selection(&cand("a"), &group, Some(&judged), 1);
        assert_eq!(applied.selection.decided_by, DecidedBy::Judge);
        assert_eq!(
            applied.updates[0].reject_with.as_deref(),
            Some("Lost to cand_a: the Integration Judge preferred it (clearer).")
        );
        let none = [(r("a", false, 0, 1, 0, 1), CandidateStatus::Rejected)];
        assert_eq!(
            apply_selection(&cand("a"), &none, None, 1).change,
            ChangeAfterSelection::Failed
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn any_rank() -> impl Strategy<Value = RankInput> {
            ("[a-e]", any::<bool>(), 0u32..4, 0u32..3, 0u32..2, 0u32..6)
                .prop_map(|(id, p, met, gaps, opt, pass)| r(&id, p, met, gaps, opt, pass))
        }

        proptest! {
            #[test]
            fn the_ranking_does_not_depend_on_the_input_order_and_a_winner_is_promotable(
                mut group in prop::collection::vec(any_rank(), 1..6)
            ) {
                group.sort_by(|a, b| a.id.cmp(&b.id));
                group.dedup_by(|a, b| a.id == b.id);
                let (order, outcome) = rank(&group);
                let mut reversed = group.clone();
                reversed.reverse();
                prop_assert_eq!(rank(&reversed), (order.clone(), outcome.clone()));
                match outcome {
                    Ranking::Winner { id } => {
                        prop_assert_eq!(&order[0], &id);
                        prop_assert!(group.iter().find(|g| g.id == id).unwrap().promotable);
                    }
                    Ranking::Tie { ids } => prop_assert!(ids.len() > 1),
                    Ranking::NonePromotable => prop_assert!(group.iter().all(|g| !g.promotable)),
                }
            }
        }
    }
}
