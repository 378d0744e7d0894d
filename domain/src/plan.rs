//! The verification plan (`buildVerificationPlan`): which checks a Candidate must pass, and which
//! it may run for information only.
//!
//! The plan is made once per Candidate, from the Change (goal, acceptance criteria, invariants,
//! risk tier), the Tasks and the paths their ChangeSets change, the composed `package.json`, and
//! the policy read once for the run. Everything after it — the check steps, the gate, approval and
//! promotion — reads the plan, never the inputs again, and the plan records the policy version it
//! was made under. How invariants and authorization are recognised in prose is written down in
//! `docs/decisions/0009-invariants-and-authorization.md`.

use crate::acceptance::AcceptanceCriterion;
use crate::approval::{HumanGate, plan_gate};
use crate::change::{Change, RiskTier, Task};
use crate::check::{CheckId, CheckKind};
use crate::policy::{PolicyStamp, ProjectPolicy};
use crate::prose::{has_phrase, sentences, slug, words};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The p95 limit when a sentence says p95 but names no number before `ms`.
pub const DEFAULT_P95_LIMIT_MS: f64 = 200.0;
/// The metric the `performance` check reports.
pub const P95_METRIC: &str = "p95Ms";

/// A limit a check's metric must stay below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricLimit {
    pub metric: String,
    /// The metric must be strictly below this.
    pub below: f64,
}

/// One check of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlannedCheck {
    pub check_id: CheckId,
    pub kind: CheckKind,
    /// A required check gates the Candidate; an optional one (only `acceptance`) ranks it.
    pub required: bool,
    pub timeout_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<MetricLimit>,
    /// For a `protected-invariant-…` check: the invariant a person must confirm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procedure: Option<String>,
    /// Why the plan holds the check ("policy tier medium", "UI files changed: public/app.css", …).
    pub reasons: Vec<String>,
}

/// Where a protected invariant was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InvariantSource {
    /// One of the Change's invariants.
    Invariant,
    /// A goal sentence that says "unchanged", "must remain" or "must not change".
    Goal,
}

/// What kind of promise a protected invariant makes, and so which check can hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InvariantClass {
    /// Kept endpoint behaviour: `contract` and `unit`.
    Endpoint,
    /// Other app behaviour: `unit`.
    AppBehaviour,
    /// Latency, with a p95 constraint on the Change: `performance`.
    Latency,
    /// Nothing belay runs can prove it (email delivery, uptime, or latency without a p95): a
    /// required procedure check that stays a visible gap.
    Untestable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProtectedInvariant {
    /// 1-based, invariants first, then goal sentences: the `<n>` of its procedure check.
    pub n: u32,
    pub text: String,
    pub source: InvariantSource,
    pub class: InvariantClass,
    /// The checks that hold it.
    pub checks: Vec<CheckId>,
}

/// A Candidate's verification plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct VerificationPlan {
    /// The policy the plan was made under; promotion needs it to be the active one.
    #[serde(flatten)]
    pub policy: PolicyStamp,
    pub risk_tier: Option<RiskTier>,
    /// In check-table order, each check once.
    pub checks: Vec<PlannedCheck>,
    pub protected_invariants: Vec<ProtectedInvariant>,
    /// Why a person must approve this Candidate (empty: the plan itself does not require one).
    pub human_gates: Vec<HumanGate>,
}

impl VerificationPlan {
    pub fn check(&self, id: &CheckId) -> Option<&PlannedCheck> {
        self.checks.iter().find(|c| &c.check_id == id)
    }

    pub fn required(&self) -> impl Iterator<Item = &PlannedCheck> {
        self.checks.iter().filter(|c| c.required)
    }

    pub fn has_acceptance(&self) -> bool {
        self.check(&CheckId::Acceptance).is_some()
    }

    /// Adds a gate (the acceptance hold, a policy hold); a gate already there is not added twice.
    pub fn add_gate(&mut self, gate: HumanGate) {
        if !self.human_gates.contains(&gate) {
            self.human_gates.push(gate);
        }
    }
}

/// A Task of the Candidate with the paths its ChangeSets change.
#[derive(Debug, Clone, Copy)]
pub struct TaskScope<'a> {
    pub task: &'a Task,
    pub changed_paths: &'a [String],
}

/// Everything the plan is made from.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub change: &'a Change,
    /// The policy read once for this run.
    pub policy: &'a ProjectPolicy,
    /// The Tasks whose ChangeSets the Candidate holds.
    pub tasks: &'a [TaskScope<'a>],
    /// Every path the Candidate changes against its base (without what the composition build
    /// generated).
    pub changed_paths: &'a [String],
    /// The composed `package.json` has a `build` script.
    pub has_build_script: bool,
    /// What [`crate::acceptance::acceptance_criteria_to_judge`] left; empty: no acceptance check.
    pub criteria_to_judge: &'a [AcceptanceCriterion],
}

/// Builds the plan by every rule of "Which checks run".
pub fn build_verification_plan(input: &PlanInput<'_>) -> VerificationPlan {
    let change = input.change;
    let mut checks: BTreeMap<CheckId, PlannedCheck> = BTreeMap::new();
    let mut add = |id: CheckId, required: bool, reason: String| {
        let entry = checks.entry(id.clone()).or_insert_with(|| PlannedCheck {
            kind: id.kind(),
            timeout_ms: id.timeout_ms(),
            check_id: id,
            required,
            limit: None,
            procedure: None,
            reasons: Vec::new(),
        });
        entry.required |= required;
        if !entry.reasons.contains(&reason) {
            entry.reasons.push(reason);
        }
    };

    add(CheckId::Build, true, "every plan".into());
    add(CheckId::Unit, true, "every plan".into());
    let tier_name = change.risk_tier.map_or("none (verified as critical)", RiskTier::as_str);
    for id in input.policy.required_checks(change.risk_tier) {
        add(id, true, format!("policy {} tier {tier_name}", input.policy.id));
    }

    let p95 = p95_limit_ms(change);
    if let Some(limit) = p95 {
        add(
            CheckId::Performance,
            true,
            format!("a sentence says p95 (limit {limit} ms)"),
        );
    }

    let ui: Vec<&str> = input
        .changed_paths
        .iter()
        .map(String::as_str)
        .filter(|p| is_ui_file(p))
        .collect();
    if !ui.is_empty() {
        add(CheckId::Browser, true, format!("UI files changed: {}", ui.join(", ")));
    }

    let invariants = classify_invariants(change, p95.is_some());
    for inv in &invariants {
        for id in &inv.checks {
            add(id.clone(), true, format!("protected invariant {}: {}", inv.n, inv.text));
        }
    }

    let auth_tasks: Vec<&str> = input
        .tasks
        .iter()
        .filter(|t| touches_authorization(t.task, t.changed_paths))
        .map(|t| t.task.key.as_str())
        .collect();
    if !auth_tasks.is_empty() {
        add(
            CheckId::Security,
            true,
            format!("task {} touches authorization", auth_tasks.join(", ")),
        );
    }

    if input.policy.live_app {
        add(CheckId::Contract, true, "live app".into());
        add(CheckId::PreviewSmoke, true, "live app".into());
    }
    if input.has_build_script {
        add(CheckId::ClientAssets, true, "package.json has a build script".into());
    }
    if !input.criteria_to_judge.is_empty() {
        add(
            CheckId::Acceptance,
            false,
            format!("acceptance criteria to judge: {}", input.criteria_to_judge.len()),
        );
    }

    if let Some(perf) = checks.get_mut(&CheckId::Performance) {
        perf.limit = Some(MetricLimit {
            metric: P95_METRIC.into(),
            below: p95.unwrap_or(DEFAULT_P95_LIMIT_MS),
        });
    }
    for inv in invariants.iter().filter(|i| i.class == InvariantClass::Untestable) {
        for id in &inv.checks {
            if let Some(c) = checks.get_mut(id) {
                c.procedure = Some(inv.text.clone());
            }
        }
    }

    VerificationPlan {
        policy: input.policy.stamp(),
        risk_tier: change.risk_tier,
        checks: checks.into_values().collect(),
        protected_invariants: invariants,
        human_gates: plan_gate(input.policy, change.risk_tier, !auth_tasks.is_empty())
            .into_iter()
            .collect(),
    }
}

/// UI files: under `public/`, or ending in `.tsx`, `.jsx`, `.html` or `.css`.
pub fn is_ui_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.starts_with("public/") || [".tsx", ".jsx", ".html", ".css"].iter().any(|e| lower.ends_with(e))
}

/// The p95 limit of a Change: the number before `ms` in a sentence that says p95, in the goal,
/// the acceptance criteria or the invariants; the smallest when several do; the default 200 when
/// such a sentence names no number. `None` when no sentence says p95.
pub fn p95_limit_ms(change: &Change) -> Option<f64> {
    let texts = std::iter::once(change.goal.as_str())
        .chain(change.acceptance_criteria.iter().map(String::as_str))
        .chain(change.invariants.iter().map(String::as_str));
    let mut said = false;
    let mut limit: Option<f64> = None;
    for s in texts.flat_map(sentences) {
        if !words(s).iter().any(|w| w == "p95") {
            continue;
        }
        said = true;
        if let Some(n) = number_before_ms(s) {
            limit = Some(limit.map_or(n, |l| l.min(n)));
        }
    }
    said.then(|| limit.unwrap_or(DEFAULT_P95_LIMIT_MS))
}

/// The first number directly before `ms` (`300ms`, `300 ms`, `1,500 ms`, `12.5ms`).
fn number_before_ms(sentence: &str) -> Option<f64> {
    let lower = sentence.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut from = 0;
    while let Some(at) = lower[from..].find("ms").map(|i| i + from) {
        from = at + 2;
        let unit_ends = b.get(at + 2).is_none_or(|c| !c.is_ascii_alphanumeric());
        let mut end = at;
        while end > 0 && b[end - 1] == b' ' {
            end -= 1;
        }
        let mut start = end;
        while start > 0 && (b[start - 1].is_ascii_digit() || matches!(b[start - 1], b'.' | b',')) {
            start -= 1;
        }
        let raw = lower[start..end].trim_matches(|c| c == '.' || c == ',');
        if !unit_ends || raw.is_empty() || (start > 0 && b[start - 1].is_ascii_alphabetic()) {
            continue;
        }
        let digits: String = raw
            .split(',')
            .enumerate()
            .map(|(i, part)| if i > 0 && part.len() != 3 { "\u{0}" } else { part })
            .collect();
        if let Ok(n) = digits.parse::<f64>()
            && n.is_finite()
            && n > 0.0
        {
            return Some(n);
        }
    }
    None
}

/// The protected invariants of a Change, in order: its invariants, then the goal sentences that
/// say "unchanged", "must remain" or "must not change".
pub fn protected_invariants(change: &Change) -> Vec<(InvariantSource, String)> {
    let own = change
        .invariants
        .iter()
        .map(|i| i.trim())
        .filter(|i| !i.is_empty())
        .map(|i| (InvariantSource::Invariant, i.to_owned()));
    let goal = sentences(&change.goal)
        .into_iter()
        .filter(|s| says_kept(s))
        .map(|s| (InvariantSource::Goal, s.to_owned()));
    own.chain(goal).collect()
}

/// A sentence that keeps behaviour: it says "unchanged", "must remain" or "must not change".
pub fn says_kept(sentence: &str) -> bool {
    words(sentence).iter().any(|w| w == "unchanged")
        || has_phrase(sentence, "must remain")
        || has_phrase(sentence, "must not change")
}

const UNTESTABLE_WORDS: &[&str] = &[
    "email",
    "emails",
    "mail",
    "mails",
    "newsletter",
    "newsletters",
    "sms",
    "uptime",
    "availability",
    "sla",
    "slas",
    "backup",
    "backups",
    "monitoring",
    "alerting",
    "dns",
    "deliverability",
];
const UNTESTABLE_PHRASES: &[&str] = &["third party", "push notification", "push notifications", "on call"];
const LATENCY_WORDS: &[&str] = &[
    "latency",
    "latencies",
    "p50",
    "p90",
    "p95",
    "p99",
    "ms",
    "millisecond",
    "milliseconds",
    "fast",
    "faster",
    "slow",
    "slower",
    "speed",
    "throughput",
    "performance",
];
const ENDPOINT_WORDS: &[&str] = &[
    "endpoint",
    "endpoints",
    "route",
    "routes",
    "api",
    "apis",
    "http",
    "json",
    "response",
    "responses",
    "request",
    "requests",
    "url",
    "urls",
];

/// Classifies one protected invariant; the first rule that applies wins:
/// 1. it names something outside the app (email, SMS, uptime, availability, backups, monitoring,
///    DNS, a third party): untestable;
/// 2. it speaks of latency (latency, p95, `ms`, fast, slow, speed, throughput, performance):
///    `Latency` when the Change has a p95 constraint, untestable otherwise (no limit to hold it to);
/// 3. it names a route or a path (`GET /api/todos`, `/api/health`) or speaks of endpoints, routes,
///    the API, HTTP, JSON, requests, responses or URLs: kept endpoint behaviour;
/// 4. anything else is app behaviour.
pub fn classify_invariant(text: &str, change_has_p95: bool) -> InvariantClass {
    let w = words(text);
    let has = |list: &[&str]| w.iter().any(|x| list.contains(&x.as_str()));
    let latency_number = w.iter().any(|x| {
        x.strip_suffix("ms")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    if has(UNTESTABLE_WORDS) || UNTESTABLE_PHRASES.iter().any(|p| has_phrase(text, p)) {
        InvariantClass::Untestable
    } else if has(LATENCY_WORDS) || latency_number || has_phrase(text, "response time") {
        if change_has_p95 {
            InvariantClass::Latency
        } else {
            InvariantClass::Untestable
        }
    } else if has(ENDPOINT_WORDS) || names_a_path(text) {
        InvariantClass::Endpoint
    } else {
        InvariantClass::AppBehaviour
    }
}

fn names_a_path(text: &str) -> bool {
    text.split_whitespace().any(|t| {
        let t = t.trim_start_matches(['`', '\'', '"', '(']);
        t.len() > 1 && t.starts_with('/') && t[1..].starts_with(|c: char| c.is_alphanumeric() || c == ':')
    })
}

/// The protected invariants of a Change, numbered and classified, each with its checks.
pub fn classify_invariants(change: &Change, change_has_p95: bool) -> Vec<ProtectedInvariant> {
    protected_invariants(change)
        .into_iter()
        .enumerate()
        .map(|(i, (source, text))| {
            let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let class = classify_invariant(&text, change_has_p95);
            let checks = match class {
                InvariantClass::Endpoint => vec![CheckId::Contract, CheckId::Unit],
                InvariantClass::AppBehaviour => vec![CheckId::Unit],
                InvariantClass::Latency => vec![CheckId::Performance],
                InvariantClass::Untestable => vec![CheckId::ProtectedInvariant {
                    n,
                    slug: slug(&text, 6, 48),
                }],
            };
            ProtectedInvariant {
                n,
                text,
                source,
                class,
                checks,
            }
        })
        .collect()
}

const AUTH_WORDS: &[&str] = &[
    "auth",
    "authz",
    "authorization",
    "authorisation",
    "authorize",
    "authorise",
    "authorized",
    "authorised",
    "authorizing",
    "authorising",
    "permission",
    "permissions",
    "rbac",
    "abac",
    "acl",
    "acls",
];

/// Whether a Task touches authorization: its title, one of its semantic resources, or one of the
/// paths its ChangeSets change names an authorization word (auth, authz, authorization,
/// authorize(d), permission(s), RBAC, ABAC, ACL) as a whole word, or the title says
/// "access control". Words of authentication alone (login, session, password) do not count.
pub fn touches_authorization(task: &Task, changed_paths: &[String]) -> bool {
    let auth = |text: &str| words(text).iter().any(|w| AUTH_WORDS.contains(&w.as_str()));
    auth(&task.title)
        || has_phrase(&task.title, "access control")
        || task.semantic_resources.iter().any(|r| auth(r))
        || changed_paths.iter().any(|p| auth(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::acceptance_criteria_to_judge;
    use crate::change::{ChangeStatus, TaskKind};
    use crate::policy::DEFAULT_POLICY;
    use proptest::prelude::*;

    fn change(goal: &str, criteria: &[&str], invariants: &[&str], tier: Option<RiskTier>) -> Change {
        Change {
            id: "chg_1".into(),
            project_id: "proj_1".into(),
            goal: goal.into(),
            acceptance_criteria: criteria.iter().map(|s| s.to_string()).collect(),
            invariants: invariants.iter().map(|s| s.to_string()).collect(),
            risk_tier: tier,
            status: ChangeStatus::Verifying,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn task(key: &str, title: &str, resources: &[&str]) -> Task {
        Task {
            id: format!("task_{key}").into(),
            change_id: "chg_1".into(),
            key: key.into(),
            kind: TaskKind::Implement,
            title: title.into(),
            semantic_resources: resources.iter().map(|s| s.to_string()).collect(),
            dependencies: vec![],
            created_at: 0,
        }
    }

    struct Case {
        change: Change,
        tasks: Vec<(Task, Vec<String>)>,
        paths: Vec<String>,
        build_script: bool,
        policy: ProjectPolicy,
    }

    impl Case {
        fn new(change: Change) -> Case {
            Case {
                change,
                tasks: vec![],
                paths: vec!["src/app.ts".into()],
                build_script: false,
                policy: DEFAULT_POLICY.clone(),
            }
        }

        fn plan(&self) -> VerificationPlan {
            let scopes: Vec<TaskScope<'_>> = self
                .tasks
                .iter()
                .map(|(t, p)| TaskScope {
                    task: t,
                    changed_paths: p,
                })
                .collect();
            let criteria = acceptance_criteria_to_judge(&self.change.acceptance_criteria, &[]);
            build_verification_plan(&PlanInput {
                change: &self.change,
                policy: &self.policy,
                tasks: &scopes,
                changed_paths: &self.paths,
                has_build_script: self.build_script,
                criteria_to_judge: &criteria,
            })
        }
    }

    fn ids(plan: &VerificationPlan) -> Vec<String> {
        plan.checks.iter().map(|c| c.check_id.to_string()).collect()
    }

    #[test]
    fn a_low_risk_change_runs_build_and_unit_only() {
        let plan = Case::new(change("Add a todo list.", &[], &[], Some(RiskTier::Low))).plan();
        assert_eq!(ids(&plan), ["build", "unit"]);
        assert!(plan.checks.iter().all(|c| c.required));
        assert_eq!(plan.policy.policy_id, "policy-1");
        assert_eq!(plan.policy.policy_version, 1);
        assert!(plan.human_gates.is_empty());
        assert_eq!(plan.check(&CheckId::Unit).unwrap().timeout_ms, 180_000);
    }

    #[test]
    fn medium_adds_contract_and_high_adds_security_and_a_gate() {
        let medium = Case::new(change("Add a todo list.", &[], &[], Some(RiskTier::Medium))).plan();
        assert_eq!(ids(&medium), ["build", "unit", "contract"]);
        let high = Case::new(change("Add a todo list.", &[], &[], Some(RiskTier::High))).plan();
        assert_eq!(ids(&high), ["build", "unit", "contract", "security"]);
        assert_eq!(
            high.human_gates[0].reason,
            "Policy policy-1 requires a person to approve high-risk changes."
        );
        assert!(!ids(&high).contains(&"browser".to_string()));
    }

    #[test]
    fn a_critical_change_runs_the_strictest_listed_tier() {
        let plan = Case::new(change("Add a todo list.", &[], &[], Some(RiskTier::Critical))).plan();
        assert_eq!(ids(&plan), ["build", "unit", "contract", "security"]);
    }

    #[test]
    fn ui_files_require_the_browser_check_at_every_tier() {
        for path in [
            "public/index.html",
            "src/client/App.tsx",
            "src/view.jsx",
            "styles/site.css",
            "PUBLIC/x.png",
        ] {
            let mut case = Case::new(change("Restyle the list.", &[], &[], Some(RiskTier::Low)));
            case.paths = vec![path.into()];
            let plan = case.plan();
            let browser = plan.check(&CheckId::Browser);
            if path.starts_with("PUBLIC") {
                assert!(browser.is_some(), "{path}: paths compare case-insensitively");
                continue;
            }
            let browser = browser.unwrap_or_else(|| panic!("{path}"));
            assert!(browser.required);
            assert_eq!(browser.timeout_ms, 180_000);
        }
        let plan = Case::new(change("Add an endpoint.", &[], &[], Some(RiskTier::High))).plan();
        assert!(plan.check(&CheckId::Browser).is_none());
    }

    #[test]
    fn p95_below_300ms_gives_a_performance_check_limited_to_300() {
        let plan = Case::new(change(
            "Speed up the list.",
            &["GET /api/todos answers with p95 below 300ms"],
            &[],
            Some(RiskTier::Low),
        ))
        .plan();
        let perf = plan.check(&CheckId::Performance).unwrap();
        assert!(perf.required);
        assert_eq!(
            perf.limit,
            Some(MetricLimit {
                metric: "p95Ms".into(),
                below: 300.0
            })
        );
    }

    #[test]
    fn the_p95_limit_is_the_number_before_ms_or_200() {
        let limit = |goal: &str| p95_limit_ms(&change(goal, &[], &[], None));
        assert_eq!(limit("Keep p95 under 250 ms."), Some(250.0));
        assert_eq!(limit("The p95 must not regress."), Some(200.0));
        assert_eq!(limit("Answer in 100ms. Keep the p95 at 1,500ms or less."), Some(1500.0));
        assert_eq!(limit("p95 below 12.5ms"), Some(12.5));
        assert_eq!(limit("Answer within 300ms."), None);
        assert_eq!(limit("p95 of 300 msgs"), Some(200.0));
        let both = change("p95 below 400ms.", &["p95 below 250ms"], &[], None);
        assert_eq!(p95_limit_ms(&both), Some(250.0));
    }

    #[test]
    fn a_kept_endpoint_adds_contract_and_unit() {
        let plan = Case::new(change(
            "Add due dates. GET /api/todos must remain backwards compatible.",
            &[],
            &[],
            Some(RiskTier::Low),
        ))
        .plan();
        assert_eq!(ids(&plan), ["build", "unit", "contract"]);
        let inv = &plan.protected_invariants[0];
        assert_eq!(
            (inv.n, inv.source, inv.class),
            (1, InvariantSource::Goal, InvariantClass::Endpoint)
        );
        assert_eq!(
            plan.check(&CheckId::Contract).unwrap().reasons,
            ["protected invariant 1: GET /api/todos must remain backwards compatible."]
        );
    }

    #[test]
    fn other_app_behaviour_adds_unit() {
        let plan = Case::new(change(
            "Add due dates.",
            &[],
            &["Completed todos stay at the bottom of the list"],
            Some(RiskTier::Low),
        ))
        .plan();
        assert_eq!(ids(&plan), ["build", "unit"]);
        assert_eq!(plan.protected_invariants[0].class, InvariantClass::AppBehaviour);
        assert_eq!(
            plan.check(&CheckId::Unit).unwrap().reasons,
            [
                "every plan",
                "policy policy-1 tier low",
                "protected invariant 1: Completed todos stay at the bottom of the list"
            ]
        );
    }

    #[test]
    fn a_latency_invariant_maps_to_performance_when_the_change_has_a_p95_constraint() {
        let with = Case::new(change(
            "Add search. Search latency must remain low.",
            &["p95 below 150ms"],
            &[],
            Some(RiskTier::Low),
        ))
        .plan();
        assert_eq!(with.protected_invariants[0].class, InvariantClass::Latency);
        assert_eq!(
            with.check(&CheckId::Performance).unwrap().limit.as_ref().unwrap().below,
            150.0
        );
        let without = Case::new(change(
            "Add search. Search latency must remain low.",
            &[],
            &[],
            Some(RiskTier::Low),
        ))
        .plan();
        assert_eq!(without.protected_invariants[0].class, InvariantClass::Untestable);
        assert!(without.check(&CheckId::Performance).is_none());
    }

    #[test]
    fn an_invariant_no_test_can_prove_is_a_required_procedure_check() {
        let plan = Case::new(change(
            "Add reminders.",
            &[],
            &[
                "Completed todos stay sorted",
                "Email delivery must remain unchanged",
                "Uptime stays at 99.9%",
            ],
            Some(RiskTier::Low),
        ))
        .plan();
        assert_eq!(
            ids(&plan),
            [
                "build",
                "unit",
                "protected-invariant-2-email-delivery-must-remain-unchanged",
                "protected-invariant-3-uptime-stays-at-99-9"
            ]
        );
        let email = &plan.checks[2];
        assert!(email.required);
        assert_eq!(email.kind, CheckKind::ProtectedInvariant);
        assert_eq!(email.procedure.as_deref(), Some("Email delivery must remain unchanged"));
        assert_eq!(email.timeout_ms, 180_000);
    }

    #[test]
    fn only_goal_sentences_that_keep_behaviour_are_invariants() {
        let c = change(
            "Add tags. The export format must not change. Make it fast. Sorting is unchanged.",
            &[],
            &["Login keeps working"],
            None,
        );
        let found: Vec<(InvariantSource, String)> = protected_invariants(&c);
        assert_eq!(
            found,
            [
                (InvariantSource::Invariant, "Login keeps working".to_string()),
                (InvariantSource::Goal, "The export format must not change.".to_string()),
                (InvariantSource::Goal, "Sorting is unchanged.".to_string()),
            ]
        );
    }

    #[test]
    fn a_task_touching_authorization_adds_security_and_a_human_gate() {
        let mut case = Case::new(change("Let owners share lists.", &[], &[], Some(RiskTier::Low)));
        case.tasks = vec![
            (
                task("t1", "Add the sharing API", &["lists:api"]),
                vec!["src/api/share.ts".into()],
            ),
            (
                task("t2", "Check list permissions", &["lists:api"]),
                vec!["src/api/lists.ts".into()],
            ),
        ];
        let plan = case.plan();
        let sec = plan.check(&CheckId::Security).unwrap();
        assert!(sec.required);
        assert_eq!(sec.reasons, ["task t2 touches authorization"]);
        assert_eq!(
            plan.human_gates[0].reason,
            "Policy policy-1 requires a person to approve changes to authorization."
        );
    }

    #[test]
    fn authorization_is_recognised_in_titles_resources_and_paths_as_whole_words() {
        let t = |title: &str, res: &[&str]| task("t1", title, res);
        assert!(touches_authorization(&t("Role-based access control", &[]), &[]));
        assert!(touches_authorization(&t("Tidy", &["users:authz"]), &[]));
        assert!(touches_authorization(
            &t("Tidy", &[]),
            &["src/middleware/auth.ts".into()]
        ));
        assert!(touches_authorization(&t("Tidy", &[]), &["src/acl-rules.ts".into()]));
        assert!(!touches_authorization(
            &t("Add the author field", &["posts:api"]),
            &["src/authors.ts".into()]
        ));
        assert!(!touches_authorization(
            &t("Improve the login form", &["session:ui"]),
            &[]
        ));
    }

    #[test]
    fn a_live_app_adds_contract_and_preview_smoke_and_a_build_script_adds_client_assets() {
        let mut case = Case::new(change("Add a footer.", &[], &[], Some(RiskTier::Low)));
        case.policy.live_app = true;
        case.build_script = true;
        assert_eq!(
            ids(&case.plan()),
            ["build", "client-assets", "unit", "contract", "preview-smoke"]
        );
        assert_eq!(case.plan().check(&CheckId::ClientAssets).unwrap().timeout_ms, 30_000);
    }

    #[test]
    fn acceptance_criteria_add_the_optional_acceptance_check() {
        let plan = Case::new(change(
            "Add a calendar.",
            &[
                "A calendar view shows each todo on its due date",
                "typecheck and tests pass",
            ],
            &[],
            Some(RiskTier::Low),
        ))
        .plan();
        let acc = plan.check(&CheckId::Acceptance).unwrap();
        assert!(!acc.required);
        assert_eq!(acc.reasons, ["acceptance criteria to judge: 1"]);
        let only_gate = Case::new(change("Tidy.", &["typecheck and tests pass"], &[], Some(RiskTier::Low))).plan();
        assert!(!only_gate.has_acceptance());
    }

    #[test]
    fn a_change_without_a_tier_is_planned_as_critical() {
        let plan = Case::new(change("Add a todo list.", &[], &[], None)).plan();
        assert_eq!(ids(&plan), ["build", "unit", "contract", "security"]);
        assert!(
            plan.human_gates.is_empty(),
            "the no-tier hold is the policy hold, at promotion"
        );
    }

    #[test]
    fn a_plan_serializes_in_camel_case_with_its_policy() {
        let plan = Case::new(change("Keep p95 under 100 ms.", &[], &[], Some(RiskTier::Low))).plan();
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["policyId"], "policy-1");
        assert_eq!(json["policyVersion"], 1);
        assert_eq!(json["checks"][2]["checkId"], "performance");
        assert_eq!(json["checks"][2]["limit"]["below"], 100.0);
        assert_eq!(json["checks"][2]["timeoutMs"], 120_000);
        let back: VerificationPlan = serde_json::from_value(json).unwrap();
        assert_eq!(back, plan);
    }

    fn any_tier() -> impl Strategy<Value = Option<RiskTier>> {
        prop::option::of(prop::sample::select(RiskTier::ALL.to_vec()))
    }

    fn any_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("p95".to_string()),
                Just("below 300ms".to_string()),
                Just("must remain".to_string()),
                Just("unchanged".to_string()),
                Just("email".to_string()),
                Just("GET /api/todos".to_string()),
                Just(".".to_string()),
                "[a-z]{1,8}",
            ],
            0..10,
        )
        .prop_map(|w| w.join(" "))
    }

    proptest! {
        #[test]
        fn every_plan_requires_build_and_unit_and_never_requires_acceptance(
            tier in any_tier(), goal in any_text(), inv in prop::collection::vec(any_text(), 0..3),
            crit in prop::collection::vec(any_text(), 0..3), paths in prop::collection::vec("[a-z/]{1,12}(\\.tsx|\\.ts|\\.css)?", 0..4),
            live in any::<bool>(), build in any::<bool>(),
        ) {
            let crit: Vec<&str> = crit.iter().map(String::as_str).collect();
            let inv: Vec<&str> = inv.iter().map(String::as_str).collect();
            let mut case = Case::new(change(&goal, &crit, &inv, tier));
            case.paths = paths;
            case.policy.live_app = live;
            case.build_script = build;
            let plan = case.plan();
            prop_assert!(plan.check(&CheckId::Build).is_some_and(|c| c.required));
            prop_assert!(plan.check(&CheckId::Unit).is_some_and(|c| c.required));
            for c in &plan.checks {
                prop_assert_eq!(c.required, c.check_id != CheckId::Acceptance);
                prop_assert_eq!(c.timeout_ms, c.check_id.timeout_ms());
                prop_assert_eq!(c.limit.is_some(), c.check_id == CheckId::Performance);
            }
            let mut sorted = plan.checks.clone();
            sorted.sort_by(|a, b| a.check_id.cmp(&b.check_id));
            sorted.dedup_by(|a, b| a.check_id == b.check_id);
            prop_assert_eq!(sorted, plan.checks.clone());
            prop_assert_eq!(plan.check(&CheckId::Browser).is_some(), case.paths.iter().any(|p| is_ui_file(p)));
        }

        #[test]
        fn a_stricter_tier_never_plans_fewer_checks(goal in any_text()) {
            let mut last: Vec<CheckId> = vec![];
            for tier in RiskTier::ALL {
                let plan = Case::new(change(&goal, &[], &[], Some(tier))).plan();
                let now: Vec<CheckId> = plan.checks.iter().map(|c| c.check_id.clone()).collect();
                prop_assert!(last.iter().all(|c| now.contains(c)));
                last = now;
            }
        }

        #[test]
        fn classifying_any_text_never_panics(text in any::<String>(), p95 in any::<bool>()) {
            let _ = classify_invariant(&text, p95);
            let _ = number_before_ms(&text);
        }
    }
}
