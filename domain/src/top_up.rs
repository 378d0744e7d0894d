//! The top-up walk: which missing cells one top-up enqueues, in which order, and why the others
//! wait. Plans, ladders (with only each climber's current rung) and the read-only `schedule`
//! call this one function, so what a schedule promises is what a top-up does.
//!
//! The walk is the specification's six steps: cells in outer-axis order; skip a cell at its
//! target; skip an unlaunchable cell, reporting why; defer a cell whose harness is at its cap;
//! emit whole cells until outstanding reaches the buffer target (checked at cell boundaries, so
//! the last cell may overshoot); then the deferred cells in the same order. A harness's load
//! counts its jobs in every in-flight state, queued included, and grows with what this walk
//! emits: a run merely queued consumes the cap before anything enqueued after it.

use crate::budget::{Ledger, Micros};
use crate::buffer::BufferTarget;
use crate::ids::JobId;
use crate::job::{CasePin, CellKey, Combination};
use crate::matrix::{MatrixCell, UnlaunchableReason};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// One harness lane as the walk reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    /// The harness's parallelism cap.
    pub cap: i64,
    /// The harness's jobs queued, pending, dispatched, starting or running, globally (every
    /// cell, whoever launched them).
    pub load: i64,
}

/// What the walk does with a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Enqueue all the cell's missing repeats.
    Launch,
    /// Its harness is at its cap and the buffer filled before the second pass reached it.
    Defer,
    /// Nothing to do now, for the reason given.
    Skip,
}

/// Why a cell is not launched in the first pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Completed plus in-flight runs already meet the cell's target.
    AtTarget,
    /// The combination cannot be launched (the line carries the reason).
    Unlaunchable,
    /// The harness has no free slot: the cell waits for the second pass (a second-pass launch
    /// carries this reason too).
    HarnessAtCap,
    /// Outstanding reached the buffer target.
    BufferFull,
    /// Reserving the cell's estimate would pass the plan's or ladder's budget.
    Budget,
}

/// One line of `GET …/schedule`: what a top-up would do with one cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScheduleLine {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    pub case: CasePin,
    pub combination: Combination,
    pub action: Action,
    /// `null` for a first-pass launch.
    pub reason: Option<Reason>,
    pub unlaunchable: Option<UnlaunchableReason>,
    /// The cell's missing repeats: what a launch enqueues.
    pub missing: i64,
    /// For a launch: 1 (the first pass) or 2 (the deferred cells).
    pub pass: Option<u8>,
}

/// A cell a top-up emits, with all its missing repeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CellLaunch {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    pub case: CasePin,
    pub combination: Combination,
    /// How many jobs to enqueue for the cell (repeats `1..=repeats` of this top-up).
    pub repeats: i64,
    pub pass: u8,
}

/// A cell the walk would have emitted that the budget held back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeldCell {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    pub case: CasePin,
    pub combination: Combination,
    /// Always `budget`.
    pub reason: Reason,
    /// The cell's missing repeats.
    pub missing: i64,
    /// The estimate of one run of the cell (`null` when none could be made), in US dollars.
    #[serde(with = "crate::budget::usd::option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub estimate_usd: Option<Micros>,
}

/// What the budget walk reads: the plan's or ladder's ledger and each cell's estimate of one run
/// (a cell without one cannot be reserved for, so a budget holds it back).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellBudget {
    pub ledger: Ledger,
    pub estimates: BTreeMap<CellKey, Micros>,
}

/// A cell the walk met that cannot be launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UnlaunchableCell {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    pub case: CasePin,
    pub combination: Combination,
    pub unlaunchable: UnlaunchableReason,
}

/// What one top-up does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopUpPlan {
    /// The buffer target in force.
    pub buffer_target: BufferTarget,
    /// Outstanding runs observed before the walk.
    pub occupancy: i64,
    /// Cells to enqueue, in emission order (enqueue them in this order: it is execution order).
    pub launch: Vec<CellLaunch>,
    /// Cells met that cannot be launched, with why.
    pub unlaunchable: Vec<UnlaunchableCell>,
    /// One line per cell, in the walk's order: the first pass, then the deferred cells.
    pub schedule: Vec<ScheduleLine>,
    /// Jobs the launches enqueue in all.
    pub enqueued: i64,
    /// Cells the budget held back, in the walk's order.
    #[serde(default)]
    pub held: Vec<HeldCell>,
    /// What the launches reserve in all (their runs × each cell's estimate).
    #[serde(skip)]
    pub reserved: Micros,
    /// What each launch reserved for each of its runs, in `launch`'s order.
    #[serde(skip)]
    pub reservations: Vec<Micros>,
}

/// Plans one top-up. `cells` are in walk order (a plan's outer-axis order, or a ladder's emission
/// order over its climbers' current rungs); `outstanding` is [`crate::buffer::outstanding`] over
/// the cells the buffer counts (all of a plan's; every rung a ladder's climbers reached); `lanes`
/// has an entry for every harness in the catalogue (a harness without one is never deferred).
pub fn plan_top_up(
    cells: &[MatrixCell],
    target: BufferTarget,
    outstanding: i64,
    lanes: &BTreeMap<String, Lane>,
) -> TopUpPlan {
    plan_top_up_within(cells, target, outstanding, lanes, None)
}

/// [`plan_top_up`] under a budget: before a cell is emitted its estimate × its missing repeats is
/// reserved on the ledger ([`Ledger::reserve`]); a cell whose reservation would pass the budget
/// is not emitted, is reported in `held` with reason `budget`, and does not count against the
/// buffer, so a later, cheaper cell may still go out. `None`: nothing is reserved.
pub fn plan_top_up_within(
    cells: &[MatrixCell],
    target: BufferTarget,
    outstanding: i64,
    lanes: &BTreeMap<String, Lane>,
    budget: Option<CellBudget>,
) -> TopUpPlan {
    let mut walk = Walk {
        budget,
        target,
        outstanding,
        load: lanes.iter().map(|(h, l)| (h.as_str(), l.load)).collect(),
        plan: TopUpPlan {
            buffer_target: target,
            occupancy: outstanding,
            launch: Vec::new(),
            unlaunchable: Vec::new(),
            schedule: Vec::with_capacity(cells.len()),
            enqueued: 0,
            held: Vec::new(),
            reserved: Micros::ZERO,
            reservations: Vec::new(),
        },
    };
    let mut deferred = Vec::new();
    for cell in cells {
        if cell.remaining == 0 {
            walk.line(cell, Action::Skip, Some(Reason::AtTarget), None);
        } else if let Some(why) = &cell.unlaunchable {
            walk.plan.unlaunchable.push(UnlaunchableCell {
                cell_key: cell.cell_key.clone(),
                case: cell.case.clone(),
                combination: cell.combination.clone(),
                unlaunchable: why.clone(),
            });
            walk.line(cell, Action::Skip, Some(Reason::Unlaunchable), None);
        } else if lanes
            .get(cell.harness())
            .is_some_and(|lane| walk.load[cell.harness()] >= lane.cap)
        {
            deferred.push(cell);
        } else if target.is_full(walk.outstanding) {
            walk.line(cell, Action::Skip, Some(Reason::BufferFull), None);
        } else {
            walk.launch(cell, 1);
        }
    }
    for cell in deferred {
        if target.is_full(walk.outstanding) {
            walk.line(cell, Action::Defer, Some(Reason::HarnessAtCap), None);
        } else {
            walk.launch(cell, 2);
        }
    }
    walk.plan
}

struct Walk<'a> {
    budget: Option<CellBudget>,
    target: BufferTarget,
    outstanding: i64,
    load: BTreeMap<&'a str, i64>,
    plan: TopUpPlan,
}

impl<'a> Walk<'a> {
    fn line(&mut self, cell: &MatrixCell, action: Action, reason: Option<Reason>, pass: Option<u8>) {
        let unlaunchable = if reason == Some(Reason::Unlaunchable) {
            cell.unlaunchable.clone()
        } else {
            None
        };
        self.plan.schedule.push(ScheduleLine {
            cell_key: cell.cell_key.clone(),
            case: cell.case.clone(),
            combination: cell.combination.clone(),
            action,
            reason,
            unlaunchable,
            missing: cell.remaining,
            pass,
        });
    }

    fn launch(&mut self, cell: &'a MatrixCell, pass: u8) {
        debug_assert!(!self.target.is_full(self.outstanding));
        let Some(each) = self.reserve(cell) else {
            return;
        };
        self.plan.reservations.push(each);
        self.outstanding += cell.remaining;
        self.plan.enqueued += cell.remaining;
        if let Some(load) = self.load.get_mut(cell.harness()) {
            *load += cell.remaining;
        }
        self.plan.launch.push(CellLaunch {
            cell_key: cell.cell_key.clone(),
            case: cell.case.clone(),
            combination: cell.combination.clone(),
            repeats: cell.remaining,
            pass,
        });
        let reason = (pass == 2).then_some(Reason::HarnessAtCap);
        self.line(cell, Action::Launch, reason, Some(pass));
    }

    /// Reserves the cell's estimate × its missing repeats on the budget's ledger and answers the
    /// estimate of each run; `None` (the cell held back, its line and its `held` entry written)
    /// when that would pass the budget or there is no estimate to reserve under a budget.
    fn reserve(&mut self, cell: &MatrixCell) -> Option<Micros> {
        let Some(budget) = &mut self.budget else {
            return Some(Micros::ZERO);
        };
        let estimate = budget.estimates.get(&cell.cell_key).copied();
        let each = match estimate {
            Some(e) => e,
            // Without a budget there is nothing to hold a cell to.
            None if budget.ledger.budget.is_none() => Micros::ZERO,
            None => {
                self.hold(cell, None);
                return None;
            }
        };
        let amount = each.times(cell.remaining);
        if !budget.ledger.reserve(amount) {
            self.hold(cell, estimate);
            return None;
        }
        self.plan.reserved = self.plan.reserved.saturating_add(amount);
        Some(each)
    }

    fn hold(&mut self, cell: &MatrixCell, estimate: Option<Micros>) {
        self.plan.held.push(HeldCell {
            cell_key: cell.cell_key.clone(),
            case: cell.case.clone(),
            combination: cell.combination.clone(),
            reason: Reason::Budget,
            missing: cell.remaining,
            estimate_usd: estimate,
        });
        self.line(cell, Action::Skip, Some(Reason::Budget), None);
    }
}

/// What asks for a top-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `POST …/topup`.
    Requested,
    /// A ladder is enabled (`PUT` with `enabled: true`, or `POST …/enable`).
    Enabled,
    /// A plan is opened (`POST /coverage-plans/{id}/open`); a ladder's open is a read.
    Opened,
    /// A review of one of the plan's or ladder's runs was submitted.
    ReviewSubmitted,
}

/// What a top-up feeds: a coverage plan or a ladder. The one "plan or ladder" of every layer:
/// the workflow's input (`plan` by default, all that histories recorded before ladders carry),
/// the claim's row, the metrics' label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feed {
    #[default]
    Plan,
    Ladder,
}

impl Feed {
    /// `plan` or `ladder`, as the workflow input and the metrics write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Feed::Plan => "plan",
            Feed::Ladder => "ladder",
        }
    }
}

/// Whether `trigger` starts a top-up. A requested top-up (and a ladder's enable) always runs, and
/// answers `skipped: "paused"` itself when the plan is paused or the ladder disabled. The
/// automatic triggers start one only with `autoTopUp` on, on a plan not paused (a ladder
/// enabled), under a target that is not a bound of 0; opening a ladder never starts one.
/// `paused` is a plan's `paused`, or a ladder's `!enabled`.
pub fn starts_top_up(feed: Feed, trigger: Trigger, auto_top_up: bool, paused: bool, target: BufferTarget) -> bool {
    match trigger {
        Trigger::Requested | Trigger::Enabled => true,
        Trigger::Opened if feed == Feed::Ladder => false,
        Trigger::Opened | Trigger::ReviewSubmitted => auto_top_up && !paused && !target.is_zero(),
    }
}

/// Why a top-up did not run. One that ran and enqueued nothing is not skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// Another top-up of the same plan or ladder holds the claim.
    Busy,
    /// The plan is paused, or the ladder disabled.
    Paused,
    /// It ran, and emitted nothing because every cell it would have emitted would have passed
    /// the budget (they are listed in `held`).
    Budget,
}

/// A cell a top-up enqueued, with the ids of the jobs it enqueued for it (in emission order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LaunchedCell {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    pub case: CasePin,
    pub combination: Combination,
    /// 1 (the first pass) or 2 (a cell deferred because its harness was at its cap).
    pub pass: u8,
    pub job_ids: Vec<JobId>,
}

/// `POST …/topup`: what one top-up did, or why it did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopUpAnswer {
    /// The buffer target in force.
    pub buffer_target: BufferTarget,
    /// Outstanding runs the top-up observed before it enqueued (null when it did not run).
    pub occupancy: Option<i64>,
    /// The cells it enqueued, in emission order, with their job ids.
    pub launched: Vec<LaunchedCell>,
    /// The cells it could not launch, with why.
    pub unlaunchable: Vec<UnlaunchableCell>,
    /// The cells the budget held back (reason `budget`), in the walk's order.
    #[serde(default)]
    pub held: Vec<HeldCell>,
    /// `null` when it ran (even if it enqueued nothing); `busy` or `paused` when it did not;
    /// `budget` when it ran and the budget held back every cell it would have emitted.
    pub skipped: Option<Skipped>,
    /// Jobs enqueued in all.
    pub enqueued: i64,
}

impl TopUpAnswer {
    /// The answer of a top-up that did not run.
    pub fn skipped(buffer_target: BufferTarget, why: Skipped) -> Self {
        Self {
            buffer_target,
            occupancy: None,
            launched: Vec::new(),
            unlaunchable: Vec::new(),
            held: Vec::new(),
            skipped: Some(why),
            enqueued: 0,
        }
    }

    /// The answer of a top-up that ran `plan` and enqueued `job_ids` for each of its launches
    /// (same order, one id list per launch).
    pub fn ran(plan: TopUpPlan, job_ids: Vec<Vec<JobId>>) -> Self {
        let enqueued = job_ids.iter().map(|ids| ids.len() as i64).sum();
        let skipped = (plan.launch.is_empty() && !plan.held.is_empty()).then_some(Skipped::Budget);
        Self {
            buffer_target: plan.buffer_target,
            occupancy: Some(plan.occupancy),
            launched: plan
                .launch
                .into_iter()
                .zip(job_ids)
                .map(|(l, job_ids)| LaunchedCell {
                    cell_key: l.cell_key,
                    case: l.case,
                    combination: l.combination,
                    pass: l.pass,
                    job_ids,
                })
                .collect(),
            unlaunchable: plan.unlaunchable,
            held: plan.held,
            skipped,
            enqueued,
        }
    }
}

/// The natural key of one repeat (1-based) of one cell of one top-up: a retried enqueue inserts
/// nothing twice.
pub fn topup_job_key(topup_id: &str, cell: &CellKey, repeat: i64) -> String {
    format!("{topup_id}/{}/{repeat}", cell.0)
}

/// The jobs one launch of a top-up enqueues, repeat `1..=repeats` in order. Each inherits its
/// cell's case and combination, the launching account and the plan or ladder it came from, and,
/// as they stand at launch, the case version's test type and (for a `gg` combination whose
/// configuration is live) the configuration's name and capability set. A job is always a first
/// attempt.
pub fn launch_jobs(
    launch: &CellLaunch,
    facts: &crate::launch::LaunchFacts,
    cases: &crate::catalogue::CaseFacts,
    account_id: &crate::ids::AccountId,
    origin: &crate::job::Origin,
) -> Vec<crate::job::NewJob> {
    let gg = match &launch.combination {
        Combination::Gg { gg_config_id, .. } => match facts.gg_configs.get(gg_config_id) {
            Some(crate::launch::GgConfigEntry::Live(g)) => Some(g),
            _ => None,
        },
        Combination::Harness { .. } => None,
    };
    let test_type = cases.test_type(&launch.case.slug, &launch.case.version);
    (1..=launch.repeats)
        .map(|_| crate::job::NewJob {
            case: launch.case.clone(),
            combination: launch.combination.clone(),
            gg_config_name: gg.map(|g| g.name.clone()),
            capabilities: gg.map(|g| g.capabilities.clone()),
            test_type,
            user_id: Some(account_id.clone()),
            origin: Some(origin.clone()),
            attempt: 1,
            retry_of: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A top-up's jobs inherit the cell, the account and the origin, and what the launch saw of
    /// the case's test type and the gg configuration; a deleted configuration gives neither its
    /// name nor its capabilities.
    #[test]
    fn launched_jobs_inherit_the_cell_the_account_the_origin_and_the_launch_facts() {
        use crate::catalogue::{CaseFacts, GgConfigFacts, TestType};
        use crate::launch::{GgConfigEntry, LaunchFacts};
        let case = CasePin {
            slug: "snake".into(),
            version: "1.0.0".into(),
            variant: "default".into(),
            engine: "none".into(),
        };
        let mut cases = CaseFacts::default();
        cases
            .test_types
            .insert(("snake".into(), "1.0.0".into()), TestType::GameJam);
        let mut facts = LaunchFacts::default();
        let caps = serde_json::json!({"web": true});
        facts.gg_configs.insert(
            "gg_live".into(),
            GgConfigEntry::Live(GgConfigFacts {
                name: "two-agents".into(),
                launch_slots: vec!["a".into()],
                capabilities: caps.clone(),
            }),
        );
        facts.gg_configs.insert("gg_gone".into(), GgConfigEntry::Deleted);
        let launch = |combination: Combination, repeats: i64| CellLaunch {
            cell_key: CellKey("k".to_owned()),
            case: case.clone(),
            combination,
            repeats,
            pass: 1,
        };
        let account = crate::ids::AccountId::from("acct_1");
        let origin = crate::job::Origin::Plan("plan_1".into());
        let gg = |id: &str| Combination::Gg {
            gg_config_id: id.into(),
            bindings: [("a".to_owned(), "m".to_owned())].into(),
        };

        let jobs = launch_jobs(&launch(gg("gg_live"), 3), &facts, &cases, &account, &origin);
        assert_eq!(jobs.len(), 3);
        for j in &jobs {
            assert_eq!(j.case, case);
            assert_eq!(j.gg_config_name.as_deref(), Some("two-agents"));
            assert_eq!(j.capabilities.as_ref(), Some(&caps));
            assert_eq!(j.test_type, Some(TestType::GameJam));
            assert_eq!(j.user_id.as_ref(), Some(&account));
            assert_eq!(j.origin.as_ref(), Some(&origin));
            assert_eq!((j.attempt, j.retry_of.is_none()), (1, true));
        }

        let gone = launch_jobs(&launch(gg("gg_gone"), 1), &facts, &cases, &account, &origin);
        assert_eq!(
            (gone[0].gg_config_name.clone(), gone[0].capabilities.clone()),
            (None, None)
        );

        let harness = Combination::Harness {
            harness: "script".into(),
            model: "m".into(),
            provider: None,
        };
        let plain = launch_jobs(&launch(harness, 2), &facts, &CaseFacts::default(), &account, &origin);
        assert_eq!(plain.len(), 2);
        assert_eq!((plain[0].gg_config_name.clone(), plain[0].test_type), (None, None));
        assert!(launch_jobs(&launch(gg("gg_live"), 0), &facts, &cases, &account, &origin).is_empty());
    }
    use crate::coverage::tests::{gg, harness, pin};
    use crate::generator::XorShift;
    use crate::job::CellKey;

    /// A cell of `harness`, `remaining` missing repeats of `desired`.
    fn cell(case: &str, harness_name: &str, desired: i64, remaining: i64) -> MatrixCell {
        let combination = if harness_name == "gg" {
            gg("gg_1", "m")
        } else {
            harness(harness_name, "m")
        };
        let case = pin(case, "1.0.0");
        MatrixCell {
            cell_key: CellKey::of(&case, &combination),
            case,
            combination,
            desired,
            completed: desired - remaining,
            in_flight: 0,
            pending: 0,
            unreviewed: 0,
            remaining,
            latest_version: Some("1.0.0".into()),
            stale: false,
            unlaunchable: None,
        }
    }

    fn lanes(spec: &[(&str, i64, i64)]) -> BTreeMap<String, Lane> {
        spec.iter()
            .map(|(h, cap, load)| (h.to_string(), Lane { cap: *cap, load: *load }))
            .collect()
    }

    fn launched(plan: &TopUpPlan) -> Vec<String> {
        plan.launch
            .iter()
            .map(|l| l.case.slug.clone() + "/" + l.combination.harness())
            .collect()
    }

    const BOUNDED_4: BufferTarget = BufferTarget::Bounded { runs: 4 };

    #[test]
    fn bounded_four_with_three_runs_per_cell_and_three_idle_cells_launches_two_cells_then_nothing_until_reviews_land() {
        let idle = lanes(&[("cc", 100, 0)]);
        let cells = [cell("a", "cc", 3, 3), cell("b", "cc", 3, 3), cell("c", "cc", 3, 3)];
        let first = plan_top_up(&cells, BOUNDED_4, 0, &idle);
        assert_eq!(launched(&first), ["a/cc", "b/cc"]);
        assert_eq!(first.enqueued, 6);
        assert_eq!(first.schedule[2].reason, Some(Reason::BufferFull));

        // The six jobs landed: they are in flight (then completed, unreviewed) and fill the buffer.
        let mut cells = cells;
        for c in &mut cells[..2] {
            c.in_flight = 3;
            c.remaining = 0;
        }
        let second = plan_top_up(&cells, BOUNDED_4, 6, &lanes(&[("cc", 100, 6)]));
        assert_eq!(second.enqueued, 0);
        assert_eq!(second.occupancy, 6);
        // Four of them reviewed: two outstanding, so the third cell goes out.
        let third = plan_top_up(&cells, BOUNDED_4, 2, &lanes(&[("cc", 100, 0)]));
        assert_eq!(launched(&third), ["c/cc"]);
    }

    #[test]
    fn a_cells_repeats_are_emitted_whole_so_the_target_is_overshot_by_at_most_one_cell() {
        let cells = [cell("a", "cc", 5, 5), cell("b", "cc", 5, 5)];
        let plan = plan_top_up(&cells, BufferTarget::Bounded { runs: 1 }, 0, &lanes(&[("cc", 100, 0)]));
        assert_eq!(plan.launch.len(), 1);
        assert_eq!(plan.launch[0].repeats, 5);
        assert_eq!(plan.enqueued, 5);
    }

    #[test]
    fn harness_x_at_its_cap_and_y_idle_emits_ys_later_cells_first_and_xs_in_the_second_pass_in_plan_order() {
        let cells = [
            cell("a", "x", 2, 2),
            cell("a", "y", 2, 2),
            cell("b", "x", 2, 2),
            cell("b", "y", 2, 2),
        ];
        let plan = plan_top_up(
            &cells,
            BufferTarget::Unbounded {},
            0,
            &lanes(&[("x", 2, 2), ("y", 10, 0)]),
        );
        assert_eq!(launched(&plan), ["a/y", "b/y", "a/x", "b/x"]);
        assert_eq!(plan.launch.iter().map(|l| l.pass).collect::<Vec<_>>(), [1, 1, 2, 2]);
        assert_eq!(plan.schedule[2].reason, Some(Reason::HarnessAtCap));

        // With a buffer of 4 the idle harness takes it all and X's cells wait, reported deferred.
        let plan = plan_top_up(&cells, BOUNDED_4, 0, &lanes(&[("x", 2, 2), ("y", 10, 0)]));
        assert_eq!(launched(&plan), ["a/y", "b/y"]);
        let deferred: Vec<&str> = plan
            .schedule
            .iter()
            .filter(|l| l.action == Action::Defer)
            .map(|l| l.cell_key.0.as_str())
            .collect();
        assert_eq!(deferred, [cells[0].cell_key.0.as_str(), cells[2].cell_key.0.as_str()]);
    }

    #[test]
    fn queued_jobs_count_against_the_cap_including_those_this_walk_emits() {
        // cap 2, nothing running: the first x cell fills the lane, so the walk serves y next.
        let cells = [cell("a", "x", 2, 2), cell("b", "x", 2, 2), cell("c", "y", 2, 2)];
        let plan = plan_top_up(
            &cells,
            BufferTarget::Unbounded {},
            0,
            &lanes(&[("x", 2, 0), ("y", 2, 0)]),
        );
        assert_eq!(launched(&plan), ["a/x", "c/y", "b/x"]);
    }

    #[test]
    fn every_gg_configuration_shares_the_one_gg_lane() {
        let cells = [cell("a", "gg", 1, 1), cell("b", "gg", 1, 1), cell("c", "cc", 1, 1)];
        let plan = plan_top_up(
            &cells,
            BufferTarget::Unbounded {},
            0,
            &lanes(&[("gg", 1, 0), ("cc", 5, 0)]),
        );
        assert_eq!(launched(&plan), ["a/gg", "c/cc", "b/gg"]);
    }

    #[test]
    fn a_bound_of_zero_never_tops_up_and_unbounded_emits_every_missing_cell() {
        let cells = [cell("a", "cc", 3, 3), cell("b", "cc", 3, 0), cell("c", "cc", 3, 1)];
        let zero = plan_top_up(&cells, BufferTarget::Bounded { runs: 0 }, 0, &lanes(&[("cc", 1, 0)]));
        assert_eq!(zero.enqueued, 0);
        assert!(zero.launch.is_empty());
        let all = plan_top_up(&cells, BufferTarget::Unbounded {}, 1_000, &lanes(&[("cc", 1, 0)]));
        assert_eq!(launched(&all), ["a/cc", "c/cc"]);
        assert_eq!(all.enqueued, 4);
    }

    #[test]
    fn cells_at_target_and_unlaunchable_cells_are_skipped_with_their_reasons() {
        let mut broken = cell("b", "cc", 3, 3);
        broken.unlaunchable = Some(UnlaunchableReason {
            code: "gg_config_deleted".into(),
            message: "gg configuration gg_1 was deleted".into(),
        });
        let cells = [cell("a", "cc", 3, 0), broken, cell("c", "cc", 3, 3)];
        let plan = plan_top_up(&cells, BufferTarget::Unbounded {}, 0, &lanes(&[("cc", 10, 0)]));
        assert_eq!(launched(&plan), ["c/cc"]);
        assert_eq!(plan.unlaunchable.len(), 1);
        assert_eq!(plan.unlaunchable[0].unlaunchable.code, "gg_config_deleted");
        let reasons: Vec<Option<Reason>> = plan.schedule.iter().map(|l| l.reason).collect();
        assert_eq!(reasons, [Some(Reason::AtTarget), Some(Reason::Unlaunchable), None]);
        assert_eq!(
            plan.schedule[1].unlaunchable.as_ref().map(|u| u.code.as_str()),
            Some("gg_config_deleted")
        );
    }

    #[test]
    fn the_schedule_reads_as_the_api_shows_it() {
        let plan = plan_top_up(
            &[cell("a", "cc", 2, 2)],
            BufferTarget::Unbounded {},
            0,
            &lanes(&[("cc", 1, 0)]),
        );
        let line = serde_json::to_value(&plan.schedule[0]).unwrap();
        assert_eq!(line["action"], "launch");
        assert_eq!(line["reason"], serde_json::Value::Null);
        assert_eq!(line["missing"], 2);
        assert_eq!(line["cellKey"], "a@1.0.0/default/none × cc/m");
        let answer = serde_json::to_value(&plan).unwrap();
        assert_eq!(answer["bufferTarget"], serde_json::json!({"kind": "unbounded"}));
        assert_eq!(answer["enqueued"], 2);
    }

    #[test]
    fn automatic_triggers_respect_auto_top_up_pause_and_a_zero_bound_and_a_ladder_open_is_a_read() {
        let ten = BufferTarget::Bounded { runs: 10 };
        let zero = BufferTarget::Bounded { runs: 0 };
        assert!(starts_top_up(Feed::Plan, Trigger::Opened, true, false, ten));
        assert!(!starts_top_up(Feed::Plan, Trigger::Opened, false, false, ten));
        assert!(!starts_top_up(Feed::Plan, Trigger::ReviewSubmitted, true, true, ten));
        assert!(!starts_top_up(Feed::Plan, Trigger::ReviewSubmitted, true, false, zero));
        assert!(starts_top_up(Feed::Plan, Trigger::Requested, false, true, zero));
        assert!(!starts_top_up(Feed::Ladder, Trigger::Opened, true, false, ten));
        assert!(starts_top_up(Feed::Ladder, Trigger::ReviewSubmitted, true, false, ten));
        assert!(!starts_top_up(Feed::Ladder, Trigger::ReviewSubmitted, true, true, ten));
        assert!(starts_top_up(Feed::Ladder, Trigger::Enabled, false, false, ten));
        assert_eq!(serde_json::to_value(Skipped::Busy).unwrap(), "busy");
    }

    #[test]
    fn the_walk_keeps_its_invariants_on_any_plan() {
        let mut rng = XorShift(0x0123_4567_89ab_cdef);
        let harnesses = ["x", "y", "gg"];
        for _ in 0..2_000 {
            let cells: Vec<MatrixCell> = (0..rng.below(12))
                .map(|i| {
                    let h = harnesses[rng.below(3) as usize];
                    let desired = rng.below(4) + 1;
                    let mut c = cell(&format!("c{i}"), h, desired, rng.below(desired as u64 + 1));
                    if rng.one_in(6) {
                        c.unlaunchable = Some(UnlaunchableReason {
                            code: "model_unpriced".into(),
                            message: "no price".into(),
                        });
                    }
                    c
                })
                .collect();
            let lanes: BTreeMap<String, Lane> = harnesses
                .iter()
                .map(|h| {
                    (
                        h.to_string(),
                        Lane {
                            cap: rng.below(4) + 1,
                            load: rng.below(5),
                        },
                    )
                })
                .collect();
            let target = if rng.one_in(4) {
                BufferTarget::Unbounded {}
            } else {
                BufferTarget::Bounded { runs: rng.below(12) }
            };
            let outstanding = rng.below(8);
            let plan = plan_top_up(&cells, target, outstanding, &lanes);

            // Every cell gets exactly one line; launches are the launch lines, in the same order.
            assert_eq!(plan.schedule.len(), cells.len());
            let launch_lines: Vec<&CellKey> = plan
                .schedule
                .iter()
                .filter(|l| l.action == Action::Launch)
                .map(|l| &l.cell_key)
                .collect();
            assert_eq!(
                launch_lines,
                plan.launch.iter().map(|l| &l.cell_key).collect::<Vec<_>>()
            );
            let by_key: BTreeMap<&CellKey, &MatrixCell> = cells.iter().map(|c| (&c.cell_key, c)).collect();
            // Whole cells only, never a cell at target or unlaunchable.
            for l in &plan.launch {
                let c = by_key[&l.cell_key];
                assert!(c.remaining > 0 && c.unlaunchable.is_none());
                assert_eq!(l.repeats, c.remaining);
            }
            assert_eq!(plan.enqueued, plan.launch.iter().map(|l| l.repeats).sum::<i64>());
            // Each emission happened below the target: the overshoot is at most the last cell.
            let mut seen = outstanding;
            for l in &plan.launch {
                assert!(!target.is_full(seen));
                seen += l.repeats;
            }
            // A launchable missing cell is left behind only when the buffer is full.
            let left = cells.iter().any(|c| {
                c.remaining > 0 && c.unlaunchable.is_none() && !plan.launch.iter().any(|l| l.cell_key == c.cell_key)
            });
            assert!(!left || target.is_full(seen));
            if target == (BufferTarget::Unbounded {}) {
                assert!(!left, "unbounded emits every missing cell");
            }
            // Within one harness the plan's order holds.
            for h in harnesses {
                let walk: Vec<&CellKey> = cells
                    .iter()
                    .filter(|c| c.harness() == h)
                    .map(|c| &c.cell_key)
                    .filter(|k| plan.launch.iter().any(|l| &&l.cell_key == k))
                    .collect();
                let emitted: Vec<&CellKey> = plan
                    .launch
                    .iter()
                    .filter(|l| l.combination.harness() == h)
                    .map(|l| &l.cell_key)
                    .collect();
                assert_eq!(walk, emitted);
            }
        }
    }

    #[test]
    fn an_answer_pairs_each_launch_with_its_job_ids_in_emission_order() {
        let cells = [cell("a", "cc", 2, 2), cell("b", "cc", 2, 1)];
        let plan = plan_top_up(&cells, BufferTarget::Unbounded {}, 0, &BTreeMap::new());
        let answer = TopUpAnswer::ran(plan, vec![vec!["j1".into(), "j2".into()], vec!["j3".into()]]);
        assert_eq!(answer.enqueued, 3);
        assert_eq!(answer.skipped, None);
        assert_eq!(answer.occupancy, Some(0));
        assert_eq!(answer.launched[1].job_ids, ["j3"]);
        assert_eq!(answer.launched[0].cell_key, cells[0].cell_key);
        let busy = TopUpAnswer::skipped(BufferTarget::Bounded { runs: 3 }, Skipped::Busy);
        assert_eq!((busy.occupancy, busy.enqueued), (None, 0));
        assert_eq!(
            serde_json::to_value(&busy).unwrap()["skipped"],
            serde_json::json!("busy")
        );
        assert_ne!(
            topup_job_key("t", &cells[0].cell_key, 1),
            topup_job_key("t", &cells[0].cell_key, 2)
        );
    }

    fn budget(usd: f64, estimates: &[(&MatrixCell, f64)]) -> CellBudget {
        CellBudget {
            ledger: crate::budget::Ledger {
                budget: (usd >= 0.0).then_some(Micros((usd * 1e6) as i64)),
                ..Default::default()
            },
            estimates: estimates
                .iter()
                .map(|(c, e)| (c.cell_key.clone(), Micros((e * 1e6) as i64)))
                .collect(),
        }
    }

    #[test]
    fn a_budget_of_three_runs_emits_three_cells_then_holds_the_rest_with_reason_budget() {
        let cells: Vec<MatrixCell> = (0..5).map(|i| cell(&format!("c{i}"), "cc", 1, 1)).collect();
        let est: Vec<(&MatrixCell, f64)> = cells.iter().map(|c| (c, 1.0)).collect();
        let idle = lanes(&[("cc", 100, 0)]);
        let plan = plan_top_up_within(&cells, BufferTarget::Unbounded {}, 0, &idle, Some(budget(3.0, &est)));
        assert_eq!(launched(&plan), ["c0/cc", "c1/cc", "c2/cc"]);
        assert_eq!(plan.reserved, Micros(3_000_000));
        assert_eq!(plan.held.len(), 2);
        assert_eq!(plan.held[0].reason, Reason::Budget);
        assert_eq!(plan.held[0].estimate_usd, Some(Micros(1_000_000)));
        assert_eq!(plan.schedule[3].reason, Some(Reason::Budget));
        assert_eq!(plan.schedule[3].action, Action::Skip);
        let answer = TopUpAnswer::ran(plan, vec![vec!["j".into()]; 3]);
        assert_eq!(answer.skipped, None, "it emitted something");
        let v = serde_json::to_value(&answer).unwrap();
        assert_eq!(v["held"][0]["reason"], "budget");
        assert_eq!(v["held"][0]["estimateUsd"], 1.0);

        // The next top-up: the first three are in flight and reserved; nothing more fits.
        let mut next = budget(3.0, &est);
        next.ledger.reserved = Micros(3_000_000);
        let plan = plan_top_up_within(&cells[3..], BufferTarget::Unbounded {}, 3, &idle, Some(next.clone()));
        assert!(plan.launch.is_empty());
        let answer = TopUpAnswer::ran(plan, vec![]);
        assert_eq!(answer.skipped, Some(Skipped::Budget));
        assert_eq!(serde_json::to_value(&answer).unwrap()["skipped"], "budget");

        // Raising the budget lets the next one continue.
        next.ledger.budget = Some(Micros(5_000_000));
        let plan = plan_top_up_within(&cells[3..], BufferTarget::Unbounded {}, 3, &idle, Some(next));
        assert_eq!(launched(&plan), ["c3/cc", "c4/cc"]);
    }

    #[test]
    fn a_held_cell_does_not_fill_the_buffer_and_a_cheaper_later_cell_still_goes_out() {
        let cells = [cell("a", "cc", 3, 3), cell("b", "cc", 1, 1), cell("c", "cc", 1, 1)];
        let b = budget(2.0, &[(&cells[0], 1.0), (&cells[1], 1.5), (&cells[2], 0.5)]);
        let plan = plan_top_up_within(&cells, BOUNDED_4, 0, &lanes(&[("cc", 100, 0)]), Some(b));
        // a (3 × $1) does not fit $2; b ($1.5) does; c ($0.5) fits what is left.
        assert_eq!(launched(&plan), ["b/cc", "c/cc"]);
        assert_eq!(plan.held.iter().map(|h| h.missing).collect::<Vec<_>>(), [3]);
        assert_eq!(plan.reserved, Micros(2_000_000));
    }

    #[test]
    fn the_second_pass_reserves_too_and_a_cell_without_an_estimate_is_held_only_under_a_budget() {
        let cells = [cell("a", "x", 1, 1), cell("b", "y", 1, 1), cell("c", "y", 1, 1)];
        let busy_x = lanes(&[("x", 1, 1), ("y", 10, 0)]);
        // x is at its cap: a is deferred to the second pass, where the budget is spent already.
        let b = budget(2.0, &[(&cells[0], 1.0), (&cells[1], 1.0), (&cells[2], 1.0)]);
        let plan = plan_top_up_within(&cells, BufferTarget::Unbounded {}, 0, &busy_x, Some(b));
        assert_eq!(launched(&plan), ["b/y", "c/y"]);
        assert_eq!(plan.held[0].cell_key, cells[0].cell_key);
        // No estimate for c: held under a budget, emitted without one (reserving nothing).
        let b = budget(10.0, &[(&cells[0], 1.0), (&cells[1], 1.0)]);
        let plan = plan_top_up_within(&cells, BufferTarget::Unbounded {}, 0, &busy_x, Some(b));
        assert_eq!(launched(&plan), ["b/y", "a/x"]);
        assert_eq!(plan.held[0].estimate_usd, None);
        let unbudgeted = budget(-1.0, &[(&cells[0], 1.0), (&cells[1], 1.0)]);
        let plan = plan_top_up_within(&cells, BufferTarget::Unbounded {}, 0, &busy_x, Some(unbudgeted));
        assert_eq!(launched(&plan), ["b/y", "c/y", "a/x"]);
        assert_eq!(plan.reserved, Micros(2_000_000));
        assert!(plan.held.is_empty());
    }

    #[test]
    fn without_a_budget_the_walk_is_the_unbudgeted_walk() {
        let mut rng = XorShift(0x5eed_1234_abcd_0042);
        for _ in 0..500 {
            let cells: Vec<MatrixCell> = (0..rng.below(10))
                .map(|i| {
                    let d = rng.below(3) + 1;
                    cell(
                        &format!("c{i}"),
                        ["x", "y"][rng.below(2) as usize],
                        d,
                        rng.below(d as u64 + 1),
                    )
                })
                .collect();
            let l = lanes(&[("x", rng.below(3) + 1, rng.below(3)), ("y", rng.below(3) + 1, 0)]);
            let target = BufferTarget::Bounded { runs: rng.below(8) };
            let est: Vec<(&MatrixCell, f64)> = cells.iter().map(|c| (c, 0.5)).collect();
            let plain = plan_top_up(&cells, target, 0, &l);
            let within = plan_top_up_within(&cells, target, 0, &l, Some(budget(-1.0, &est)));
            assert_eq!(plain.launch, within.launch);
            assert_eq!(plain.schedule, within.schedule);
        }
    }

    proptest::proptest! {
        /// Whatever the cells, lanes, buffer and budget: what the walk reserves never takes the
        /// ledger past its budget, each launch reserved its whole cell, every held cell is
        /// reported once with reason budget, and no cell is both launched and held.
        #[test]
        fn a_budgeted_walk_never_reserves_past_the_budget(
            seed in 1u64..u64::MAX,
            budget_micros in 0i64..8_000_000,
            spent in 0i64..3_000_000,
        ) {
            let mut rng = XorShift(seed);
            let cells: Vec<MatrixCell> = (0..rng.below(12))
                .map(|i| {
                    let d = rng.below(4) + 1;
                    cell(&format!("c{i}"), ["x", "y", "gg"][rng.below(3) as usize], d, rng.below(d as u64 + 1))
                })
                .collect();
            let mut estimates: BTreeMap<CellKey, Micros> = BTreeMap::new();
            for c in &cells {
                if !rng.one_in(8) {
                    estimates.insert(c.cell_key.clone(), Micros(rng.below(2_000_000)));
                }
            }
            let l = lanes(&[("x", rng.below(3) + 1, rng.below(4)), ("y", 2, 0), ("gg", 1, 0)]);
            let target = if rng.one_in(3) { BufferTarget::Unbounded {} } else { BufferTarget::Bounded { runs: rng.below(10) } };
            let b = CellBudget {
                ledger: crate::budget::Ledger { budget: Some(Micros(budget_micros)), spent: Micros(spent), reserved: Micros::ZERO },
                estimates: estimates.clone(),
            };
            let plan = plan_top_up_within(&cells, target, 0, &l, Some(b));
            let reserved: i64 = plan.launch.iter().map(|l| estimates.get(&l.cell_key).map_or(0, |e| e.0) * l.repeats).sum();
            proptest::prop_assert_eq!(plan.reserved.0, reserved);
            proptest::prop_assert!(reserved == 0 || spent + reserved <= budget_micros);
            for h in &plan.held {
                proptest::prop_assert_eq!(h.reason, Reason::Budget);
                proptest::prop_assert!(!plan.launch.iter().any(|l| l.cell_key == h.cell_key));
            }
            let lines = plan.schedule.iter().filter(|l| l.reason == Some(Reason::Budget)).count();
            proptest::prop_assert_eq!(lines, plan.held.len());
            proptest::prop_assert_eq!(plan.schedule.len(), cells.len());
        }
    }
}
