//! Repair before a person: when a Candidate falls short in a way an agent can fix, the Change gets
//! one repair Task instead of a person's attention — once.
//!
//! The spec's three triggers: the selected Candidate passed every required check but acceptance
//! found criteria `not_met`; a person rejected a gated Candidate with a reason; a Candidate failed
//! a required check or the preview check (a failed or missing browser check included). A Change
//! has at most one repair Task (key `repair`); a later shortfall goes to a person.

use crate::acceptance::AcceptanceOutcome;
use crate::change::{TaskInput, TaskKind};
use crate::evidence::{Evidence, EvidenceStatus, gate_required_checks};
use crate::ids::CandidateId;
use crate::plan::VerificationPlan;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The key of the one repair Task a Change may get.
pub const REPAIR_TASK_KEY: &str = "repair";

/// Why a repair is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "trigger", rename_all = "snake_case")]
pub enum RepairTrigger {
    /// The selected Candidate passed every required check; acceptance found these not met.
    AcceptanceNotMet {
        candidate_id: CandidateId,
        not_met: Vec<String>,
    },
    /// A person rejected a gated Candidate, saying why.
    PersonRejected { candidate_id: CandidateId, reason: String },
    /// The Candidate failed a required check or the preview check; its status reason, and each
    /// failing check with what its Evidence says ([`check_failures`]).
    CheckFailed {
        candidate_id: CandidateId,
        status_reason: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failures: Vec<String>,
    },
}

/// The acceptance trigger: every required check passed and acceptance judged some criterion
/// `not_met`. `unclear` and a gap do not trigger a repair.
pub fn acceptance_trigger(
    candidate_id: &CandidateId,
    required_checks_passed: bool,
    acceptance: &AcceptanceOutcome,
) -> Option<RepairTrigger> {
    let judged = acceptance.result.status == EvidenceStatus::Fail;
    let not_met: Vec<String> = acceptance
        .not_met
        .iter()
        .chain(&acceptance.kept_not_met)
        .cloned()
        .collect();
    (required_checks_passed && judged && !not_met.is_empty()).then(|| RepairTrigger::AcceptanceNotMet {
        candidate_id: candidate_id.clone(),
        not_met,
    })
}

/// The failed-check trigger, from a rejected Candidate's status reason: "Required checks not
/// satisfied…" or "Preview check failed…". `failures`: what each failing check's Evidence says.
pub fn check_failure_trigger(
    candidate_id: &CandidateId,
    status_reason: &str,
    failures: Vec<String>,
) -> Option<RepairTrigger> {
    (status_reason.starts_with("Required checks not satisfied") || status_reason.starts_with("Preview check failed"))
        .then(|| RepairTrigger::CheckFailed {
            candidate_id: candidate_id.clone(),
            status_reason: status_reason.to_owned(),
            failures,
        })
}

/// Each gap of the gate, with what its latest Evidence says: "browser (failed): the crawl
/// failed: …", or "browser (missing): no Evidence was recorded".
pub fn check_failures(plan: &VerificationPlan, evidence: &[Evidence]) -> Vec<String> {
    gate_required_checks(plan, evidence)
        .gaps
        .iter()
        .map(|g| {
            let summary = g
                .evidence_id
                .as_ref()
                .and_then(|id| evidence.iter().find(|e| &e.id == id))
                .map_or("no Evidence was recorded", |e| e.summary.as_str());
            format!("{} ({}): {summary}", g.check_id, g.reason.as_str())
        })
        .collect()
}

/// The person trigger: a rejection with a reason (without one there is nothing to repair toward).
pub fn rejection_trigger(candidate_id: &CandidateId, reason: Option<&str>) -> Option<RepairTrigger> {
    let reason = reason.map(str::trim).filter(|r| !r.is_empty())?;
    Some(RepairTrigger::PersonRejected {
        candidate_id: candidate_id.clone(),
        reason: reason.to_owned(),
    })
}

/// The repair Task to add, with its objective.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairPlan {
    pub task: TaskInput,
    pub objective: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RepairDecision {
    /// Add the repair Task; the Change returns to `running`; Decision Receipt `ACCEPTANCE_REPAIR`.
    Repair(RepairPlan),
    /// The Change already had its repair: a person decides, with this reason.
    ToPerson { reason: String },
}

/// The objective of a repair Task.
pub fn repair_objective(trigger: &RepairTrigger) -> String {
    match trigger {
        RepairTrigger::AcceptanceNotMet { candidate_id, not_met } => format!(
            "Candidate {candidate_id} passed every required check but does not meet these acceptance criteria:\n{}\n\
             Change the code and its tests so that each is met, keeping everything else as it is.",
            not_met.iter().map(|c| format!("- {c}")).collect::<Vec<_>>().join("\n")
        ),
        RepairTrigger::PersonRejected { candidate_id, reason } => {
            format!("A person rejected candidate {candidate_id}: {reason}\nChange the work so it answers that reason.")
        }
        RepairTrigger::CheckFailed {
            candidate_id,
            status_reason,
            failures,
        } => format!(
            "Candidate {candidate_id} failed: {status_reason}\n{}Reproduce the failure, then make the code and tests \
             of the request pass with the current app.",
            failures.iter().map(|f| format!("- {f}\n")).collect::<String>()
        ),
    }
}

/// Decides what a trigger leads to.
/// - `change_has_repair`: the Change already has a Task keyed `repair`;
/// - `held_task_keys`: the keys of the Tasks whose ChangeSets the Candidate holds (the repair
///   depends on all of them, so its workspace holds their work);
/// - `semantic_resources`: the resources of those Tasks, which the repair works on.
pub fn repair_decision(
    trigger: &RepairTrigger,
    change_has_repair: bool,
    held_task_keys: &[String],
    semantic_resources: &[String],
) -> RepairDecision {
    let objective = repair_objective(trigger);
    if change_has_repair {
        return RepairDecision::ToPerson {
            reason: format!("The change already had its repair. {objective}"),
        };
    }
    let mut deps: Vec<String> = Vec::new();
    for k in held_task_keys {
        if k != REPAIR_TASK_KEY && !deps.contains(k) {
            deps.push(k.clone());
        }
    }
    let mut resources: Vec<String> = Vec::new();
    for r in semantic_resources {
        if !resources.contains(r) {
            resources.push(r.clone());
        }
    }
    let title = match trigger {
        RepairTrigger::AcceptanceNotMet { .. } => "Repair: meet the acceptance criteria",
        RepairTrigger::PersonRejected { .. } => "Repair: answer the reviewer's rejection",
        RepairTrigger::CheckFailed { .. } => "Repair: make the failing checks pass",
    };
    RepairDecision::Repair(RepairPlan {
        task: TaskInput {
            key: REPAIR_TASK_KEY.into(),
            kind: TaskKind::Implement,
            title: title.into(),
            semantic_resources: resources,
            dependencies: deps,
        },
        objective,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::CriterionResult;
    use crate::acceptance::{AcceptanceRun, JudgedCriterion, acceptance_outcome};
    use std::collections::BTreeSet;

    fn cand() -> CandidateId {
        CandidateId::from_body("x")
    }

    fn outcome(results: &[(&str, CriterionResult)]) -> AcceptanceOutcome {
        acceptance_outcome(&AcceptanceRun::Judged(
            results
                .iter()
                .enumerate()
                .map(|(i, (text, result))| JudgedCriterion {
                    id: format!("c{}", i + 1),
                    text: text.to_string(),
                    kept: false,
                    result: *result,
                    citation: None,
                    reason: None,
                    citation_rejected: false,
                })
                .collect(),
        ))
    }

    #[test]
    fn criteria_not_met_on_a_candidate_that_passed_every_required_check_trigger_a_repair() {
        let o = outcome(&[
            ("tags", CriterionResult::Met),
            ("calendar view", CriterionResult::NotMet),
        ]);
        assert_eq!(
            acceptance_trigger(&cand(), true, &o),
            Some(RepairTrigger::AcceptanceNotMet {
                candidate_id: cand(),
                not_met: vec!["calendar view".into()]
            })
        );
        assert_eq!(acceptance_trigger(&cand(), false, &o), None);
    }

    #[test]
    fn unclear_criteria_and_gaps_do_not_trigger_a_repair() {
        let unclear = outcome(&[("calendar view", CriterionResult::Unclear)]);
        assert_eq!(acceptance_trigger(&cand(), true, &unclear), None);
        let gap = acceptance_outcome(&AcceptanceRun::ModelError("529".into()));
        assert_eq!(acceptance_trigger(&cand(), true, &gap), None);
    }

    #[test]
    fn a_failed_required_or_preview_check_triggers_a_repair() {
        assert!(check_failure_trigger(&cand(), "Required checks not satisfied: browser (missing)", vec![]).is_some());
        assert!(check_failure_trigger(&cand(), "Preview check failed: preview-smoke (failed)", vec![]).is_some());
        assert!(
            check_failure_trigger(&cand(), "Lost to cand_y: met 3 of 3 criteria, this met 2 of 3.", vec![]).is_none()
        );
    }

    #[test]
    fn a_rejection_triggers_a_repair_only_with_a_reason() {
        assert!(rejection_trigger(&cand(), Some("The button is unreadable")).is_some());
        assert!(rejection_trigger(&cand(), Some("  ")).is_none());
        assert!(rejection_trigger(&cand(), None).is_none());
    }

    #[test]
    fn the_repair_task_depends_on_every_held_task_and_lists_the_unmet_criteria() {
        let trigger = RepairTrigger::AcceptanceNotMet {
            candidate_id: cand(),
            not_met: vec!["calendar view".into(), "tag colours".into()],
        };
        let keys = vec!["t1".to_string(), "t2".to_string(), "t1".to_string()];
        let res = vec!["todos:api".to_string(), "todos:ui".to_string()];
        let RepairDecision::Repair(plan) = repair_decision(&trigger, false, &keys, &res) else {
            panic!("no repair")
        };
        assert_eq!(plan.task.key, "repair");
        assert_eq!(plan.task.dependencies, ["t1", "t2"]);
        assert!(plan.objective.contains("- calendar view\n- tag colours"));
        let existing: BTreeSet<String> = ["t1".to_string(), "t2".to_string()].into();
        assert!(
            plan.task.validate(&existing).is_ok(),
            "the repair Task is a valid Task of the Change"
        );
    }

    #[test]
    fn a_failed_check_repair_lists_each_failing_check_with_what_its_evidence_says() {
        use crate::check::CheckId;
        use crate::evidence::Coverage;
        use crate::ids::EvidenceId;
        use crate::plan::PlannedCheck;
        use crate::policy::DEFAULT_POLICY;
        let planned = |id: CheckId| PlannedCheck {
            kind: id.kind(),
            timeout_ms: id.timeout_ms(),
            check_id: id,
            required: true,
            limit: None,
            procedure: None,
            reasons: vec![],
        };
        let plan = VerificationPlan {
            policy: DEFAULT_POLICY.stamp(),
            risk_tier: None,
            checks: vec![
                planned(CheckId::Build),
                planned(CheckId::Unit),
                planned(CheckId::Browser),
            ],
            protected_invariants: vec![],
            human_gates: vec![],
        };
        let ev = |id: &str, check: CheckId, status: EvidenceStatus, summary: &str| Evidence {
            id: EvidenceId::from_body(id),
            candidate_id: cand(),
            kind: check.kind(),
            check_id: check,
            attempt: 1,
            status,
            coverage: Coverage::CheckedSupported,
            summary: summary.into(),
            metric: None,
            duration_ms: 1_000,
            started_at: 1,
            completed_at: 2,
        };
        let evidence = [
            ev("b", CheckId::Build, EvidenceStatus::Pass, "typecheck passed"),
            ev(
                "w",
                CheckId::Browser,
                EvidenceStatus::Fail,
                "the crawl failed: /about.html: an uncaught page script error: TypeError",
            ),
        ];
        let failures = check_failures(&plan, &evidence);
        assert_eq!(
            failures,
            vec![
                "unit (missing): no Evidence was recorded".to_string(),
                "browser (failed): the crawl failed: /about.html: an uncaught page script error: TypeError".to_string(),
            ]
        );
        let trigger = check_failure_trigger(
            &cand(),
            "Required checks not satisfied: unit (missing), browser (failed)",
            failures,
        )
        .unwrap();
        let RepairDecision::Repair(plan) = repair_decision(&trigger, false, &["ui".into()], &[]) else {
            panic!("no repair")
        };
        assert_eq!(plan.task.dependencies, ["ui"]);
        assert_eq!(
            plan.objective,
            "Candidate cand_x failed: Required checks not satisfied: unit (missing), browser (failed)\n\
             - unit (missing): no Evidence was recorded\n\
             - browser (failed): the crawl failed: /about.html: an uncaught page script error: TypeError\n\
             Reproduce the failure, then make the code and tests of the request pass with the current app."
        );
    }

    #[test]
    fn a_second_shortfall_goes_to_a_person() {
        let trigger = RepairTrigger::CheckFailed {
            candidate_id: cand(),
            status_reason: "Required checks not satisfied: unit (failed)".into(),
            failures: vec![],
        };
        let RepairDecision::ToPerson { reason } = repair_decision(&trigger, true, &[], &[]) else {
            panic!("a second repair")
        };
        assert!(reason.starts_with("The change already had its repair. Candidate cand_x failed: Required checks"));
    }
}
