//! The matrix: what each cell of a plan (or of a ladder) wants, has and is doing, computed from
//! plain counts.
//!
//! Counts are global: `completed` and `inFlight` count every run and job of that exact cell,
//! whoever launched them. Judgement is per account: `unreviewed` is the requesting account's
//! alone, and auto-graded (`performance`) runs never count as unreviewed because nobody can
//! review them. The store fills the inputs with one grouped query per source (runs by cell key,
//! jobs by cell key and status, the catalogue's versions, the launch facts), never one per cell.

use crate::catalogue::{CaseFacts, TestType};
use crate::coverage::Cell;
use crate::job::{CasePin, CellKey, Combination, JobStatus};
use crate::launch::{LaunchFacts, Unlaunchable};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// What the store counted for one cell key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellCounts {
    /// Completed runs of the cell, whoever launched them.
    pub completed: i64,
    /// Completed runs of the cell with no review by the requesting account.
    pub unreviewed: i64,
    /// The cell's jobs by status, whoever launched them (statuses with no jobs may be absent).
    pub jobs: BTreeMap<JobStatus, i64>,
}

/// The jobs among `jobs` (counted by status) that are queued, pending, dispatched, starting or
/// running.
pub fn in_flight_of(jobs: &BTreeMap<JobStatus, i64>) -> i64 {
    JobStatus::IN_FLIGHT
        .iter()
        .map(|s| jobs.get(s).copied().unwrap_or(0))
        .sum()
}

impl CellCounts {
    pub fn in_flight(&self) -> i64 {
        in_flight_of(&self.jobs)
    }

    pub fn pending(&self) -> i64 {
        self.jobs.get(&JobStatus::Pending).copied().unwrap_or(0)
    }
}

/// Why a top-up cannot launch a cell: a reason code and a message for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct UnlaunchableReason {
    /// `gg_config_deleted`, `slot_unbound`, `model_without_context_window`, `model_unpriced`,
    /// `unknown_harness`, … (the launch rule's codes).
    pub code: String,
    pub message: String,
}

impl From<&Unlaunchable> for UnlaunchableReason {
    fn from(u: &Unlaunchable) -> Self {
        Self {
            code: u.code().to_string(),
            message: u.to_string(),
        }
    }
}

/// One cell of `GET /coverage-plans/{id}/coverage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MatrixCell {
    pub case: CasePin,
    pub combination: Combination,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    /// The target: the plan's `runsPerCell` (a ladder rung's `runs`).
    pub desired: i64,
    /// Completed runs of the cell, counted globally.
    pub completed: i64,
    /// Jobs queued, pending, dispatched, starting or running, globally.
    pub in_flight: i64,
    /// The subset of `inFlight` the queue is deliberately holding back.
    pub pending: i64,
    /// Completed runs the requesting account has not reviewed (never a performance run).
    pub unreviewed: i64,
    /// `max(0, desired - (completed + inFlight))`.
    pub remaining: i64,
    /// The case's highest ingested version, if any.
    pub latest_version: Option<String>,
    /// A newer version than the pin has been ingested; the target does not move.
    pub stale: bool,
    /// Why a top-up cannot launch this cell, or null.
    pub unlaunchable: Option<UnlaunchableReason>,
}

impl MatrixCell {
    /// The harness lane whose cap the cell's runs occupy.
    pub fn harness(&self) -> &str {
        self.combination.harness()
    }
}

/// Computes one cell. `counts` is what the store counted for its key (absent: nothing yet).
pub fn matrix_cell(
    cell: &Cell,
    desired: i64,
    counts: &CellCounts,
    cases: &CaseFacts,
    launch: &LaunchFacts,
) -> MatrixCell {
    let unlaunchable = launch
        .check(&cell.combination)
        .err()
        .as_ref()
        .map(UnlaunchableReason::from);
    cell_of(cell, desired, counts, &CaseView::of(&cell.case, cases), unlaunchable)
}

/// What the matrix reads of a cell's pinned case, the same for every combination it crosses.
#[derive(Debug, Clone)]
pub struct CaseView {
    auto_graded: bool,
    latest_version: Option<String>,
    stale: bool,
}

impl CaseView {
    pub fn of(case: &CasePin, cases: &CaseFacts) -> Self {
        Self {
            auto_graded: cases.test_type(&case.slug, &case.version) == Some(TestType::Performance),
            latest_version: cases.latest(&case.slug).map(str::to_string),
            stale: cases.is_stale(&case.slug, &case.version),
        }
    }
}

/// Computes one cell from its case's view and its combination's launch check, each worked out once
/// for every cell that shares them ([`matrix_cell`] works both out for the one cell).
pub fn cell_of(
    cell: &Cell,
    desired: i64,
    counts: &CellCounts,
    case: &CaseView,
    unlaunchable: Option<UnlaunchableReason>,
) -> MatrixCell {
    cell_from(cell.clone(), desired, counts, case, unlaunchable)
}

/// [`cell_of`], taking the cell.
pub fn cell_from(
    cell: Cell,
    desired: i64,
    counts: &CellCounts,
    case: &CaseView,
    unlaunchable: Option<UnlaunchableReason>,
) -> MatrixCell {
    let in_flight = counts.in_flight();
    MatrixCell {
        case: cell.case,
        combination: cell.combination,
        cell_key: cell.cell_key,
        desired,
        completed: counts.completed,
        in_flight,
        pending: counts.pending(),
        unreviewed: if case.auto_graded { 0 } else { counts.unreviewed },
        remaining: (desired - (counts.completed + in_flight)).max(0),
        latest_version: case.latest_version.clone(),
        stale: case.stale,
        unlaunchable,
    }
}

/// A plan's totals over its cells.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MatrixTotals {
    pub cells: i64,
    pub desired: i64,
    pub completed: i64,
    pub in_flight: i64,
    pub pending: i64,
    pub unreviewed: i64,
    pub remaining: i64,
    /// Cells whose case has a newer version ingested.
    pub stale_cells: i64,
    /// Cells a top-up cannot launch.
    pub unlaunchable_cells: i64,
}

impl MatrixTotals {
    pub fn of<'a>(cells: impl IntoIterator<Item = &'a MatrixCell>) -> Self {
        let mut t = Self::default();
        for c in cells {
            t.cells += 1;
            t.desired += c.desired;
            t.completed += c.completed;
            t.in_flight += c.in_flight;
            t.pending += c.pending;
            t.unreviewed += c.unreviewed;
            t.remaining += c.remaining;
            t.stale_cells += i64::from(c.stale);
            t.unlaunchable_cells += i64::from(c.unlaunchable.is_some());
        }
        t
    }
}

/// `GET /coverage-plans/{id}/coverage`: every cell in the plan's outer-axis order, and totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Matrix {
    pub cells: Vec<MatrixCell>,
    pub totals: MatrixTotals,
    /// The plan's `budgetUsd`, `spentUsd` and `reservedUsd` (left at none and 0 by [`matrix`];
    /// the store fills them from the plan's row).
    #[serde(flatten, default)]
    pub spend: crate::budget::Ledger,
}

/// Computes a plan's matrix. `cells` come from [`crate::coverage::CoveragePlanInput::cells`]
/// (in walk order); `counts` holds what the store counted, keyed by cell key.
pub fn matrix(
    cells: &[Cell],
    runs_per_cell: i64,
    counts: &BTreeMap<CellKey, CellCounts>,
    cases: &CaseFacts,
    launch: &LaunchFacts,
) -> Matrix {
    let none = CellCounts::default();
    // A plan crosses a few cases with a few combinations: each case's facts and each
    // combination's launch check are worked out once, not once per cell.
    // (Looked up, never iterated: the cells' order is the plan's.)
    let mut case_views: HashMap<&CasePin, CaseView> = HashMap::new();
    let mut launch_checks: HashMap<&Combination, Option<UnlaunchableReason>> = HashMap::new();
    let cells: Vec<MatrixCell> = cells
        .iter()
        .map(|c| {
            let case = case_views
                .entry(&c.case)
                .or_insert_with(|| CaseView::of(&c.case, cases));
            let unlaunchable = launch_checks
                .entry(&c.combination)
                .or_insert_with(|| {
                    launch
                        .check(&c.combination)
                        .err()
                        .as_ref()
                        .map(UnlaunchableReason::from)
                })
                .clone();
            cell_of(
                c,
                runs_per_cell,
                counts.get(&c.cell_key).unwrap_or(&none),
                case,
                unlaunchable,
            )
        })
        .collect();
    let totals = MatrixTotals::of(&cells);
    Matrix {
        cells,
        totals,
        spend: Default::default(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalogue::GgConfigFacts;
    use crate::coverage::tests::{gg, harness, pin};
    use crate::coverage::{OuterAxis, cross};
    use crate::generator::XorShift;
    use crate::launch::tests::catalogue;
    use crate::launch::{GgConfigEntry, HarnessFacts};

    /// Harnesses `cc`, `other` and the gg lane; the launch rule's test models plus `m` (priced);
    /// the account's configuration `gg_1` with one slot `root`.
    pub fn launch_facts() -> LaunchFacts {
        let plain = HarnessFacts { provider_routed: false };
        LaunchFacts {
            harnesses: BTreeMap::from([
                ("cc".to_string(), plain),
                ("other".to_string(), plain),
                ("gg".to_string(), plain),
            ]),
            models: {
                let mut models = catalogue();
                models.insert("m".into(), models["priced"]);
                models
            },
            gg_configs: BTreeMap::from([(
                "gg_1".to_string(),
                GgConfigEntry::Live(GgConfigFacts {
                    name: "one".into(),
                    launch_slots: vec!["root".into()],
                    capabilities: serde_json::json!({}),
                }),
            )]),
        }
    }

    pub fn jobs(pairs: &[(JobStatus, i64)]) -> BTreeMap<JobStatus, i64> {
        pairs.iter().copied().collect()
    }

    fn facts() -> CaseFacts {
        CaseFacts::from_versions([
            ("snake", "1.0.0", TestType::Standard),
            ("pong", "1.0.0", TestType::Standard),
            ("bench", "1.0.0", TestType::Performance),
        ])
    }

    #[test]
    fn two_cases_by_a_harness_and_a_gg_combination_give_four_cells_each_desiring_runs_per_cell() {
        let cells = cross(
            &[pin("snake", "1.0.0"), pin("pong", "1.0.0")],
            &[harness("cc", "m"), gg("gg_1", "m")],
            OuterAxis::Case,
        );
        let m = matrix(&cells, 3, &BTreeMap::new(), &facts(), &launch_facts());
        assert_eq!(m.cells.len(), 4);
        assert!(
            m.cells
                .iter()
                .all(|c| c.desired == 3 && c.remaining == 3 && c.unlaunchable.is_none())
        );
        assert_eq!(m.totals.desired, 12);
        assert_eq!(m.totals.remaining, 12);
    }

    #[test]
    fn remaining_subtracts_completed_and_in_flight_and_pending_is_part_of_in_flight() {
        let cells = cross(&[pin("snake", "1.0.0")], &[harness("cc", "m")], OuterAxis::Case);
        let counts = BTreeMap::from([(
            cells[0].cell_key.clone(),
            CellCounts {
                completed: 1,
                unreviewed: 1,
                jobs: jobs(&[
                    (JobStatus::Queued, 1),
                    (JobStatus::Pending, 1),
                    (JobStatus::Running, 1),
                    (JobStatus::Failed, 4),
                    (JobStatus::Canceled, 2),
                    (JobStatus::Completed, 1),
                ]),
            },
        )]);
        let m = matrix(&cells, 5, &counts, &facts(), &launch_facts());
        let c = &m.cells[0];
        assert_eq!((c.completed, c.in_flight, c.pending, c.remaining), (1, 3, 1, 1));
        let m = matrix(&cells, 2, &counts, &facts(), &launch_facts());
        assert_eq!(m.cells[0].remaining, 0, "never negative");
    }

    #[test]
    fn a_performance_cells_runs_never_count_as_unreviewed() {
        let cells = cross(
            &[pin("bench", "1.0.0"), pin("snake", "1.0.0")],
            &[harness("cc", "m")],
            OuterAxis::Case,
        );
        let counts: BTreeMap<CellKey, CellCounts> = cells
            .iter()
            .map(|c| {
                (
                    c.cell_key.clone(),
                    CellCounts {
                        completed: 3,
                        unreviewed: 3,
                        jobs: BTreeMap::new(),
                    },
                )
            })
            .collect();
        let m = matrix(&cells, 3, &counts, &facts(), &launch_facts());
        assert_eq!(m.cells[0].unreviewed, 0);
        assert_eq!(m.cells[1].unreviewed, 3);
        assert_eq!(m.totals.unreviewed, 3);
    }

    #[test]
    fn ingesting_a_newer_version_sets_stale_and_leaves_desired_alone() {
        let cells = cross(&[pin("snake", "1.0.0")], &[harness("cc", "m")], OuterAxis::Case);
        let before = matrix(&cells, 3, &BTreeMap::new(), &facts(), &launch_facts());
        let newer = CaseFacts::from_versions([
            ("snake", "1.0.0", TestType::Standard),
            ("snake", "1.1.0", TestType::Standard),
        ]);
        let after = matrix(&cells, 3, &BTreeMap::new(), &newer, &launch_facts());
        assert!(!before.cells[0].stale);
        assert_eq!(before.cells[0].latest_version.as_deref(), Some("1.0.0"));
        assert!(after.cells[0].stale);
        assert_eq!(after.cells[0].latest_version.as_deref(), Some("1.1.0"));
        assert_eq!(after.cells[0].desired, before.cells[0].desired);
        assert_eq!(after.totals.stale_cells, 1);
    }

    #[test]
    fn each_launch_rule_reports_its_reason_on_the_cell() {
        let mut launch = launch_facts();
        launch.gg_configs.insert("gg_gone".into(), GgConfigEntry::Deleted);
        let two_slots = Combination::Gg {
            gg_config_id: "gg_1".into(),
            bindings: BTreeMap::new(),
        };
        let combos = [
            gg("gg_gone", "m"),
            two_slots,
            gg("gg_1", "windowless"),
            harness("cc", "unpriced"),
            harness("nope", "m"),
            harness("cc", "m"),
        ];
        let cells = cross(&[pin("snake", "1.0.0")], &combos, OuterAxis::Case);
        let m = matrix(&cells, 1, &BTreeMap::new(), &facts(), &launch);
        let codes: Vec<Option<&str>> = m
            .cells
            .iter()
            .map(|c| c.unlaunchable.as_ref().map(|u| u.code.as_str()))
            .collect();
        assert_eq!(
            codes,
            [
                Some("gg_config_deleted"),
                Some("slot_unbound"),
                Some("model_without_context_window"),
                Some("model_unpriced"),
                Some("unknown_harness"),
                None
            ]
        );
        assert!(m.cells[0].unlaunchable.as_ref().unwrap().message.contains("gg_gone"));
        assert_eq!(m.totals.unlaunchable_cells, 5);
    }

    #[test]
    fn a_cell_reads_its_own_key_only() {
        let mut godot = pin("snake", "1.0.0");
        godot.engine = "godot".into();
        let cells = cross(&[pin("snake", "1.0.0")], &[harness("cc", "m")], OuterAxis::Case);
        let other_engine = crate::job::CellKey::of(&godot, &harness("cc", "m"));
        let other_version = crate::job::CellKey::of(&pin("snake", "0.9.0"), &harness("cc", "m"));
        let some = CellCounts {
            completed: 7,
            unreviewed: 7,
            jobs: jobs(&[(JobStatus::Queued, 2)]),
        };
        let counts = BTreeMap::from([(other_engine, some.clone()), (other_version, some)]);
        let m = matrix(&cells, 3, &counts, &facts(), &launch_facts());
        assert_eq!((m.cells[0].completed, m.cells[0].in_flight), (0, 0));
    }

    #[test]
    fn the_totals_are_the_sums_of_the_cells_and_every_cell_keeps_its_identities() {
        let mut rng = XorShift(0xdead_beef_cafe_f00d);
        for _ in 0..200 {
            let cells = cross(
                &[pin("snake", "1.0.0"), pin("pong", "1.0.0"), pin("bench", "1.0.0")],
                &[harness("cc", "m"), harness("other", "m"), gg("gg_1", "m")],
                OuterAxis::Case,
            );
            let mut counts = BTreeMap::new();
            for c in &cells {
                if rng.one_in(4) {
                    continue;
                }
                let completed = rng.below(6);
                let unreviewed = rng.below(completed as u64 + 1);
                let jobs = JobStatus::ALL.iter().map(|s| (*s, rng.below(3))).collect();
                counts.insert(
                    c.cell_key.clone(),
                    CellCounts {
                        completed,
                        unreviewed,
                        jobs,
                    },
                );
            }
            let desired = rng.below(8) + 1;
            let m = matrix(&cells, desired, &counts, &facts(), &launch_facts());
            for c in &m.cells {
                assert!(c.pending <= c.in_flight);
                assert!(c.unreviewed <= c.completed);
                assert_eq!(c.remaining, (c.desired - c.completed - c.in_flight).max(0));
            }
            assert_eq!(m.totals.remaining, m.cells.iter().map(|c| c.remaining).sum::<i64>());
            assert_eq!(m.totals.in_flight, m.cells.iter().map(|c| c.in_flight).sum::<i64>());
            assert_eq!(m.totals.cells, 9);
        }
    }

    #[test]
    fn the_matrix_is_each_cell_computed_on_its_own() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut launch = launch_facts();
        launch
            .gg_configs
            .insert("gg_2".into(), crate::launch::GgConfigEntry::Deleted);
        for _ in 0..50 {
            let cases: Vec<CasePin> = ["snake", "pong", "bench", "gone"]
                .iter()
                .filter(|_| rng.one_in(2))
                .map(|s| pin(s, "1.0.0"))
                .collect();
            let combos = [
                harness("cc", "m"),
                harness("nowhere", "m"),
                gg("gg_1", "m"),
                gg("gg_2", "m"),
                harness("cc", "unpriced"),
            ];
            let cells = cross(&cases, &combos, OuterAxis::Case);
            let counts: BTreeMap<CellKey, CellCounts> = cells
                .iter()
                .map(|c| {
                    (
                        c.cell_key.clone(),
                        CellCounts {
                            completed: rng.below(4),
                            unreviewed: rng.below(3),
                            jobs: jobs(&[(JobStatus::Queued, rng.below(3))]),
                        },
                    )
                })
                .collect();
            let m = matrix(&cells, 3, &counts, &facts(), &launch);
            for (c, got) in cells.iter().zip(&m.cells) {
                assert_eq!(got, &matrix_cell(c, 3, &counts[&c.cell_key], &facts(), &launch));
            }
        }
    }
}
