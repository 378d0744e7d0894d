//! Coverage groups and plans as their owners author them, and the cells a plan resolves to.
//!
//! A group is a reusable, ordered set of either combinations (`kind: "combo"`) or pinned cases
//! (`kind: "case"`). Plans and ladders store pointers to groups, never copies, so editing a group
//! reshapes everything that points at it; resolution is therefore done on every read, here, from
//! the groups' current members. The union keeps the first place of a repeated member: groups in
//! pointer order, each in its stored order, then the one-off members.

use crate::budget::{BudgetInput, Ledger, check_budget_fields};
use crate::buffer::BufferTarget;
use crate::ids::{GroupId, PlanId};
use crate::job::{CasePin, CellKey, Combination};
use crate::validation::{ValidationError, check_text};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A plan's per-cell target ranges over `1..=MAX_RUNS_PER_CELL`.
pub const MAX_RUNS_PER_CELL: i64 = 100;
/// Members one group may hold.
pub const MAX_GROUP_MEMBERS: usize = 1000;
/// Group pointers one plan or ladder may hold per axis.
pub const MAX_GROUP_POINTERS: usize = 100;
/// One-off members one plan or ladder may pin per axis.
pub const MAX_ONE_OFF_MEMBERS: usize = 1000;

/// What a group holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Combinations, both shapes side by side.
    Combo,
    /// Pinned cases.
    Case,
}

impl GroupKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKind::Combo => "combo",
            GroupKind::Case => "case",
        }
    }
}

/// One member of a group as sent: a combination carries a `kind` (`harness` or `gg`), a pinned
/// case never does, so a member of the wrong kind is recognised and refused by name rather than
/// reported as a shape that matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(untagged)]
pub enum GroupMember {
    Combination(Combination),
    Case(CasePin),
}

impl<'de> Deserialize<'de> for GroupMember {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        if !value.is_object() {
            return Err(D::Error::custom(
                "a member is an object: a combination or a pinned case",
            ));
        }
        if value.get("kind").is_some() {
            Combination::deserialize(value)
                .map(GroupMember::Combination)
                .map_err(D::Error::custom)
        } else {
            CasePin::deserialize(value)
                .map(GroupMember::Case)
                .map_err(D::Error::custom)
        }
    }
}

/// The validated members of a group, of its one kind, in their stored order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupMembers {
    Combo(Vec<Combination>),
    Case(Vec<CasePin>),
}

impl GroupMembers {
    pub fn kind(&self) -> GroupKind {
        match self {
            GroupMembers::Combo(_) => GroupKind::Combo,
            GroupMembers::Case(_) => GroupKind::Case,
        }
    }

    /// The members in their wire shape, for storing and showing.
    pub fn to_members(&self) -> Vec<GroupMember> {
        match self {
            GroupMembers::Combo(c) => c.iter().cloned().map(GroupMember::Combination).collect(),
            GroupMembers::Case(c) => c.iter().cloned().map(GroupMember::Case).collect(),
        }
    }
}

/// `POST /coverage-groups` and `PUT /coverage-groups/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoverageGroupInput {
    pub name: String,
    pub kind: GroupKind,
    #[serde(default)]
    pub members: Vec<GroupMember>,
}

impl CoverageGroupInput {
    /// Checks the name and every member, and returns the members of the group's kind.
    pub fn validate(&self) -> Result<GroupMembers, ValidationError> {
        check_text("name", &self.name, 200)?;
        if self.members.len() > MAX_GROUP_MEMBERS {
            return Err(ValidationError::new(
                "members",
                format!("must hold at most {MAX_GROUP_MEMBERS} members"),
            ));
        }
        match self.kind {
            GroupKind::Combo => {
                let combos = self.members_of_kind(
                    |m| match m {
                        GroupMember::Combination(c) => Some(c),
                        GroupMember::Case(_) => None,
                    },
                    "a combo group holds combinations ({\"kind\":\"harness\",…} or {\"kind\":\"gg\",…}); this member is a pinned case, which belongs in a case group",
                )?;
                check_combinations("members", &combos)?;
                Ok(GroupMembers::Combo(combos))
            }
            GroupKind::Case => {
                let cases = self.members_of_kind(
                    |m| match m {
                        GroupMember::Case(c) => Some(c),
                        GroupMember::Combination(_) => None,
                    },
                    "a case group holds pinned cases (slug, version, variant, engine); this member is a combination, which belongs in a combo group",
                )?;
                check_cases("members", &cases)?;
                Ok(GroupMembers::Case(cases))
            }
        }
    }

    /// The members as `T`, or the first member of the other kind refused with `wrong_kind`.
    fn members_of_kind<T: Clone>(
        &self,
        pick: impl Fn(&GroupMember) -> Option<&T>,
        wrong_kind: &str,
    ) -> Result<Vec<T>, ValidationError> {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                pick(m)
                    .cloned()
                    .ok_or_else(|| ValidationError::new(format!("members[{i}]"), wrong_kind))
            })
            .collect()
    }
}

/// A coverage group as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CoverageGroup {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: GroupId,
    pub name: String,
    pub kind: GroupKind,
    pub members: Vec<GroupMember>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which loop is outer when a plan's cells are walked, and so the order its runs start in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OuterAxis {
    /// Finish one case across every combination before the next case.
    #[default]
    Case,
    /// Finish one combination across every case before the next combination.
    Combination,
}

fn on() -> bool {
    true
}

/// `POST /coverage-plans` and `PUT /coverage-plans/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoveragePlanInput {
    pub name: String,
    /// Pointers to `kind: "case"` groups.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub case_groups: Vec<GroupId>,
    /// Pointers to `kind: "combo"` groups.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub combo_groups: Vec<GroupId>,
    /// One-off pinned cases, unioned with the case groups' members.
    #[serde(default)]
    pub cases: Vec<CasePin>,
    /// One-off combinations, unioned with the combo groups' members.
    #[serde(default)]
    pub combinations: Vec<Combination>,
    /// The target number of runs of every cell, 1 to 100.
    pub runs_per_cell: i64,
    #[serde(default)]
    pub outer_axis: OuterAxis,
    /// `null` (or absent) inherits the account's target.
    #[serde(default)]
    pub buffer_target: Option<BufferTarget>,
    #[serde(default = "on")]
    pub auto_top_up: bool,
    #[serde(default)]
    pub paused: bool,
    /// What the plan's runs may cost, `{"usd": n}`; `null` (or absent): no budget.
    #[serde(default)]
    pub budget: Option<BudgetInput>,
    /// What one run is estimated to cost when no completed run of its combination says better,
    /// in US dollars (more than 0); `null`: the model's list price × the default token counts.
    #[serde(default)]
    pub estimated_run_usd: Option<f64>,
}

impl CoveragePlanInput {
    /// Checks every field and returns the plan as stored and shown (a buffer bound above 500
    /// clamped to 500). The group pointers are checked against the account's groups by
    /// [`check_group_pointers`].
    pub fn validated(self) -> Result<Self, ValidationError> {
        check_text("name", &self.name, 200)?;
        check_pointers("caseGroups", &self.case_groups)?;
        check_pointers("comboGroups", &self.combo_groups)?;
        check_one_off_count("cases", self.cases.len())?;
        check_cases("cases", &self.cases)?;
        check_one_off_count("combinations", self.combinations.len())?;
        check_combinations("combinations", &self.combinations)?;
        check_runs_per_cell("runsPerCell", self.runs_per_cell)?;
        let buffer_target = self.buffer_target.map(|t| t.clamped("bufferTarget")).transpose()?;
        check_budget_fields(self.budget.as_ref(), self.estimated_run_usd)?;
        Ok(Self { buffer_target, ..self })
    }

    /// The cells the plan would have, resolved from the groups' current members.
    pub fn cells(&self, groups: &BTreeMap<GroupId, GroupMembers>) -> Vec<Cell> {
        resolve(
            (&self.case_groups, &self.cases),
            (&self.combo_groups, &self.combinations),
            self.outer_axis,
            groups,
        )
    }
}

/// A coverage plan as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CoveragePlan {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: PlanId,
    pub name: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub case_groups: Vec<GroupId>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub combo_groups: Vec<GroupId>,
    pub cases: Vec<CasePin>,
    pub combinations: Vec<Combination>,
    pub runs_per_cell: i64,
    pub outer_axis: OuterAxis,
    pub buffer_target: Option<BufferTarget>,
    pub auto_top_up: bool,
    pub paused: bool,
    pub created_at: i64,
    pub updated_at: i64,
    /// What the plan's runs may cost; `null`: no budget.
    pub budget: Option<BudgetInput>,
    pub estimated_run_usd: Option<f64>,
    /// `budgetUsd`, `spentUsd`, `reservedUsd`.
    #[serde(flatten)]
    pub spend: Ledger,
}

impl CoveragePlan {
    /// The plan's cells in walk order, resolved from the groups' current members (`groups`: the
    /// account's groups the plan points at; a missing one contributes nothing).
    pub fn cells(&self, groups: &BTreeMap<GroupId, GroupMembers>) -> Vec<Cell> {
        resolve(
            (&self.case_groups, &self.cases),
            (&self.combo_groups, &self.combinations),
            self.outer_axis,
            groups,
        )
    }
}

pub(crate) fn check_runs_per_cell(field: &str, runs: i64) -> Result<(), ValidationError> {
    if !(1..=MAX_RUNS_PER_CELL).contains(&runs) {
        return Err(ValidationError::new(
            field,
            format!("must be an integer from 1 to {MAX_RUNS_PER_CELL}"),
        ));
    }
    Ok(())
}

/// Checks a list of group pointers: well-formed ids, each at most once.
pub(crate) fn check_pointers(field: &str, ids: &[GroupId]) -> Result<(), ValidationError> {
    if ids.len() > MAX_GROUP_POINTERS {
        return Err(ValidationError::new(
            field,
            format!("must point at most {MAX_GROUP_POINTERS} groups"),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, id) in ids.iter().enumerate() {
        if !GroupId::is_valid(id.as_str()) {
            return Err(ValidationError::new(
                format!("{field}[{i}]"),
                "must be a coverage group id (grp_…)",
            ));
        }
        if !seen.insert(id) {
            return Err(ValidationError::new(
                format!("{field}[{i}]"),
                "must not point at a group twice",
            ));
        }
    }
    Ok(())
}

pub(crate) fn check_one_off_count(field: &str, n: usize) -> Result<(), ValidationError> {
    if n > MAX_ONE_OFF_MEMBERS {
        return Err(ValidationError::new(
            field,
            format!("must list at most {MAX_ONE_OFF_MEMBERS} members"),
        ));
    }
    Ok(())
}

/// Checks each combination's shape, and that none is listed twice (one cell identity each).
pub(crate) fn check_combinations(field: &str, combos: &[Combination]) -> Result<(), ValidationError> {
    let mut seen = BTreeSet::new();
    for (i, c) in combos.iter().enumerate() {
        c.validate_shape_at(&format!("{field}[{i}]"))?;
        if !seen.insert(c.identity()) {
            return Err(ValidationError::new(
                format!("{field}[{i}]"),
                "repeats an earlier combination",
            ));
        }
    }
    Ok(())
}

fn check_cases(field: &str, cases: &[CasePin]) -> Result<(), ValidationError> {
    let mut seen = BTreeSet::new();
    for (i, c) in cases.iter().enumerate() {
        c.validate(&format!("{field}[{i}]"))?;
        if !seen.insert(c) {
            return Err(ValidationError::new(
                format!("{field}[{i}]"),
                "repeats an earlier pinned case",
            ));
        }
    }
    Ok(())
}

/// Checks pointers against the account's groups (`kinds`: each group it owns and its kind): each
/// must name one of them, of the kind its list holds. `field` is `caseGroups` or `comboGroups`.
pub fn check_group_pointers(
    field: &str,
    ids: &[GroupId],
    expected: GroupKind,
    kinds: &BTreeMap<GroupId, GroupKind>,
) -> Result<(), ValidationError> {
    for (i, id) in ids.iter().enumerate() {
        match kinds.get(id) {
            None => {
                return Err(ValidationError::new(
                    format!("{field}[{i}]"),
                    format!("no coverage group {id} of this account"),
                ));
            }
            Some(k) if *k != expected => {
                return Err(ValidationError::new(
                    format!("{field}[{i}]"),
                    format!(
                        "{id} is a {} group; {field} points at {} groups",
                        k.as_str(),
                        expected.as_str()
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// One case × combination pair, identified by its cell key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    pub case: CasePin,
    pub combination: Combination,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
}

impl Cell {
    pub fn new(case: CasePin, combination: Combination) -> Self {
        let cell_key = CellKey::of(&case, &combination);
        Self {
            case,
            combination,
            cell_key,
        }
    }
}

/// The pinned cases of the case groups `pointers` names (in pointer order, each group in its
/// stored order) followed by `one_offs`, each pin once, at its first place. A pointer to a group
/// that no longer exists, or to a group of the other kind, contributes nothing.
pub fn union_cases(
    pointers: &[GroupId],
    one_offs: &[CasePin],
    groups: &BTreeMap<GroupId, GroupMembers>,
) -> Vec<CasePin> {
    let grouped = pointers.iter().filter_map(|id| match groups.get(id) {
        Some(GroupMembers::Case(members)) => Some(members.iter()),
        _ => None,
    });
    let mut seen = BTreeSet::new();
    grouped
        .flatten()
        .chain(one_offs)
        .filter(|c| seen.insert(*c))
        .cloned()
        .collect()
}

/// The combinations of the combo groups `pointers` names followed by `one_offs`, each cell
/// identity once, at its first place (the order [`union_cases`] uses).
pub fn union_combinations(
    pointers: &[GroupId],
    one_offs: &[Combination],
    groups: &BTreeMap<GroupId, GroupMembers>,
) -> Vec<Combination> {
    let grouped = pointers.iter().filter_map(|id| match groups.get(id) {
        Some(GroupMembers::Combo(members)) => Some(members.iter()),
        _ => None,
    });
    let mut seen = BTreeSet::new();
    grouped
        .flatten()
        .chain(one_offs)
        .filter(|c| seen.insert(c.identity()))
        .cloned()
        .collect()
}

/// A plan's cells from its case pointers and one-offs and its combination pointers and one-offs.
fn resolve(
    (case_groups, cases): (&[GroupId], &[CasePin]),
    (combo_groups, combinations): (&[GroupId], &[Combination]),
    axis: OuterAxis,
    groups: &BTreeMap<GroupId, GroupMembers>,
) -> Vec<Cell> {
    let cases = union_cases(case_groups, cases, groups);
    let combos = union_combinations(combo_groups, combinations, groups);
    cross(&cases, &combos, axis)
}

/// Every case × combination pair, one cell each, in the outer axis's order.
pub fn cross(cases: &[CasePin], combos: &[Combination], axis: OuterAxis) -> Vec<Cell> {
    let mut cells = Vec::with_capacity(cases.len() * combos.len());
    match axis {
        OuterAxis::Case => {
            for case in cases {
                for combo in combos {
                    cells.push(Cell::new(case.clone(), combo.clone()));
                }
            }
        }
        OuterAxis::Combination => {
            for combo in combos {
                for case in cases {
                    cells.push(Cell::new(case.clone(), combo.clone()));
                }
            }
        }
    }
    cells
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::generator::XorShift;

    pub fn pin(slug: &str, version: &str) -> CasePin {
        CasePin {
            slug: slug.into(),
            version: version.into(),
            variant: "default".into(),
            engine: "none".into(),
        }
    }

    pub fn harness(harness: &str, model: &str) -> Combination {
        Combination::Harness {
            harness: harness.into(),
            model: model.into(),
            provider: None,
        }
    }

    pub fn gg(id: &str, root: &str) -> Combination {
        Combination::Gg {
            gg_config_id: id.into(),
            bindings: BTreeMap::from([("root".to_string(), root.to_string())]),
        }
    }

    fn group(json: serde_json::Value) -> Result<GroupMembers, String> {
        let input: CoverageGroupInput = serde_json::from_value(json).map_err(|e| e.to_string())?;
        input.validate().map_err(|e| e.to_string())
    }

    fn plan(json: serde_json::Value) -> Result<CoveragePlanInput, ValidationError> {
        serde_json::from_value::<CoveragePlanInput>(json)
            .map_err(|e| ValidationError::new("body", e.to_string()))?
            .validated()
    }

    #[test]
    fn a_combo_group_holds_both_combination_shapes_side_by_side_in_their_stored_order() {
        let members = group(serde_json::json!({
            "name": "frontier",
            "kind": "combo",
            "members": [
                {"kind": "gg", "ggConfigId": "gg_1", "bindings": {"root": "m1"}},
                {"kind": "harness", "harness": "cc", "model": "m2"},
            ]
        }))
        .unwrap();
        assert_eq!(
            members,
            GroupMembers::Combo(vec![gg("gg_1", "m1"), harness("cc", "m2")])
        );
    }

    #[test]
    fn a_case_group_member_with_no_engine_pins_the_none_engine() {
        let members = group(serde_json::json!({
            "name": "games",
            "kind": "case",
            "members": [{"slug": "snake", "version": "1.0.0", "variant": "default"}]
        }))
        .unwrap();
        assert_eq!(members, GroupMembers::Case(vec![pin("snake", "1.0.0")]));
    }

    #[test]
    fn a_member_of_the_wrong_kind_is_refused_naming_the_field() {
        let input: CoverageGroupInput = serde_json::from_value(serde_json::json!({
            "name": "x", "kind": "combo",
            "members": [{"kind": "harness", "harness": "cc", "model": "m"},
                        {"slug": "snake", "version": "1.0.0", "variant": "default"}]
        }))
        .unwrap();
        let err = input.validate().unwrap_err();
        assert_eq!(err.field, "members[1]");
        assert!(err.rule.contains("case group"), "{}", err.rule);

        let input: CoverageGroupInput = serde_json::from_value(serde_json::json!({
            "name": "x", "kind": "case",
            "members": [{"kind": "harness", "harness": "cc", "model": "m"}]
        }))
        .unwrap();
        let err = input.validate().unwrap_err();
        assert_eq!(err.field, "members[0]");
        assert!(err.rule.contains("combo group"), "{}", err.rule);
    }

    #[test]
    fn a_malformed_member_names_its_own_field_and_the_bad_shape() {
        let err = serde_json::from_value::<CoverageGroupInput>(serde_json::json!({
            "name": "x", "kind": "case",
            "members": [{"slug": "snake", "version": "1.0.0", "variant": "default", "colour": "red"}]
        }))
        .unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let input: CoverageGroupInput = serde_json::from_value(serde_json::json!({
            "name": "x", "kind": "combo",
            "members": [{"kind": "harness", "harness": "cc", "model": "bad name"}]
        }))
        .unwrap();
        assert_eq!(input.validate().unwrap_err().field, "members[0].model");
    }

    #[test]
    fn a_group_refuses_an_unknown_field_and_an_unknown_kind() {
        assert!(
            serde_json::from_value::<CoverageGroupInput>(
                serde_json::json!({"name": "x", "kind": "combo", "owner": "me"})
            )
            .is_err()
        );
        assert!(
            serde_json::from_value::<CoverageGroupInput>(serde_json::json!({"name": "x", "kind": "cases"})).is_err()
        );
    }

    #[test]
    fn a_plan_defaults_to_the_case_axis_auto_top_up_on_unpaused_and_inheriting_the_buffer() {
        let p = plan(serde_json::json!({"name": "p", "runsPerCell": 3})).unwrap();
        assert_eq!(p.outer_axis, OuterAxis::Case);
        assert!(p.auto_top_up);
        assert!(!p.paused);
        assert_eq!(p.buffer_target, None);
        let p = plan(serde_json::json!({"name": "p", "runsPerCell": 3, "bufferTarget": null})).unwrap();
        assert_eq!(p.buffer_target, None);
    }

    #[test]
    fn runs_per_cell_ranges_from_one_to_a_hundred() {
        for (n, ok) in [(0, false), (1, true), (100, true), (101, false), (-3, false)] {
            let r = plan(serde_json::json!({"name": "p", "runsPerCell": n}));
            assert_eq!(r.is_ok(), ok, "{n}");
            if !ok {
                assert_eq!(r.unwrap_err().field, "runsPerCell");
            }
        }
        let err = serde_json::from_value::<CoveragePlanInput>(serde_json::json!({"name": "p"})).unwrap_err();
        assert!(err.to_string().contains("runsPerCell"), "{err}");
    }

    #[test]
    fn a_plan_buffer_override_above_five_hundred_is_stored_as_five_hundred() {
        let p =
            plan(serde_json::json!({"name": "p", "runsPerCell": 1, "bufferTarget": {"kind": "bounded", "runs": 600}}))
                .unwrap();
        assert_eq!(p.buffer_target, Some(BufferTarget::Bounded { runs: 500 }));
        let err =
            plan(serde_json::json!({"name": "p", "runsPerCell": 1, "bufferTarget": {"kind": "bounded", "runs": -1}}))
                .unwrap_err();
        assert_eq!(err.field, "bufferTarget.runs");
    }

    #[test]
    fn a_plan_refuses_unknown_fields_bad_pointers_and_repeated_one_offs() {
        assert!(
            serde_json::from_value::<CoveragePlanInput>(serde_json::json!({"name": "p", "runsPerCell": 1, "x": 1}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<CoveragePlanInput>(
                serde_json::json!({"name": "p", "runsPerCell": 1, "outerAxis": "rung"})
            )
            .is_err()
        );
        let err = plan(serde_json::json!({"name": "p", "runsPerCell": 1, "caseGroups": ["plan_1"]})).unwrap_err();
        assert_eq!(err.field, "caseGroups[0]");
        let err =
            plan(serde_json::json!({"name": "p", "runsPerCell": 1, "comboGroups": ["grp_1", "grp_1"]})).unwrap_err();
        assert_eq!(err.field, "comboGroups[1]");
        let twice = serde_json::json!({"kind": "harness", "harness": "cc", "model": "m"});
        let err = plan(serde_json::json!({"name": "p", "runsPerCell": 1, "combinations": [twice.clone(), twice]}))
            .unwrap_err();
        assert_eq!(err.field, "combinations[1]");
        let err = plan(serde_json::json!({"name": " ", "runsPerCell": 1})).unwrap_err();
        assert_eq!(err.field, "name");
    }

    #[test]
    fn pointers_must_name_the_accounts_groups_of_the_right_kind() {
        let kinds = BTreeMap::from([
            (GroupId("grp_c".into()), GroupKind::Case),
            (GroupId("grp_m".into()), GroupKind::Combo),
        ]);
        let ok = [GroupId("grp_c".into())];
        assert!(check_group_pointers("caseGroups", &ok, GroupKind::Case, &kinds).is_ok());
        let wrong = [GroupId("grp_c".into()), GroupId("grp_m".into())];
        let err = check_group_pointers("caseGroups", &wrong, GroupKind::Case, &kinds).unwrap_err();
        assert_eq!(err.field, "caseGroups[1]");
        let missing = [GroupId("grp_gone".into())];
        let err = check_group_pointers("comboGroups", &missing, GroupKind::Combo, &kinds).unwrap_err();
        assert_eq!(err.field, "comboGroups[0]");
    }

    #[test]
    fn the_union_counts_a_member_in_two_groups_and_a_one_off_once_at_its_first_place() {
        let groups = BTreeMap::from([
            (
                GroupId("grp_a".into()),
                GroupMembers::Combo(vec![harness("cc", "m1"), gg("gg_1", "m2")]),
            ),
            (
                GroupId("grp_b".into()),
                GroupMembers::Combo(vec![gg("gg_1", "m2"), harness("cc", "m3")]),
            ),
            (GroupId("grp_c".into()), GroupMembers::Case(vec![pin("snake", "1.0.0")])),
        ]);
        let pointers = [
            GroupId("grp_a".into()),
            GroupId("grp_b".into()),
            GroupId("grp_gone".into()),
        ];
        let combos = union_combinations(&pointers, &[harness("cc", "m1"), harness("cc", "m4")], &groups);
        assert_eq!(
            combos,
            vec![
                harness("cc", "m1"),
                gg("gg_1", "m2"),
                harness("cc", "m3"),
                harness("cc", "m4")
            ]
        );
        let cases = union_cases(
            &[GroupId("grp_c".into()), GroupId("grp_a".into())],
            &[pin("snake", "1.0.0"), pin("pong", "2.0.0")],
            &groups,
        );
        assert_eq!(cases, vec![pin("snake", "1.0.0"), pin("pong", "2.0.0")]);
    }

    #[test]
    fn two_cases_by_a_harness_and_a_gg_combination_give_four_cells_in_the_outer_axis_order() {
        let cases = [pin("snake", "1.0.0"), pin("pong", "1.0.0")];
        let combos = [harness("cc", "m"), gg("gg_1", "m")];
        let by_case = cross(&cases, &combos, OuterAxis::Case);
        let keys: Vec<&str> = by_case.iter().map(|c| c.cell_key.0.as_str()).collect();
        assert_eq!(
            keys,
            [
                "snake@1.0.0/default/none × cc/m",
                "snake@1.0.0/default/none × gg:gg_1[root=m]",
                "pong@1.0.0/default/none × cc/m",
                "pong@1.0.0/default/none × gg:gg_1[root=m]",
            ]
        );
        let by_combo = cross(&cases, &combos, OuterAxis::Combination);
        let keys: Vec<&str> = by_combo.iter().map(|c| c.cell_key.0.as_str()).collect();
        assert_eq!(
            keys,
            [
                "snake@1.0.0/default/none × cc/m",
                "pong@1.0.0/default/none × cc/m",
                "snake@1.0.0/default/none × gg:gg_1[root=m]",
                "pong@1.0.0/default/none × gg:gg_1[root=m]",
            ]
        );
    }

    #[test]
    fn one_case_on_two_engines_is_two_pinned_cases_each_crossing_every_combination() {
        let mut godot = pin("snake", "1.0.0");
        godot.engine = "godot".into();
        let cells = cross(&[pin("snake", "1.0.0"), godot], &[harness("cc", "m")], OuterAxis::Case);
        assert_eq!(cells.len(), 2);
        assert_ne!(cells[0].cell_key, cells[1].cell_key);
    }

    #[test]
    fn editing_a_group_reshapes_the_plan_that_points_at_it() {
        let p =
            plan(serde_json::json!({"name": "p", "runsPerCell": 1, "caseGroups": ["grp_c"], "comboGroups": ["grp_m"]}))
                .unwrap();
        let mut groups = BTreeMap::from([
            (GroupId("grp_c".into()), GroupMembers::Case(vec![pin("snake", "1.0.0")])),
            (GroupId("grp_m".into()), GroupMembers::Combo(vec![harness("cc", "m")])),
        ]);
        assert_eq!(p.cells(&groups).len(), 1);
        groups.insert(
            GroupId("grp_m".into()),
            GroupMembers::Combo(vec![harness("cc", "m"), harness("cc", "n")]),
        );
        assert_eq!(p.cells(&groups).len(), 2);
    }

    #[test]
    fn every_resolved_cell_is_distinct_and_both_axes_hold_the_same_cells() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for _ in 0..200 {
            let cases: Vec<CasePin> = (0..rng.below(6))
                .map(|_| pin(&format!("c{}", rng.below(4)), "1.0.0"))
                .collect();
            let combos: Vec<Combination> = (0..rng.below(6))
                .map(|_| {
                    if rng.one_in(2) {
                        harness("cc", &format!("m{}", rng.below(4)))
                    } else {
                        gg("gg_1", &format!("m{}", rng.below(4)))
                    }
                })
                .collect();
            let cases = union_cases(&[], &cases, &BTreeMap::new());
            let combos = union_combinations(&[], &combos, &BTreeMap::new());
            let a = cross(&cases, &combos, OuterAxis::Case);
            let b = cross(&cases, &combos, OuterAxis::Combination);
            assert_eq!(a.len(), cases.len() * combos.len());
            let ka: BTreeSet<&CellKey> = a.iter().map(|c| &c.cell_key).collect();
            let kb: BTreeSet<&CellKey> = b.iter().map(|c| &c.cell_key).collect();
            assert_eq!(ka.len(), a.len(), "cells are distinct");
            assert_eq!(ka, kb);
        }
    }
}
