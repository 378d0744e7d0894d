//! Ladders as their owners author them: rungs with stable ids, the climbers and their steering.
//!
//! A rung's id is minted (by the caller) when the rung is added and is never its position:
//! verdicts reference it, so a reorder or a version bump cannot reattribute a climber's history
//! to another case. A reorder is a permutation of the current ids and nothing else, so it cannot
//! edit a rung in passing. Rungs on test types nobody could clear (performance, game jam) are
//! refused at author time, with the reason, rather than stalling a climb weeks later.

use crate::budget::BudgetInput;
use crate::buffer::BufferTarget;
use crate::catalogue::{CaseFacts, ENGINE_NONE, TestType};
use crate::coverage::{
    self, GroupMembers, check_combinations, check_one_off_count, check_pointers, check_runs_per_cell,
};
use crate::gate::{Gate, GateRules, Threshold};
use crate::ids::{GroupId, LadderId, RungId};
use crate::job::{CasePin, Combination};
use crate::top_up::{Skipped, TopUpAnswer};
use crate::validation::{ValidationError, check_text};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Past a few dozen steps a ladder is a coverage plan wearing a costume.
pub const MAX_RUNGS: usize = 50;
/// A ladder's `runsPerCell` when it names none.
pub const DEFAULT_RUNS_PER_CELL: i64 = 5;
/// Steering priorities range over `-MAX_PRIORITY..=MAX_PRIORITY`.
pub const MAX_PRIORITY: i64 = 1000;

/// Which loop is outer when a ladder's cells are emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LadderAxis {
    /// Bring every climber up one rung before anyone moves on ("Rung by rung").
    #[default]
    Rung,
    /// Take one climber as far as it gets before the next ("Model by model").
    Combination,
}

fn engine_none() -> String {
    ENGINE_NONE.to_string()
}

fn default_runs_per_cell() -> i64 {
    DEFAULT_RUNS_PER_CELL
}

fn on() -> bool {
    true
}

/// One rung as sent: an existing rung carries its `id`, a new one none (the caller mints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RungInput {
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub id: Option<RungId>,
    pub slug: String,
    pub version: String,
    pub variant: String,
    /// Absent means the `none` engine.
    #[serde(default = "engine_none")]
    pub engine: String,
    /// Overrides the ladder's `runsPerCell` for this rung.
    #[serde(default)]
    pub runs: Option<i64>,
}

impl RungInput {
    pub fn pin(&self) -> CasePin {
        CasePin {
            slug: self.slug.clone(),
            version: self.version.clone(),
            variant: self.variant.clone(),
            engine: self.engine.clone(),
        }
    }
}

/// A rung as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Rung {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: RungId,
    pub case: CasePin,
    /// The rung's own `runs`, if it overrides the ladder's `runsPerCell`.
    pub runs: Option<i64>,
}

impl Rung {
    /// How many runs the rung takes under a ladder's `runsPerCell`.
    pub fn runs(&self, runs_per_cell: i64) -> i64 {
        self.runs.unwrap_or(runs_per_cell)
    }
}

/// `POST /ladders` and `PUT /ladders/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LadderInput {
    pub name: String,
    /// Low to high: the order is the climb.
    pub rungs: Vec<RungInput>,
    /// Pointers to `kind: "combo"` groups: the climbers.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub combo_groups: Vec<GroupId>,
    /// One-off climbers, unioned with the groups' members.
    #[serde(default)]
    pub combinations: Vec<Combination>,
    #[serde(default = "default_runs_per_cell")]
    pub runs_per_cell: i64,
    #[serde(default)]
    pub gate: Gate,
    #[serde(default = "on")]
    pub unloaded_counts_as_broken: bool,
    #[serde(default)]
    pub early_stop: bool,
    #[serde(default)]
    pub outer_axis: LadderAxis,
    /// `null` (or absent) inherits the account's target.
    #[serde(default)]
    pub buffer_target: Option<BufferTarget>,
    #[serde(default = "on")]
    pub auto_top_up: bool,
    /// A new ladder is disabled: writing the question down is not paying for the answer.
    #[serde(default)]
    pub enabled: bool,
    /// What the ladder's runs may cost, `{"usd": n}`; `null` (or absent): no budget.
    #[serde(default)]
    pub budget: Option<BudgetInput>,
    /// What one run is estimated to cost when no completed run of its combination says better,
    /// in US dollars (more than 0); `null`: the model's list price × the default token counts.
    #[serde(default)]
    pub estimated_run_usd: Option<f64>,
}

/// Why a rung's test type can never be cleared, and where it belongs instead.
fn unclearable(test_type: TestType) -> Option<&'static str> {
    match test_type {
        TestType::Performance => Some(
            "is a performance case: performance runs are graded automatically and never appear on a reviewer's worklist, so nobody could ever clear this rung; its runs would stay unjudged forever, occupying the review buffer and leaving the gate undecided. Put it in a coverage plan, which wants runs to exist rather than verdicts to compare",
        ),
        TestType::GameJam => Some(
            "is a game jam case: jam runs are reviewed on the category scale (💩→💎) and record no domain ratings, so even a fully reviewed jam run yields no rating for the gate to compare against its floor. Put it in a coverage plan, which wants runs to exist rather than verdicts to compare",
        ),
        TestType::Standard => None,
    }
}

impl LadderInput {
    /// Checks every field and returns the ladder as stored and shown (a buffer bound above 500
    /// clamped to 500). `cases` holds the ingested versions: a rung on a version not ingested is
    /// allowed (the run reports it), one on a performance or game jam version is refused.
    pub fn validated(self, cases: &CaseFacts) -> Result<Self, ValidationError> {
        check_text("name", &self.name, 200)?;
        if self.rungs.is_empty() || self.rungs.len() > MAX_RUNGS {
            return Err(ValidationError::new(
                "rungs",
                format!("must list 1 to {MAX_RUNGS} rungs"),
            ));
        }
        check_runs_per_cell("runsPerCell", self.runs_per_cell)?;
        let mut pins = BTreeMap::new();
        for (i, rung) in self.rungs.iter().enumerate() {
            let field = format!("rungs[{i}]");
            if let Some(id) = &rung.id
                && !RungId::is_valid(id.as_str())
            {
                return Err(ValidationError::new(
                    format!("{field}.id"),
                    "must be a rung id (rung_…)",
                ));
            }
            let pin = rung.pin();
            pin.validate(&field)?;
            if let Some(runs) = rung.runs {
                check_runs_per_cell(&format!("{field}.runs"), runs)?;
            }
            if let Some(earlier) = pins.insert(pin.clone(), i) {
                return Err(ValidationError::new(
                    field,
                    format!("repeats rungs[{earlier}] ({pin}): a case appears once in a climb"),
                ));
            }
            if let Some(why) = cases.test_type(&pin.slug, &pin.version).and_then(unclearable) {
                return Err(ValidationError::new(
                    format!("{field}.version"),
                    format!("{}@{} {why}", pin.slug, pin.version),
                ));
            }
        }
        self.gate.validate("gate")?;
        if let Threshold::Count { runs } = self.gate.threshold
            && let Some((i, r)) = self
                .rungs
                .iter()
                .enumerate()
                .find(|(_, r)| r.runs.unwrap_or(self.runs_per_cell) < runs)
        {
            return Err(ValidationError::new(
                "gate.threshold.runs",
                format!(
                    "must be at most the runs of every rung: rungs[{i}] ({}) takes {}, so no climber could ever clear it",
                    r.pin(),
                    r.runs.unwrap_or(self.runs_per_cell)
                ),
            ));
        }
        check_pointers("comboGroups", &self.combo_groups)?;
        check_one_off_count("combinations", self.combinations.len())?;
        check_combinations("combinations", &self.combinations)?;
        let buffer_target = self.buffer_target.map(|t| t.clamped("bufferTarget")).transpose()?;
        crate::budget::check_budget_fields(self.budget.as_ref(), self.estimated_run_usd)?;
        Ok(Self { buffer_target, ..self })
    }

    /// The rungs with their ids: an input rung naming an id keeps it, one naming none gets a new
    /// id from `mint`. `current` holds the ladder's rung ids before this edit (empty on create):
    /// an id outside it (a removed rung's, another ladder's, an invented one) is refused, so an id
    /// is never reused, and so is an id named twice.
    pub fn rungs_with_ids(
        &self,
        current: &[RungId],
        mut mint: impl FnMut() -> RungId,
    ) -> Result<Vec<Rung>, ValidationError> {
        let current: BTreeSet<&RungId> = current.iter().collect();
        let mut named = BTreeSet::new();
        self.rungs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let id = match &r.id {
                    Some(id) if !current.contains(id) => {
                        return Err(ValidationError::new(
                            format!("rungs[{i}].id"),
                            format!("{id} is not a rung of this ladder; a new rung is sent without an id"),
                        ));
                    }
                    Some(id) if !named.insert(id) => {
                        return Err(ValidationError::new(
                            format!("rungs[{i}].id"),
                            format!("{id} is named by an earlier rung"),
                        ));
                    }
                    Some(id) => id.clone(),
                    None => mint(),
                };
                Ok(Rung {
                    id,
                    case: r.pin(),
                    runs: r.runs,
                })
            })
            .collect()
    }
}

/// A ladder as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Ladder {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: LadderId,
    pub name: String,
    pub rungs: Vec<Rung>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub combo_groups: Vec<GroupId>,
    pub combinations: Vec<Combination>,
    pub runs_per_cell: i64,
    pub gate: Gate,
    pub unloaded_counts_as_broken: bool,
    pub early_stop: bool,
    pub outer_axis: LadderAxis,
    pub buffer_target: Option<BufferTarget>,
    pub auto_top_up: bool,
    pub enabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
    /// What the ladder's runs may cost; `null`: no budget.
    pub budget: Option<BudgetInput>,
    pub estimated_run_usd: Option<f64>,
    /// `budgetUsd`, `spentUsd`, `reservedUsd`.
    #[serde(flatten)]
    pub spend: crate::budget::Ledger,
}

impl Ladder {
    pub fn gate_rules(&self) -> GateRules {
        GateRules {
            gate: self.gate,
            unloaded_counts_as_broken: self.unloaded_counts_as_broken,
            early_stop: self.early_stop,
        }
    }

    /// The climbers, resolved from the groups' current members: groups in pointer order, each in
    /// its stored order, then the one-offs, each combination once. This is the climbers' stable
    /// order, the last tiebreak of the feed.
    pub fn climbers(&self, groups: &BTreeMap<GroupId, GroupMembers>) -> Vec<Combination> {
        coverage::union_combinations(&self.combo_groups, &self.combinations, groups)
    }
}

/// `POST /ladders/{id}/rungs/order`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RungOrderInput {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub rung_ids: Vec<RungId>,
}

impl RungOrderInput {
    /// Checks that the ids are a permutation of `current` and nothing else.
    pub fn check(&self, current: &[RungId]) -> Result<(), ValidationError> {
        let known: BTreeSet<&RungId> = current.iter().collect();
        let mut seen = BTreeSet::new();
        for (i, id) in self.rung_ids.iter().enumerate() {
            if !known.contains(id) {
                return Err(ValidationError::new(
                    format!("rungIds[{i}]"),
                    format!("{id} is not a rung of this ladder"),
                ));
            }
            if !seen.insert(id) {
                return Err(ValidationError::new(
                    format!("rungIds[{i}]"),
                    format!("{id} is listed twice"),
                ));
            }
        }
        let missing: Vec<&str> = current
            .iter()
            .filter(|id| !seen.contains(id))
            .map(RungId::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(ValidationError::new(
                "rungIds",
                format!(
                    "must list every rung of the ladder exactly once; missing {}",
                    missing.join(", ")
                ),
            ));
        }
        Ok(())
    }
}

/// What identifies a climber: its combination's identity (a gg climber by configuration id and
/// every bound model), the same identity its cells are counted by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(transparent)]
pub struct ClimberKey(pub String);

impl ClimberKey {
    pub fn of(combination: &Combination) -> Self {
        ClimberKey(combination.identity())
    }
}

/// A climber's steering. A climber with no steering row has the default: priority 0,
/// unfocused, not held, which is how a newly added model takes its place at the back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Steering {
    /// Climb-order weight, higher first.
    pub priority: i64,
    /// "Watch this one": the tiebreak between equal priorities.
    pub focused: bool,
    /// Stopped by hand where it stands.
    pub held: bool,
}

/// `POST /ladders/{id}/climbers`: changes the steering of one climber; an absent field keeps
/// its current value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SteeringInput {
    pub combination: Combination,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub focused: Option<bool>,
    #[serde(default)]
    pub held: Option<bool>,
}

impl SteeringInput {
    /// Checks the input against the ladder's current climbers.
    pub fn validate(&self, climbers: &[Combination]) -> Result<(), ValidationError> {
        self.combination.validate_shape()?;
        if let Some(p) = self.priority
            && !(-MAX_PRIORITY..=MAX_PRIORITY).contains(&p)
        {
            return Err(ValidationError::new(
                "priority",
                format!("must be an integer from -{MAX_PRIORITY} to {MAX_PRIORITY}"),
            ));
        }
        if self.priority.is_none() && self.focused.is_none() && self.held.is_none() {
            return Err(ValidationError::new(
                "body",
                "must change at least one of priority, focused, held",
            ));
        }
        let key = ClimberKey::of(&self.combination);
        if !climbers.iter().any(|c| ClimberKey::of(c) == key) {
            return Err(ValidationError::conflict(
                "combination",
                format!("{} is not a climber of this ladder", key.0),
            ));
        }
        Ok(())
    }

    /// The steering after this change.
    pub fn apply(&self, current: Steering) -> Steering {
        Steering {
            priority: self.priority.unwrap_or(current.priority),
            focused: self.focused.unwrap_or(current.focused),
            held: self.held.unwrap_or(current.held),
        }
    }
}

/// `POST /ladders/{id}/topup` (and what enabling a ladder starts): the plan's answer, plus what
/// the ladder's top-up did before it walked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LadderTopUpAnswer {
    #[serde(flatten)]
    pub top_up: TopUpAnswer,
    /// Verdicts the gate had decided that this top-up wrote down (`recorded` is true from now).
    pub recorded: i64,
    /// Jobs an early stop cancelled (a decided rung's still-queued runs).
    pub cancelled: Vec<String>,
}

impl LadderTopUpAnswer {
    /// The answer of a ladder top-up that did not run.
    pub fn skipped(buffer_target: BufferTarget, why: Skipped) -> Self {
        Self {
            top_up: TopUpAnswer::skipped(buffer_target, why),
            recorded: 0,
            cancelled: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::tests::{gg, harness};
    use crate::review::Rating;
    use crate::validation::Refused;

    fn ladder(json: serde_json::Value) -> Result<LadderInput, ValidationError> {
        serde_json::from_value::<LadderInput>(json)
            .map_err(|e| ValidationError::new("body", e.to_string()))?
            .validated(&cases())
    }

    fn cases() -> CaseFacts {
        CaseFacts::from_versions([
            ("snake", "1.0.0", TestType::Standard),
            ("bench", "1.0.0", TestType::Performance),
            ("jam", "1.0.0", TestType::GameJam),
        ])
    }

    fn rung(slug: &str) -> serde_json::Value {
        serde_json::json!({"slug": slug, "version": "1.0.0", "variant": "default"})
    }

    fn ids(names: &[&str]) -> Vec<RungId> {
        names.iter().map(|n| RungId(format!("rung_{n}"))).collect()
    }

    #[test]
    fn a_new_ladder_takes_the_specs_defaults_and_is_disabled() {
        let l = ladder(serde_json::json!({"name": "climb", "rungs": [rung("snake")]})).unwrap();
        assert_eq!(l.runs_per_cell, 5);
        assert_eq!(l.gate.floor, Rating::Scuffed);
        assert_eq!(l.gate.threshold, Threshold::Count { runs: 1 });
        assert!(l.unloaded_counts_as_broken);
        assert!(!l.early_stop);
        assert_eq!(l.outer_axis, LadderAxis::Rung);
        assert!(l.auto_top_up);
        assert!(!l.enabled);
        assert_eq!(l.buffer_target, None);
        assert_eq!(l.rungs[0].engine, "none");
    }

    #[test]
    fn fifty_rungs_are_allowed_and_fifty_one_refused() {
        let rungs: Vec<serde_json::Value> = (0..51).map(|i| rung(&format!("case-{i}"))).collect();
        let err = ladder(serde_json::json!({"name": "x", "rungs": rungs})).unwrap_err();
        assert_eq!(err.field, "rungs");
        let rungs: Vec<serde_json::Value> = (0..50).map(|i| rung(&format!("case-{i}"))).collect();
        assert!(ladder(serde_json::json!({"name": "x", "rungs": rungs})).is_ok());
    }

    #[test]
    fn a_performance_rung_is_refused_because_nobody_could_ever_clear_it() {
        let err = ladder(serde_json::json!({"name": "x", "rungs": [rung("snake"), rung("bench")]})).unwrap_err();
        assert_eq!(err.field, "rungs[1].version");
        assert_eq!(err.refused, Refused::Invalid, "the issue's 422, with the explanation");
        assert!(err.rule.contains("nobody could ever clear"), "{}", err.rule);
        assert!(err.rule.contains("coverage plan"), "{}", err.rule);
    }

    #[test]
    fn a_game_jam_rung_is_refused_because_it_records_no_rating_for_the_gate() {
        let err = ladder(serde_json::json!({"name": "x", "rungs": [rung("jam")]})).unwrap_err();
        assert_eq!(err.field, "rungs[0].version");
        assert_eq!(err.refused, Refused::Invalid);
        assert!(err.rule.contains("no domain ratings"), "{}", err.rule);
        assert!(err.rule.contains("coverage plan"), "{}", err.rule);
    }

    #[test]
    fn a_rung_on_a_version_not_ingested_is_allowed() {
        assert!(
            ladder(serde_json::json!({"name": "x", "rungs": [{"slug": "new", "version": "9.0.0", "variant": "v"}]}))
                .is_ok()
        );
    }

    #[test]
    fn a_rungs_runs_override_the_ladders_and_are_bounded_like_it() {
        let l = ladder(serde_json::json!({"name": "x", "rungs": [rung("snake"), {"slug": "pong", "version": "1.0.0", "variant": "default", "runs": 9}]}))
            .unwrap();
        let rungs = l.rungs_with_ids(&[], || RungId("rung_new".into())).unwrap();
        assert_eq!(rungs[0].runs(l.runs_per_cell), 5);
        assert_eq!(rungs[1].runs(l.runs_per_cell), 9);
        let err = ladder(serde_json::json!({"name": "x", "rungs": [{"slug": "pong", "version": "1.0.0", "variant": "default", "runs": 0}]}))
            .unwrap_err();
        assert_eq!(err.field, "rungs[0].runs");
    }

    #[test]
    fn a_count_threshold_above_a_rungs_runs_is_refused() {
        let err = ladder(serde_json::json!({
            "name": "x",
            "rungs": [rung("snake"), {"slug": "pong", "version": "1.0.0", "variant": "default", "runs": 2}],
            "gate": {"floor": "great", "threshold": {"kind": "count", "runs": 3}}
        }))
        .unwrap_err();
        assert_eq!(err.field, "gate.threshold.runs");
        assert_eq!(err.refused, Refused::Invalid);
        assert!(err.rule.contains("rungs[1]"), "{}", err.rule);
    }

    #[test]
    fn a_ladder_refuses_a_repeated_rung_an_unknown_field_and_an_unknown_axis() {
        let err = ladder(serde_json::json!({"name": "x", "rungs": [rung("snake"), rung("snake")]})).unwrap_err();
        assert_eq!(err.field, "rungs[1]");
        assert_eq!(err.refused, Refused::Invalid);
        assert!(
            serde_json::from_value::<LadderInput>(serde_json::json!({"name": "x", "rungs": [], "paused": true}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<LadderInput>(serde_json::json!({"name": "x", "rungs": [], "outerAxis": "case"}))
                .is_err()
        );
        let err = ladder(serde_json::json!({"name": "x", "rungs": []})).unwrap_err();
        assert_eq!(err.field, "rungs");
    }

    #[test]
    fn new_rungs_get_minted_ids_and_existing_rungs_keep_theirs() {
        let l = ladder(serde_json::json!({"name": "x", "rungs": [
            {"id": "rung_b", "slug": "snake", "version": "1.1.0", "variant": "default"},
            rung("pong"),
            {"id": "rung_a", "slug": "tetris", "version": "1.0.0", "variant": "default"},
        ]}))
        .unwrap();
        let mut minted = 0;
        let rungs = l
            .rungs_with_ids(&ids(&["a", "b"]), || {
                minted += 1;
                RungId(format!("rung_new{minted}"))
            })
            .unwrap();
        let got: Vec<&str> = rungs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(got, ["rung_b", "rung_new1", "rung_a"]);
        assert_eq!(
            rungs[0].case.version, "1.1.0",
            "an edit keeps the id: a bump, not a new rung"
        );
    }

    #[test]
    fn a_removed_or_invented_rung_id_is_never_taken_and_an_id_is_never_named_twice() {
        let l = ladder(serde_json::json!({"name": "x", "rungs": [{"id": "rung_gone", "slug": "snake", "version": "1.0.0", "variant": "default"}]}))
            .unwrap();
        let err = l.rungs_with_ids(&ids(&["a"]), || RungId("rung_n".into())).unwrap_err();
        assert_eq!(err.field, "rungs[0].id");
        assert_eq!(err.refused, Refused::Invalid);
        let l = ladder(serde_json::json!({"name": "x", "rungs": [
            {"id": "rung_a", "slug": "snake", "version": "1.0.0", "variant": "default"},
            {"id": "rung_a", "slug": "pong", "version": "1.0.0", "variant": "default"},
        ]}))
        .unwrap();
        assert_eq!(
            l.rungs_with_ids(&ids(&["a"]), || RungId("rung_n".into()))
                .unwrap_err()
                .field,
            "rungs[1].id"
        );
        let err = ladder(serde_json::json!({"name": "x", "rungs": [{"id": "3", "slug": "snake", "version": "1.0.0", "variant": "default"}]}))
            .unwrap_err();
        assert_eq!(err.field, "rungs[0].id");
    }

    #[test]
    fn a_reorder_takes_a_permutation_of_the_current_rung_ids_and_nothing_else() {
        let current = ids(&["a", "b", "c"]);
        let order = |names: &[&str]| RungOrderInput { rung_ids: ids(names) }.check(&current);
        assert!(order(&["c", "a", "b"]).is_ok());
        assert!(order(&["a", "b", "c"]).is_ok());
        let err = order(&["c", "a"]).unwrap_err();
        assert_eq!(err.field, "rungIds");
        assert_eq!(err.refused, Refused::Invalid, "not a permutation: 422");
        assert!(err.rule.contains("rung_b"), "{}", err.rule);
        let twice = order(&["c", "a", "b", "a"]).unwrap_err();
        assert_eq!((twice.field.as_str(), twice.refused), ("rungIds[3]", Refused::Invalid));
        let err = order(&["c", "a", "x"]).unwrap_err();
        assert_eq!(err.field, "rungIds[2]");
        assert_eq!(err.refused, Refused::Invalid);
        assert!(err.rule.contains("rung_x"));
        assert!(serde_json::from_value::<RungOrderInput>(serde_json::json!({"rungIds": [], "rungs": []})).is_err());
    }

    #[test]
    fn a_gg_climber_is_keyed_by_configuration_id_and_bound_models() {
        assert_eq!(ClimberKey::of(&gg("gg_1", "m1")).0, "gg:gg_1[root=m1]");
        assert_ne!(ClimberKey::of(&gg("gg_1", "m1")), ClimberKey::of(&gg("gg_1", "m2")));
        assert_ne!(ClimberKey::of(&gg("gg_1", "m1")), ClimberKey::of(&gg("gg_2", "m1")));
        assert_eq!(ClimberKey::of(&harness("cc", "m")).0, "cc/m");
    }

    #[test]
    fn a_climber_without_steering_is_priority_zero_unfocused_and_not_held() {
        assert_eq!(
            Steering::default(),
            Steering {
                priority: 0,
                focused: false,
                held: false
            }
        );
    }

    #[test]
    fn steering_changes_only_what_it_names_and_only_for_a_climber_of_the_ladder() {
        let climbers = [harness("cc", "m"), gg("gg_1", "m")];
        let hold = SteeringInput {
            combination: gg("gg_1", "m"),
            priority: None,
            focused: None,
            held: Some(true),
        };
        assert!(hold.validate(&climbers).is_ok());
        let before = Steering {
            priority: 3,
            focused: true,
            held: false,
        };
        assert_eq!(hold.apply(before), Steering { held: true, ..before });
        let stranger = SteeringInput {
            combination: harness("cc", "other"),
            ..hold.clone()
        };
        let err = stranger.validate(&climbers).unwrap_err();
        assert_eq!((err.field.as_str(), err.refused), ("combination", Refused::Conflict));
        let nothing = SteeringInput {
            held: None,
            ..hold.clone()
        };
        assert_eq!(nothing.validate(&climbers).unwrap_err().field, "body");
        let loud = SteeringInput {
            priority: Some(5_000),
            ..hold
        };
        assert_eq!(loud.validate(&climbers).unwrap_err().field, "priority");
    }
}
