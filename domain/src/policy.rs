//! A project's verification policy: which checks each risk tier requires, which tiers a person
//! must approve, which promote on their own, what may not be changed, and the commands the checks
//! run.
//!
//! The policy is versioned: a project without a stored policy uses [`DEFAULT_POLICY`]
//! (`policy-1`, version 1), and every write makes the next version (`policy-2`, …), so a plan that
//! records the version it was made under can be compared with the active one at promotion. The
//! tier rules live here so the plan, the approval rules and auto-promotion read a policy the same
//! way: a tier the policy does not list is verified like the next stricter listed tier, and a
//! stricter tier never runs fewer checks than a laxer one.

use crate::change::RiskTier;
use crate::check::{CheckId, TARGETED};
use crate::validation::{ValidationError, check_text};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The id of the policy a project without a stored policy uses.
pub const DEFAULT_POLICY_ID: &str = "policy-1";

/// Check ids a policy may list for a tier. `targeted` runs the `unit` check; `browser` may be
/// listed but the plan adds it only from the UI-file rule.
pub const POLICY_CHECK_IDS: &[&str] = &[
    "build",
    TARGETED,
    "unit",
    "contract",
    "security",
    "performance",
    "client-assets",
    "preview-smoke",
    "browser",
];

const MAX_CHECKS_PER_TIER: usize = 16;
const MAX_PROTECTED: usize = 100;
const MAX_COMMAND_LEN: usize = 500;

/// Splits a policy command into its argv by the shell's word rules, without running a shell:
/// words are separated by blanks; single quotes keep everything up to the next single quote;
/// double quotes keep everything but `\"`, `\\`, `\$` and `` \` ``, which they unescape; a
/// backslash outside quotes keeps the next character. Nothing is expanded (no variables, globs
/// or operators: `sh -c '…'` is the way to ask for a shell). An unterminated quote or a trailing
/// backslash is refused with why.
pub fn command_words(command: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(ch) = chars.next() {
        match ch {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("has a single quote that is never closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("has a double quote that is never closed".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("has a double quote that is never closed".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err("ends with a backslash that escapes nothing".into()),
            },
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err("names no program".into());
    }
    Ok(words)
}

/// The commands the checks run in the Sandbox. Each is one command line split into its argv by
/// the shell's word rules ([`command_words`]): quotes and backslashes group and escape, nothing
/// is expanded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyCommands {
    pub install: String,
    pub build: String,
    pub typecheck: String,
    pub test: String,
    pub bench: String,
    pub contract: String,
    pub dev: String,
}

impl Default for PolicyCommands {
    fn default() -> Self {
        Self {
            install: "bun install".into(),
            build: "bun run build".into(),
            typecheck: "bun run typecheck".into(),
            test: "bun test".into(),
            bench: "bun run bench".into(),
            contract: "bun run contract".into(),
            dev: "bun run dev".into(),
        }
    }
}

impl PolicyCommands {
    /// The `security` check: the test command restricted to tests named `authorization …`.
    pub fn security(&self) -> String {
        format!("{} --test-name-pattern authorization", self.test)
    }
}

/// Which policy a plan was made under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyStamp {
    pub policy_id: String,
    pub policy_version: u32,
}

/// One version of a project's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProjectPolicy {
    /// `policy-<version>`: the name reason texts give ("Policy policy-1 requires …").
    pub id: String,
    pub version: u32,
    /// Tier → the check ids it requires (see [`POLICY_CHECK_IDS`]).
    pub required_checks_by_risk: BTreeMap<RiskTier, Vec<String>>,
    /// Tiers whose Changes a person must approve.
    pub gated_risk_tiers: Vec<RiskTier>,
    /// Tiers whose selected Candidate promotes without a person, when nothing else holds it.
    pub auto_promote_risk_tiers: Vec<RiskTier>,
    /// Resources no ChangeSet may declare a contract or data change on: a name (`billing`,
    /// `billing:api`) or a route (`/api/billing`, `GET /api/health`).
    pub protected_resources: Vec<String>,
    /// The project serves a live app: plans add `contract` and `preview-smoke`.
    pub live_app: bool,
    pub commands: PolicyCommands,
}

/// The policy every project has until it writes its own.
pub static DEFAULT_POLICY: LazyLock<ProjectPolicy> = LazyLock::new(|| {
    let ids = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    ProjectPolicy {
        id: DEFAULT_POLICY_ID.into(),
        version: 1,
        required_checks_by_risk: BTreeMap::from([
            (RiskTier::Low, ids(&["build", TARGETED])),
            (RiskTier::Medium, ids(&["build", TARGETED, "contract"])),
            (
                RiskTier::High,
                ids(&["build", TARGETED, "contract", "security", "browser"]),
            ),
        ]),
        gated_risk_tiers: vec![RiskTier::High, RiskTier::Critical],
        auto_promote_risk_tiers: vec![RiskTier::Low, RiskTier::Medium],
        protected_resources: vec![],
        live_app: false,
        commands: PolicyCommands::default(),
    }
});

/// What `PUT /v1/projects/{id}/policy` takes. The write replaces the whole policy: a field left
/// out takes [`DEFAULT_POLICY`]'s value (and a command left out, the default command).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyInput {
    #[serde(default)]
    pub required_checks_by_risk: Option<BTreeMap<RiskTier, Vec<String>>>,
    #[serde(default)]
    pub gated_risk_tiers: Option<Vec<RiskTier>>,
    #[serde(default)]
    pub auto_promote_risk_tiers: Option<Vec<RiskTier>>,
    #[serde(default)]
    pub protected_resources: Option<Vec<String>>,
    #[serde(default)]
    pub live_app: Option<bool>,
    #[serde(default)]
    pub commands: Option<PolicyCommandsInput>,
}

/// Commands of a policy write; each one left out is the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyCommandsInput {
    #[serde(default)]
    pub install: Option<String>,
    #[serde(default)]
    pub build: Option<String>,
    #[serde(default)]
    pub typecheck: Option<String>,
    #[serde(default)]
    pub test: Option<String>,
    #[serde(default)]
    pub bench: Option<String>,
    #[serde(default)]
    pub contract: Option<String>,
    #[serde(default)]
    pub dev: Option<String>,
}

/// The name of a policy version: `policy-<version>`.
pub fn policy_id_for_version(version: u32) -> String {
    format!("policy-{version}")
}

impl PolicyInput {
    /// Checks every field, naming the first one that breaks a rule.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(map) = &self.required_checks_by_risk {
            for (tier, checks) in map {
                let field = format!("requiredChecksByRisk.{}", tier.as_str());
                if checks.len() > MAX_CHECKS_PER_TIER {
                    return Err(ValidationError::new(
                        field,
                        format!("must list at most {MAX_CHECKS_PER_TIER} checks"),
                    ));
                }
                let mut seen = BTreeSet::new();
                for (i, c) in checks.iter().enumerate() {
                    if !POLICY_CHECK_IDS.contains(&c.as_str()) {
                        return Err(ValidationError::new(
                            format!("{field}[{i}]"),
                            format!("must be one of {}", POLICY_CHECK_IDS.join(", ")),
                        ));
                    }
                    if !seen.insert(c) {
                        return Err(ValidationError::new(format!("{field}[{i}]"), "must not repeat a check"));
                    }
                }
            }
        }
        check_tiers("gatedRiskTiers", self.gated_risk_tiers.as_deref())?;
        check_tiers("autoPromoteRiskTiers", self.auto_promote_risk_tiers.as_deref())?;
        let gated = self
            .gated_risk_tiers
            .as_ref()
            .unwrap_or(&DEFAULT_POLICY.gated_risk_tiers);
        let auto = self
            .auto_promote_risk_tiers
            .as_ref()
            .unwrap_or(&DEFAULT_POLICY.auto_promote_risk_tiers);
        if let Some(i) = auto.iter().position(|t| gated.contains(t)) {
            return Err(ValidationError::new(
                format!("autoPromoteRiskTiers[{i}]"),
                "must not list a tier that gatedRiskTiers gates (a gated tier always waits for a person)",
            ));
        }
        if let Some(list) = &self.protected_resources {
            if list.len() > MAX_PROTECTED {
                return Err(ValidationError::new(
                    "protectedResources",
                    format!("must list at most {MAX_PROTECTED} resources"),
                ));
            }
            for (i, r) in list.iter().enumerate() {
                check_protected_resource(&format!("protectedResources[{i}]"), r)?;
            }
        }
        if let Some(c) = &self.commands {
            for (name, value) in [
                ("install", &c.install),
                ("build", &c.build),
                ("typecheck", &c.typecheck),
                ("test", &c.test),
                ("bench", &c.bench),
                ("contract", &c.contract),
                ("dev", &c.dev),
            ] {
                if let Some(v) = value {
                    let field = format!("commands.{name}");
                    check_text(&field, v, MAX_COMMAND_LEN)?;
                    if v.chars().any(char::is_control) {
                        return Err(ValidationError::new(
                            field,
                            "must be one command line without control characters",
                        ));
                    }
                    if let Err(why) = command_words(v) {
                        return Err(ValidationError::new(
                            field,
                            format!("must split into words by the shell's quoting rules; it {why}"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

fn check_tiers(field: &str, tiers: Option<&[RiskTier]>) -> Result<(), ValidationError> {
    let mut seen = BTreeSet::new();
    for (i, t) in tiers.unwrap_or_default().iter().enumerate() {
        if !seen.insert(t) {
            return Err(ValidationError::new(format!("{field}[{i}]"), "must not repeat a tier"));
        }
    }
    Ok(())
}

/// A protected resource is a name of `[a-z0-9:._/-]` (`billing`, `billing:api`), a path
/// (`/api/billing`) or a method and a path (`GET /api/health`).
fn check_protected_resource(field: &str, r: &str) -> Result<(), ValidationError> {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 200
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, ':' | '-' | '_' | '.' | '/' | '*'))
    };
    let path_ok = |s: &str| s.starts_with('/') && !s.chars().any(|c| c.is_whitespace() || c.is_control());
    let ok = match r.split_once(' ') {
        Some((method, path)) => crate::contract::is_method(method) && path_ok(path) && path.len() <= 200,
        None => name_ok(r) || (path_ok(r) && r.len() <= 200),
    };
    if !ok {
        return Err(ValidationError::new(
            field,
            "must be a resource name of a-z, 0-9, ':', '.', '_', '-', '/' (billing:api), a path (/api/billing) \
             or a method and a path (GET /api/health)",
        ));
    }
    Ok(())
}

impl ProjectPolicy {
    /// The version a policy write makes on top of `self`, the active policy: the next version
    /// number and its id, with every field left out of `input` at its default.
    pub fn next_version(&self, input: &PolicyInput) -> Result<ProjectPolicy, ValidationError> {
        input.validate()?;
        let d = &*DEFAULT_POLICY;
        let version = self.version + 1;
        let c = input.commands.clone().unwrap_or_default();
        let defaults = PolicyCommands::default();
        Ok(ProjectPolicy {
            id: policy_id_for_version(version),
            version,
            required_checks_by_risk: input
                .required_checks_by_risk
                .clone()
                .unwrap_or_else(|| d.required_checks_by_risk.clone()),
            gated_risk_tiers: input
                .gated_risk_tiers
                .clone()
                .unwrap_or_else(|| d.gated_risk_tiers.clone()),
            auto_promote_risk_tiers: input
                .auto_promote_risk_tiers
                .clone()
                .unwrap_or_else(|| d.auto_promote_risk_tiers.clone()),
            protected_resources: input
                .protected_resources
                .clone()
                .unwrap_or_else(|| d.protected_resources.clone()),
            live_app: input.live_app.unwrap_or(d.live_app),
            commands: PolicyCommands {
                install: c.install.unwrap_or(defaults.install),
                build: c.build.unwrap_or(defaults.build),
                typecheck: c.typecheck.unwrap_or(defaults.typecheck),
                test: c.test.unwrap_or(defaults.test),
                bench: c.bench.unwrap_or(defaults.bench),
                contract: c.contract.unwrap_or(defaults.contract),
                dev: c.dev.unwrap_or(defaults.dev),
            },
        })
    }

    pub fn stamp(&self) -> PolicyStamp {
        PolicyStamp {
            policy_id: self.id.clone(),
            policy_version: self.version,
        }
    }

    /// The listed tiers whose checks a Change of `tier` runs: every listed tier at or below it,
    /// and, when `tier` itself is not listed, the nearest listed tier above it. A Change without a
    /// tier is verified as `critical`. So a gap in the policy never lowers verification, and a
    /// critical Change of a policy that stops at `high` runs the strictest listed tier.
    pub fn tiers_applied(&self, tier: Option<RiskTier>) -> Vec<RiskTier> {
        let tier = tier.unwrap_or(RiskTier::Critical);
        let listed = |t: &RiskTier| self.required_checks_by_risk.contains_key(t);
        let mut tiers: Vec<RiskTier> = RiskTier::ALL.into_iter().filter(|t| *t <= tier && listed(t)).collect();
        if !listed(&tier)
            && let Some(above) = RiskTier::ALL.into_iter().find(|t| *t > tier && listed(t))
        {
            tiers.push(above);
        }
        tiers
    }

    /// The checks the policy requires of a Change of `tier`, as plan checks: `targeted` is `unit`,
    /// and `browser` is left to the UI-file rule. Ids the policy cannot hold are skipped (a stored
    /// policy was validated on write).
    pub fn required_checks(&self, tier: Option<RiskTier>) -> BTreeSet<CheckId> {
        self.tiers_applied(tier)
            .iter()
            .flat_map(|t| self.required_checks_by_risk.get(t).into_iter().flatten())
            .filter_map(|id| match id.as_str() {
                TARGETED => Some(CheckId::Unit),
                "browser" => None,
                other => other.parse().ok(),
            })
            .collect()
    }

    /// Whether the policy makes a person approve a Change of `tier`.
    pub fn gates(&self, tier: RiskTier) -> bool {
        self.gated_risk_tiers.contains(&tier)
    }

    /// Whether the policy lets a Change of `tier` promote without a person.
    pub fn auto_promotes(&self, tier: RiskTier) -> bool {
        self.auto_promote_risk_tiers.contains(&tier) && !self.gates(tier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(c: &BTreeSet<CheckId>) -> Vec<String> {
        c.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn the_default_policy_is_policy_1_and_protects_nothing() {
        let p = &*DEFAULT_POLICY;
        assert_eq!((p.id.as_str(), p.version), ("policy-1", 1));
        assert!(p.protected_resources.is_empty());
        assert!(!p.live_app);
        assert_eq!(p.gated_risk_tiers, vec![RiskTier::High, RiskTier::Critical]);
        assert_eq!(p.auto_promote_risk_tiers, vec![RiskTier::Low, RiskTier::Medium]);
        assert_eq!(p.commands.test, "bun test");
        assert_eq!(p.commands.security(), "bun test --test-name-pattern authorization");
    }

    #[test]
    fn low_runs_build_and_targeted_medium_adds_contract_high_adds_security() {
        let p = &*DEFAULT_POLICY;
        assert_eq!(ids(&p.required_checks(Some(RiskTier::Low))), ["build", "unit"]);
        assert_eq!(
            ids(&p.required_checks(Some(RiskTier::Medium))),
            ["build", "unit", "contract"]
        );
        assert_eq!(
            ids(&p.required_checks(Some(RiskTier::High))),
            ["build", "unit", "contract", "security"]
        );
    }

    #[test]
    fn the_browser_the_default_policy_lists_for_high_is_left_to_the_ui_rule() {
        assert!(
            !DEFAULT_POLICY
                .required_checks(Some(RiskTier::High))
                .contains(&CheckId::Browser)
        );
    }

    #[test]
    fn a_critical_change_uses_the_strictest_listed_tier() {
        let p = &*DEFAULT_POLICY;
        assert_eq!(
            p.tiers_applied(Some(RiskTier::Critical)),
            [RiskTier::Low, RiskTier::Medium, RiskTier::High]
        );
        assert_eq!(
            p.required_checks(Some(RiskTier::Critical)),
            p.required_checks(Some(RiskTier::High))
        );
    }

    #[test]
    fn a_change_without_a_tier_is_verified_as_critical() {
        let p = &*DEFAULT_POLICY;
        assert_eq!(p.required_checks(None), p.required_checks(Some(RiskTier::Critical)));
    }

    #[test]
    fn a_tier_the_policy_leaves_out_is_verified_like_the_next_stricter_listed_tier() {
        let mut p = DEFAULT_POLICY.clone();
        p.required_checks_by_risk.remove(&RiskTier::Medium);
        assert_eq!(p.tiers_applied(Some(RiskTier::Medium)), [RiskTier::Low, RiskTier::High]);
        assert!(p.required_checks(Some(RiskTier::Medium)).contains(&CheckId::Security));
    }

    #[test]
    fn a_stricter_tier_listing_fewer_checks_still_runs_the_laxer_tiers_checks() {
        let mut p = DEFAULT_POLICY.clone();
        p.required_checks_by_risk.insert(RiskTier::High, vec!["build".into()]);
        assert!(p.required_checks(Some(RiskTier::High)).contains(&CheckId::Contract));
    }

    #[test]
    fn a_write_makes_the_next_version_with_defaults_for_what_it_leaves_out() {
        let input = PolicyInput {
            live_app: Some(true),
            commands: Some(PolicyCommandsInput {
                test: Some("bun test --bail".into()),
                ..PolicyCommandsInput::default()
            }),
            ..PolicyInput::default()
        };
        let p2 = DEFAULT_POLICY.next_version(&input).unwrap();
        assert_eq!((p2.id.as_str(), p2.version), ("policy-2", 2));
        assert!(p2.live_app);
        assert_eq!(p2.commands.test, "bun test --bail");
        assert_eq!(p2.commands.dev, "bun run dev");
        assert_eq!(p2.required_checks_by_risk, DEFAULT_POLICY.required_checks_by_risk);
        assert_eq!(p2.next_version(&PolicyInput::default()).unwrap().id, "policy-3");
    }

    #[test]
    fn a_policy_write_reads_the_specs_camel_case_shape() {
        let input: PolicyInput = serde_json::from_str(
            r#"{"requiredChecksByRisk":{"low":["build","targeted"],"critical":["build","targeted","security"]},
                "gatedRiskTiers":["critical"],"autoPromoteRiskTiers":["low","medium","high"],
                "protectedResources":["billing:api","GET /api/health"],"liveApp":true,
                "commands":{"dev":"bun run start"}}"#,
        )
        .unwrap();
        assert!(input.validate().is_ok());
        let p = DEFAULT_POLICY.next_version(&input).unwrap();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["requiredChecksByRisk"]["critical"][2], "security");
        assert_eq!(json["commands"]["dev"], "bun run start");
        assert!(serde_json::from_str::<PolicyInput>(r#"{"requiredChecks":{}}"#).is_err());
        assert!(serde_json::from_str::<PolicyInput>(r#"{"gatedRiskTiers":["huge"]}"#).is_err());
    }

    #[test]
    fn a_bad_policy_is_refused_naming_the_field() {
        let field = |input: PolicyInput| input.validate().unwrap_err().field;
        assert_eq!(
            field(PolicyInput {
                required_checks_by_risk: Some(BTreeMap::from([(RiskTier::High, vec!["build".into(), "fuzz".into()])])),
                ..PolicyInput::default()
            }),
            "requiredChecksByRisk.high[1]"
        );
        assert_eq!(
            field(PolicyInput {
                required_checks_by_risk: Some(BTreeMap::from([(RiskTier::Low, vec!["build".into(), "build".into()])])),
                ..PolicyInput::default()
            }),
            "requiredChecksByRisk.low[1]"
        );
        assert_eq!(
            field(PolicyInput {
                gated_risk_tiers: Some(vec![RiskTier::High, RiskTier::High]),
                ..PolicyInput::default()
            }),
            "gatedRiskTiers[1]"
        );
        assert_eq!(
            field(PolicyInput {
                auto_promote_risk_tiers: Some(vec![RiskTier::Low, RiskTier::High]),
                ..PolicyInput::default()
            }),
            "autoPromoteRiskTiers[1]"
        );
        assert_eq!(
            field(PolicyInput {
                protected_resources: Some(vec!["billing".into(), "Billing API".into()]),
                ..PolicyInput::default()
            }),
            "protectedResources[1]"
        );
        assert_eq!(
            field(PolicyInput {
                commands: Some(PolicyCommandsInput {
                    dev: Some("bun run dev\nrm -rf /".into()),
                    ..PolicyCommandsInput::default()
                }),
                ..PolicyInput::default()
            }),
            "commands.dev"
        );
        assert_eq!(
            field(PolicyInput {
                commands: Some(PolicyCommandsInput {
                    test: Some("  ".into()),
                    ..PolicyCommandsInput::default()
                }),
                ..PolicyInput::default()
            }),
            "commands.test"
        );
    }

    #[test]
    fn a_gated_tier_never_promotes_on_its_own() {
        let mut p = DEFAULT_POLICY.clone();
        assert!(p.auto_promotes(RiskTier::Medium) && !p.auto_promotes(RiskTier::High));
        p.auto_promote_risk_tiers.push(RiskTier::High);
        assert!(!p.auto_promotes(RiskTier::High));
    }

    fn any_policy() -> impl Strategy<Value = ProjectPolicy> {
        let tier = prop::sample::select(RiskTier::ALL.to_vec());
        let checks = prop::sample::subsequence(POLICY_CHECK_IDS.to_vec(), 0..POLICY_CHECK_IDS.len())
            .prop_map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
        prop::collection::btree_map(tier, checks, 0..4).prop_map(|map| ProjectPolicy {
            required_checks_by_risk: map,
            ..DEFAULT_POLICY.clone()
        })
    }

    proptest! {
        #[test]
        fn a_stricter_tier_never_runs_fewer_checks(policy in any_policy()) {
            for pair in RiskTier::ALL.windows(2) {
                let laxer = policy.required_checks(Some(pair[0]));
                let stricter = policy.required_checks(Some(pair[1]));
                prop_assert!(laxer.is_subset(&stricter), "{:?} {:?} vs {:?}", pair, laxer, stricter);
            }
            prop_assert_eq!(policy.required_checks(None), policy.required_checks(Some(RiskTier::Critical)));
        }

        #[test]
        fn a_tier_runs_at_least_what_its_own_list_names(policy in any_policy()) {
            for (tier, list) in &policy.required_checks_by_risk {
                let checks = policy.required_checks(Some(*tier));
                for id in list.iter().filter(|id| *id != "browser") {
                    let want = if id == TARGETED { CheckId::Unit } else { id.parse().unwrap() };
                    prop_assert!(checks.contains(&want));
                }
            }
        }
    }

    #[test]
    fn a_command_splits_by_the_shells_word_rules() {
        assert_eq!(command_words("bun run contract").unwrap(), ["bun", "run", "contract"]);
        assert_eq!(
            command_words("sh -c 'test -f x || echo []'").unwrap(),
            ["sh", "-c", "test -f x || echo []"]
        );
        assert_eq!(
            command_words(r#"bun test "a b" c\ d 'it''s' "q\"x\$y\z""#).unwrap(),
            ["bun", "test", "a b", "c d", "its", "q\"x$y\\z"]
        );
        assert_eq!(command_words("  a   ''  b ").unwrap(), ["a", "", "b"]);
        assert!(command_words("sh -c 'test -f x").unwrap_err().contains("single quote"));
        assert!(command_words("echo \"x").unwrap_err().contains("double quote"));
        assert!(command_words("echo x\\").unwrap_err().contains("backslash"));
        assert!(command_words("   ").is_err());
    }

    #[test]
    fn an_unparseable_command_is_refused_naming_its_field() {
        let input = PolicyInput {
            commands: Some(PolicyCommandsInput {
                contract: Some("sh -c 'echo []".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = input.validate().unwrap_err();
        assert_eq!(e.field, "commands.contract");
        assert!(e.rule.contains("single quote"), "{}", e.rule);
        let ok = PolicyInput {
            commands: Some(PolicyCommandsInput {
                contract: Some("sh -c 'test -f x || echo []'".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        ok.validate().unwrap();
    }
}
