//! Evidence and the required-checks gate (`gateRequiredChecks`).
//!
//! Every check attempt leaves one Evidence record: a status (`pass`, `fail`, `error`, `skipped`),
//! a coverage (`not_checked`, `checked_no_signal`, `checked_supported`) and, for a measured check,
//! a metric. The gate reads the latest record of each required check and names every gap by the
//! spec's flowchart. A gap is never a pass: no status, coverage or metric combination that the
//! flowchart does not call satisfied is satisfied here.

use crate::check::{CheckId, CheckKind, evidence_summary};
use crate::ids::{CandidateId, EvidenceId};
use crate::plan::{PlannedCheck, VerificationPlan};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EvidenceStatus {
    Pass,
    Fail,
    Error,
    Skipped,
}

/// How much a record says about the code: a `pass` that checked nothing is not support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Coverage {
    NotChecked,
    CheckedNoSignal,
    CheckedSupported,
}

/// A measured value, with the limit it had to stay below when it had one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    /// `p95Ms` for the performance check.
    pub name: String,
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
}

/// What a check found, before the store gives it an id and times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub status: EvidenceStatus,
    pub coverage: Coverage,
    /// Ends with `(runner: sandbox)`.
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
}

impl CheckResult {
    pub fn new(status: EvidenceStatus, coverage: Coverage, summary: &str) -> CheckResult {
        CheckResult {
            status,
            coverage,
            summary: evidence_summary(summary),
            metric: None,
        }
    }

    /// A check step that threw: `error`, `not_checked`.
    pub fn thrown(what: &str) -> CheckResult {
        CheckResult::new(EvidenceStatus::Error, Coverage::NotChecked, what)
    }

    /// A `protected-invariant-…` check: it runs nothing and records the gap.
    pub fn procedure(invariant: &str) -> CheckResult {
        CheckResult::new(
            EvidenceStatus::Skipped,
            Coverage::NotChecked,
            &format!("needs a person to confirm: {invariant}"),
        )
    }

    /// A command's exit status as a result: exit 0 passes with support, anything else fails.
    pub fn from_exit(exit_code: i64, what: &str) -> CheckResult {
        if exit_code == 0 {
            CheckResult::new(
                EvidenceStatus::Pass,
                Coverage::CheckedSupported,
                &format!("{what} passed"),
            )
        } else {
            CheckResult::new(
                EvidenceStatus::Fail,
                Coverage::CheckedSupported,
                &format!("{what} failed ({})", crate::check::exit_words(Some(exit_code))),
            )
        }
    }

    /// A command's end as a result, its summary in a person's words: passed on exit 0; else
    /// `bun test failed (exit 1): <the last lines of its output>`, a signal by its name.
    pub fn from_command(exit_code: Option<i64>, command: &str, output_tail: &str) -> CheckResult {
        if exit_code == Some(0) {
            return CheckResult::from_exit(0, command);
        }
        let why = output_tail.trim().replace('\n', " | ");
        let words = crate::check::exit_words(exit_code);
        let summary = if why.is_empty() {
            format!("{command} failed ({words})")
        } else {
            format!("{command} failed ({words}): {why}")
        };
        CheckResult::new(EvidenceStatus::Fail, Coverage::CheckedSupported, &summary)
    }
}

/// One Evidence record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub id: EvidenceId,
    pub candidate_id: CandidateId,
    pub check_id: CheckId,
    pub kind: CheckKind,
    /// The workflow attempt of the check step: one record per (Candidate, check, attempt).
    pub attempt: u32,
    pub status: EvidenceStatus,
    pub coverage: Coverage,
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    pub duration_ms: u64,
    pub started_at: i64,
    pub completed_at: i64,
}

/// Why a required check is not satisfied, in the flowchart's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GapReason {
    Missing,
    TimedOut,
    Skipped,
    Error,
    Failed,
    NotChecked,
    NoSignal,
    ExpectationNotMet,
}

impl GapReason {
    pub fn as_str(self) -> &'static str {
        match self {
            GapReason::Missing => "missing",
            GapReason::TimedOut => "timed_out",
            GapReason::Skipped => "skipped",
            GapReason::Error => "error",
            GapReason::Failed => "failed",
            GapReason::NotChecked => "not_checked",
            GapReason::NoSignal => "no_signal",
            GapReason::ExpectationNotMet => "expectation_not_met",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Gap {
    pub check_id: CheckId,
    pub reason: GapReason,
    /// The record the gap was read from (`None` for `missing`).
    pub evidence_id: Option<EvidenceId>,
}

/// The gate's answer for a Candidate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct GateResult {
    pub satisfied: Vec<CheckId>,
    /// In plan order.
    pub gaps: Vec<Gap>,
}

impl GateResult {
    /// Every required check satisfied.
    pub fn promotable(&self) -> bool {
        self.gaps.is_empty()
    }

    /// The Candidate's status reason when the gate rejects it: "Preview check failed: …" when
    /// the preview smoke check is the only gap, "Required checks not satisfied: …" otherwise.
    /// `None` when there is no gap.
    pub fn rejection_reason(&self) -> Option<String> {
        if self.gaps.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .gaps
            .iter()
            .map(|g| format!("{} ({})", g.check_id, g.reason.as_str()))
            .collect();
        let head = if self.gaps.iter().all(|g| g.check_id == CheckId::PreviewSmoke) {
            "Preview check failed"
        } else {
            "Required checks not satisfied"
        };
        Some(format!("{head}: {}", list.join(", ")))
    }
}

/// Where a record stands in a tie on completion time: a record that does not pass is later than
/// one that does, and a pass that is still a gap later than a pass that satisfies.
fn tie_rank(check: Option<&PlannedCheck>, e: &Evidence) -> u8 {
    if e.status != EvidenceStatus::Pass {
        2
    } else if check.is_some_and(|c| evaluate(c, Some(e)).is_err()) {
        1
    } else {
        0
    }
}

/// The latest record of each check: the greatest completion time; at equal times, the record
/// that does not pass (then the greatest id, so the answer never depends on the input order).
pub fn latest_per_check<'a>(plan: &VerificationPlan, evidence: &'a [Evidence]) -> BTreeMap<CheckId, &'a Evidence> {
    let mut latest: BTreeMap<CheckId, &Evidence> = BTreeMap::new();
    for e in evidence {
        let check = plan.check(&e.check_id);
        let key = |x: &Evidence| (x.completed_at, tie_rank(check, x), x.id.clone());
        match latest.get(&e.check_id) {
            Some(cur) if key(cur) >= key(e) => {}
            _ => {
                latest.insert(e.check_id.clone(), e);
            }
        }
    }
    latest
}

/// The flowchart for one check and its latest record.
pub fn evaluate(check: &PlannedCheck, record: Option<&Evidence>) -> Result<(), GapReason> {
    let Some(e) = record else {
        return Err(GapReason::Missing);
    };
    if e.duration_ms > check.timeout_ms {
        return Err(GapReason::TimedOut);
    }
    match e.status {
        EvidenceStatus::Skipped => return Err(GapReason::Skipped),
        EvidenceStatus::Error => return Err(GapReason::Error),
        EvidenceStatus::Fail => return Err(GapReason::Failed),
        EvidenceStatus::Pass => {}
    }
    match e.coverage {
        Coverage::NotChecked => return Err(GapReason::NotChecked),
        Coverage::CheckedNoSignal => return Err(GapReason::NoSignal),
        Coverage::CheckedSupported => {}
    }
    if metric_below_met(check, e.metric.as_ref()) {
        Ok(())
    } else {
        Err(GapReason::ExpectationNotMet)
    }
}

/// A metric check needs its metric, strictly below the plan's limit and below the limit the
/// record carries; a check without a limit is not a metric check.
fn metric_below_met(check: &PlannedCheck, metric: Option<&Metric>) -> bool {
    let plan_limit = check.limit.as_ref();
    let record_limit = metric.and_then(|m| m.limit);
    if plan_limit.is_none() && record_limit.is_none() {
        return true;
    }
    let Some(m) = metric else {
        return false;
    };
    plan_limit.is_none_or(|l| l.metric == m.name && m.value < l.below) && record_limit.is_none_or(|l| m.value < l)
}

/// `gateRequiredChecks`: every required check of the plan against its latest record.
pub fn gate_required_checks(plan: &VerificationPlan, evidence: &[Evidence]) -> GateResult {
    let latest = latest_per_check(plan, evidence);
    let mut result = GateResult::default();
    for check in plan.required() {
        let record = latest.get(&check.check_id).copied();
        match evaluate(check, record) {
            Ok(()) => result.satisfied.push(check.check_id.clone()),
            Err(reason) => result.gaps.push(Gap {
                check_id: check.check_id.clone(),
                reason,
                evidence_id: record.map(|e| e.id.clone()),
            }),
        }
    }
    result
}

/// The gaps of the required checks that come before `check` in the plan (the plan's order is the
/// order the checks run). The acceptance check records `skipped` without a model call when there
/// is one: the Candidate cannot ship anyway.
pub fn gaps_before(plan: &VerificationPlan, evidence: &[Evidence], check: &CheckId) -> Vec<Gap> {
    let earlier = VerificationPlan {
        checks: plan
            .checks
            .iter()
            .take_while(|c| &c.check_id != check)
            .cloned()
            .collect(),
        ..plan.clone()
    };
    gate_required_checks(&earlier, evidence).gaps
}

/// Whether the latest record of a planned check satisfies it (the preview starts only when
/// `build` is satisfied). A check the plan does not hold is not satisfied.
pub fn check_satisfied(plan: &VerificationPlan, evidence: &[Evidence], check: &CheckId) -> bool {
    let latest = latest_per_check(plan, evidence);
    plan.check(check)
        .is_some_and(|c| evaluate(c, latest.get(check).copied()).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::MetricLimit;
    use crate::policy::DEFAULT_POLICY;
    use proptest::prelude::*;

    #[test]
    fn a_failed_command_reads_exit_1_and_a_signal_by_its_name() {
        let r = CheckResult::from_command(Some(1), "bun test", "1 fail\n");
        assert_eq!(r.status, EvidenceStatus::Fail);
        assert_eq!(r.summary, "bun test failed (exit 1): 1 fail (runner: sandbox)");
        let r = CheckResult::from_command(Some(137), "bun test", "");
        assert_eq!(
            r.summary,
            "bun test failed (killed by SIGKILL (exit 137)) (runner: sandbox)"
        );
        assert!(
            !CheckResult::from_command(None, "bun test", "x")
                .summary
                .contains("None")
        );
        assert_eq!(
            CheckResult::from_exit(2, "bun run build").summary,
            "bun run build failed (exit 2) (runner: sandbox)"
        );
        assert_eq!(
            CheckResult::from_command(Some(0), "bun test", "ok").status,
            EvidenceStatus::Pass
        );
    }

    fn planned(id: CheckId, required: bool, limit: Option<f64>) -> PlannedCheck {
        PlannedCheck {
            kind: id.kind(),
            timeout_ms: id.timeout_ms(),
            check_id: id,
            required,
            limit: limit.map(|below| MetricLimit {
                metric: "p95Ms".into(),
                below,
            }),
            procedure: None,
            reasons: vec![],
        }
    }

    fn plan(checks: Vec<PlannedCheck>) -> VerificationPlan {
        VerificationPlan {
            policy: DEFAULT_POLICY.stamp(),
            risk_tier: None,
            checks,
            protected_invariants: vec![],
            human_gates: vec![],
        }
    }

    fn ev(id: &str, check: CheckId, status: EvidenceStatus, coverage: Coverage, completed_at: i64) -> Evidence {
        Evidence {
            id: EvidenceId::from_body(id),
            candidate_id: CandidateId::from_body("c1"),
            kind: check.kind(),
            check_id: check,
            attempt: 1,
            status,
            coverage,
            summary: "x (runner: sandbox)".into(),
            metric: None,
            duration_ms: 1_000,
            started_at: completed_at - 1,
            completed_at,
        }
    }

    fn pass(id: &str, check: CheckId, at: i64) -> Evidence {
        ev(id, check, EvidenceStatus::Pass, Coverage::CheckedSupported, at)
    }

    fn gate_one(check: PlannedCheck, records: &[Evidence]) -> Result<(), GapReason> {
        let id = check.check_id.clone();
        let g = gate_required_checks(&plan(vec![check]), records);
        match g.gaps.first() {
            None => {
                assert_eq!(g.satisfied, [id]);
                Ok(())
            }
            Some(gap) => Err(gap.reason),
        }
    }

    #[test]
    fn a_required_check_without_evidence_is_missing() {
        assert_eq!(
            gate_one(planned(CheckId::Unit, true, None), &[]),
            Err(GapReason::Missing)
        );
    }

    #[test]
    fn a_record_past_the_checks_timeout_is_timed_out_even_when_it_passed() {
        let mut e = pass("a", CheckId::Unit, 10);
        e.duration_ms = 180_001;
        assert_eq!(
            gate_one(planned(CheckId::Unit, true, None), &[e.clone()]),
            Err(GapReason::TimedOut)
        );
        e.duration_ms = 180_000;
        assert_eq!(gate_one(planned(CheckId::Unit, true, None), &[e]), Ok(()));
    }

    #[test]
    fn each_status_that_is_not_pass_is_its_own_gap() {
        for (status, gap) in [
            (EvidenceStatus::Skipped, GapReason::Skipped),
            (EvidenceStatus::Error, GapReason::Error),
            (EvidenceStatus::Fail, GapReason::Failed),
        ] {
            let e = ev("a", CheckId::Unit, status, Coverage::CheckedSupported, 10);
            assert_eq!(gate_one(planned(CheckId::Unit, true, None), &[e]), Err(gap));
        }
    }

    #[test]
    fn a_pass_without_support_is_not_checked_or_no_signal() {
        for (coverage, gap) in [
            (Coverage::NotChecked, GapReason::NotChecked),
            (Coverage::CheckedNoSignal, GapReason::NoSignal),
        ] {
            let e = ev("a", CheckId::Security, EvidenceStatus::Pass, coverage, 10);
            assert_eq!(gate_one(planned(CheckId::Security, true, None), &[e]), Err(gap));
        }
    }

    #[test]
    fn a_metric_at_or_over_its_limit_is_expectation_not_met() {
        let perf = || planned(CheckId::Performance, true, Some(300.0));
        let with = |value: f64| {
            let mut e = pass("a", CheckId::Performance, 10);
            e.metric = Some(Metric {
                name: "p95Ms".into(),
                value,
                limit: Some(300.0),
            });
            e
        };
        assert_eq!(gate_one(perf(), &[with(299.9)]), Ok(()));
        assert_eq!(gate_one(perf(), &[with(300.0)]), Err(GapReason::ExpectationNotMet));
        assert_eq!(gate_one(perf(), &[with(351.7)]), Err(GapReason::ExpectationNotMet));
        assert_eq!(gate_one(perf(), &[with(f64::NAN)]), Err(GapReason::ExpectationNotMet));
        assert_eq!(
            gate_one(perf(), &[pass("a", CheckId::Performance, 10)]),
            Err(GapReason::ExpectationNotMet),
            "a performance record without its metric does not meet the expectation"
        );
    }

    #[test]
    fn a_check_without_a_limit_is_satisfied_by_a_supported_pass() {
        assert_eq!(
            gate_one(planned(CheckId::Build, true, None), &[pass("a", CheckId::Build, 1)]),
            Ok(())
        );
    }

    #[test]
    fn the_latest_record_of_a_check_decides() {
        let failed = ev("a", CheckId::Unit, EvidenceStatus::Fail, Coverage::CheckedSupported, 10);
        let retried = pass("b", CheckId::Unit, 20);
        assert_eq!(
            gate_one(planned(CheckId::Unit, true, None), &[retried.clone(), failed.clone()]),
            Ok(())
        );
        let passed_first = pass("a", CheckId::Unit, 10);
        let failed_later = ev("b", CheckId::Unit, EvidenceStatus::Fail, Coverage::CheckedSupported, 20);
        assert_eq!(
            gate_one(planned(CheckId::Unit, true, None), &[passed_first, failed_later]),
            Err(GapReason::Failed)
        );
    }

    #[test]
    fn at_equal_completion_time_the_record_that_does_not_pass_is_the_latest() {
        let passed = pass("z", CheckId::Unit, 10);
        let errored = ev("a", CheckId::Unit, EvidenceStatus::Error, Coverage::NotChecked, 10);
        for records in [[passed.clone(), errored.clone()], [errored.clone(), passed.clone()]] {
            assert_eq!(
                gate_one(planned(CheckId::Unit, true, None), &records),
                Err(GapReason::Error)
            );
        }
    }

    #[test]
    fn optional_checks_are_not_gated() {
        let g = gate_required_checks(
            &plan(vec![
                planned(CheckId::Build, true, None),
                planned(CheckId::Acceptance, false, None),
            ]),
            &[pass("a", CheckId::Build, 1)],
        );
        assert!(g.promotable());
        assert_eq!(g.satisfied, [CheckId::Build]);
    }

    #[test]
    fn the_rejection_reason_lists_every_gap() {
        let g = gate_required_checks(
            &plan(vec![
                planned(CheckId::Build, true, None),
                planned(CheckId::Unit, true, None),
                planned(CheckId::Browser, true, None),
            ]),
            &[
                pass("a", CheckId::Build, 1),
                ev("b", CheckId::Browser, EvidenceStatus::Error, Coverage::NotChecked, 2),
            ],
        );
        assert_eq!(
            g.rejection_reason().unwrap(),
            "Required checks not satisfied: unit (missing), browser (error)"
        );
        assert_eq!(g.gaps[1].evidence_id, Some(EvidenceId::from_body("b")));
        let preview = gate_required_checks(&plan(vec![planned(CheckId::PreviewSmoke, true, None)]), &[]);
        assert_eq!(
            preview.rejection_reason().unwrap(),
            "Preview check failed: preview-smoke (missing)"
        );
        assert_eq!(GateResult::default().rejection_reason(), None);
    }

    #[test]
    fn a_thrown_step_and_a_procedure_are_gaps() {
        let thrown = CheckResult::thrown("sandbox exec failed");
        assert_eq!(
            (thrown.status, thrown.coverage),
            (EvidenceStatus::Error, Coverage::NotChecked)
        );
        assert_eq!(thrown.summary, "sandbox exec failed (runner: sandbox)");
        let proc = CheckResult::procedure("Email delivery must remain unchanged");
        assert_eq!(
            (proc.status, proc.coverage),
            (EvidenceStatus::Skipped, Coverage::NotChecked)
        );
        assert_eq!(CheckResult::from_exit(1, "bun test").status, EvidenceStatus::Fail);
        assert_eq!(
            CheckResult::from_exit(0, "bun test").summary,
            "bun test passed (runner: sandbox)"
        );
    }

    #[test]
    fn only_the_checks_before_one_count_as_earlier() {
        let p = plan(vec![
            planned(CheckId::Build, true, None),
            planned(CheckId::Unit, true, None),
            planned(CheckId::Acceptance, false, None),
            planned(CheckId::PreviewSmoke, true, None),
        ]);
        let build = pass("a", CheckId::Build, 1);
        let unit_failed = ev("b", CheckId::Unit, EvidenceStatus::Fail, Coverage::CheckedSupported, 2);
        assert!(gaps_before(&p, &[build.clone(), pass("c", CheckId::Unit, 2)], &CheckId::Acceptance).is_empty());
        let gaps = gaps_before(&p, &[build.clone(), unit_failed], &CheckId::Acceptance);
        assert_eq!(gaps[0].check_id, CheckId::Unit);
        assert!(check_satisfied(&p, std::slice::from_ref(&build), &CheckId::Build));
        assert!(!check_satisfied(&p, &[], &CheckId::Build));
        assert!(!check_satisfied(&p, &[build], &CheckId::Security));
    }

    #[test]
    fn evidence_serializes_in_the_specs_words() {
        let mut e = ev(
            "a",
            CheckId::Performance,
            EvidenceStatus::Pass,
            Coverage::CheckedNoSignal,
            5,
        );
        e.metric = Some(Metric {
            name: "p95Ms".into(),
            value: 12.5,
            limit: Some(200.0),
        });
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["checkId"], "performance");
        assert_eq!(json["coverage"], "checked_no_signal");
        assert_eq!(json["metric"]["limit"], 200.0);
        assert_eq!(json["durationMs"], 1000);
        let gap = Gap {
            check_id: CheckId::Unit,
            reason: GapReason::ExpectationNotMet,
            evidence_id: None,
        };
        assert_eq!(serde_json::to_value(&gap).unwrap()["reason"], "expectation_not_met");
    }

    fn any_status() -> impl Strategy<Value = EvidenceStatus> {
        prop::sample::select(vec![
            EvidenceStatus::Pass,
            EvidenceStatus::Fail,
            EvidenceStatus::Error,
            EvidenceStatus::Skipped,
        ])
    }

    fn any_coverage() -> impl Strategy<Value = Coverage> {
        prop::sample::select(vec![
            Coverage::NotChecked,
            Coverage::CheckedNoSignal,
            Coverage::CheckedSupported,
        ])
    }

    fn any_check() -> impl Strategy<Value = CheckId> {
        prop::sample::select(vec![
            CheckId::Build,
            CheckId::Unit,
            CheckId::Performance,
            CheckId::Browser,
        ])
    }

    fn any_record() -> impl Strategy<Value = Evidence> {
        (
            "[a-z0-9]{1,6}",
            any_check(),
            any_status(),
            any_coverage(),
            0i64..5,
            0u64..200_000,
            prop::option::of(0.0f64..400.0),
        )
            .prop_map(|(id, check, status, coverage, at, duration, metric)| {
                let mut e = ev(&id, check, status, coverage, at);
                e.duration_ms = duration;
                e.metric = metric.map(|value| Metric {
                    name: "p95Ms".into(),
                    value,
                    limit: None,
                });
                e
            })
    }

    fn full_plan() -> VerificationPlan {
        plan(vec![
            planned(CheckId::Build, true, None),
            planned(CheckId::Unit, true, None),
            planned(CheckId::Performance, true, Some(200.0)),
            planned(CheckId::Browser, true, None),
        ])
    }

    /// Records with distinct ids, as the store mints them.
    fn any_records(max: usize) -> impl Strategy<Value = Vec<Evidence>> {
        prop::collection::vec(any_record(), 0..max).prop_map(|mut v| {
            for (i, e) in v.iter_mut().enumerate() {
                e.id = EvidenceId::from_body(&format!("r{i}"));
            }
            v
        })
    }

    proptest! {
        #[test]
        fn every_required_check_is_either_satisfied_or_a_gap(records in any_records(12)) {
            let p = full_plan();
            let g = gate_required_checks(&p, &records);
            prop_assert_eq!(g.satisfied.len() + g.gaps.len(), p.required().count());
            for id in &g.satisfied {
                let latest = latest_per_check(&p, &records)[id];
                prop_assert_eq!(latest.status, EvidenceStatus::Pass);
                prop_assert_eq!(latest.coverage, Coverage::CheckedSupported);
                prop_assert!(latest.duration_ms <= id.timeout_ms());
            }
        }

        #[test]
        fn the_gate_does_not_depend_on_the_order_of_the_records(
            records in any_records(12),
            seed in any::<u64>(),
        ) {
            let p = full_plan();
            let mut shuffled = records.clone();
            let len = shuffled.len();
            if len > 1 {
                for i in 0..len {
                    let j = usize::try_from((seed ^ (i as u64).wrapping_mul(0x9e37_79b9)) % len as u64).unwrap();
                    shuffled.swap(i, j);
                }
            }
            prop_assert_eq!(gate_required_checks(&p, &records), gate_required_checks(&p, &shuffled));
        }

        #[test]
        fn a_later_failure_is_never_hidden_by_an_earlier_pass(records in any_records(8)) {
            let p = full_plan();
            let mut with_failure = records.clone();
            with_failure.push(ev("zz", CheckId::Unit, EvidenceStatus::Fail, Coverage::CheckedSupported, 9));
            let g = gate_required_checks(&p, &with_failure);
            prop_assert!(g.gaps.iter().any(|gap| gap.check_id == CheckId::Unit && gap.reason == GapReason::Failed));
        }
    }
}
