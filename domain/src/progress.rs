//! Where each climber of a ladder stands: the board of `GET /ladders/{id}/progress`, the cells a
//! ladder top-up may launch and the cells its buffer and queue count, the verdicts a top-up
//! persists and the jobs an early stop cancels.
//!
//! The board is computed live from the evidence, never from a stored pointer: a climber stands
//! on the first rung, in the ladder's current order, whose governing outcome is not an advance.
//! So a reorder moves nobody's history (verdicts stay with their rung ids), a climber added late
//! starts at rung one, and a verdict the gate has just reached shows at once, flagged
//! `recorded: false` until a top-up writes it. Every verdict is keyed by the exact case version
//! it was decided against: bumping a rung keeps the old verdict, flagged stale and no longer
//! governing, and re-opens the rung; pinning back restores it. An override sits beside the
//! gate's verdict and governs while it is set; clearing it restores what the gate says.

use crate::catalogue::CaseFacts;
use crate::coverage::Cell;
use crate::gate::{self, GateRun, Outcome, RungEvidence, Tally, Verdict};
use crate::ids::{JobId, RungId};
use crate::job::{CasePin, CellKey, Combination, JobStatus};
use crate::ladder::{ClimberKey, Ladder, LadderAxis, Steering};
use crate::launch::LaunchFacts;
use crate::matrix::{CaseView, CellCounts, MatrixCell, UnlaunchableReason, cell_from, in_flight_of};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, HashMap};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A climber and its steering (the default when it has no steering row), in the ladder's
/// resolved order ([`Ladder::climbers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Climber {
    pub combination: Combination,
    pub steering: Steering,
}

impl Climber {
    /// The ladder's climbers ([`Ladder::climbers`], in order) with their steering rows; a
    /// climber without a row gets the default steering.
    pub fn with_steering(combinations: Vec<Combination>, steering: &BTreeMap<ClimberKey, Steering>) -> Vec<Climber> {
        combinations
            .into_iter()
            .map(|combination| Climber {
                steering: steering.get(&ClimberKey::of(&combination)).copied().unwrap_or_default(),
                combination,
            })
            .collect()
    }
}

/// Every cell of a ladder, rung (at its current pin) by climber: the cell keys the store reads
/// the evidence for.
pub fn ladder_cells(ladder: &Ladder, climbers: &[Climber]) -> Vec<Cell> {
    let identities: Vec<String> = climbers.iter().map(|c| c.combination.identity()).collect();
    let mut cells = Vec::with_capacity(ladder.rungs.len() * climbers.len());
    for rung in &ladder.rungs {
        let pin = rung.case.to_string();
        for (climber, identity) in climbers.iter().zip(&identities) {
            cells.push(Cell {
                case: rung.case.clone(),
                combination: climber.combination.clone(),
                cell_key: CellKey::joined(&pin, identity),
            });
        }
    }
    cells
}

/// A stored verdict row: one climber, one rung, one exact case version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedVerdict {
    pub climber: ClimberKey,
    pub rung_id: RungId,
    pub version: String,
    /// The gate's verdict as last persisted (`None`: none persisted, or cleared since).
    pub verdict: Option<Outcome>,
    /// An override imposed by the reviewer.
    #[serde(rename = "override")]
    pub override_outcome: Option<Outcome>,
}

/// What the store read for a ladder: every rung (at its current pin) × every climber, in a few
/// grouped queries keyed by cell key. The board looks every cell up in each map and never walks
/// them in order, so they are hashed: cell keys share long prefixes (the pin), which a sorted map
/// compares again at every level.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LadderEvidence {
    /// Each cell's completed runs (globally), with the requesting account's own review.
    pub runs: HashMap<CellKey, Vec<GateRun>>,
    /// Each cell's jobs by status (globally).
    pub jobs: HashMap<CellKey, BTreeMap<JobStatus, i64>>,
    /// Each cell's jobs launched by this ladder and still queued or pending.
    pub waiting: HashMap<CellKey, Vec<JobId>>,
    /// The ladder's stored verdict rows, every version.
    pub recorded: Vec<RecordedVerdict>,
}

/// Where a climber stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum ClimberStatus {
    /// Runs are still to complete on the current rung: the ladder's move.
    Climbing,
    /// The rung ran everything it was going to and waits on your review.
    AwaitingReview,
    /// The current rung was failed.
    Walled,
    /// Stopped by hand.
    Held,
    /// Every rung cleared.
    ToppedOut,
}

/// One rung as the board shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RungView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub rung_id: RungId,
    pub case: CasePin,
    /// The runs the rung takes.
    pub runs: i64,
    pub latest_version: Option<String>,
    /// A newer version of the case than the pin has been ingested.
    pub behind: bool,
}

/// One verdict of one climber on one rung.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RungStanding {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub rung_id: RungId,
    /// The exact case version this verdict is decided against.
    pub version: String,
    /// What the gate says (for a stale entry: what it said, as recorded).
    pub verdict: Verdict,
    /// The reviewer's override, stored beside the gate's verdict.
    #[serde(rename = "override")]
    pub override_outcome: Option<Outcome>,
    /// What governs the climb: the override, else the verdict. A stale entry governs nothing.
    pub outcome: Verdict,
    /// Whether this decided verdict has been persisted; false for one computed live.
    pub recorded: bool,
    /// Decided against a version the rung no longer pins.
    pub stale: bool,
    /// The evidence behind the verdict; null on a stale entry.
    pub tally: Option<Tally>,
    /// The climber's cell on this rung (its runs and jobs carry this key); null on a stale entry.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub cell_key: Option<CellKey>,
    /// The climber's cell on this rung as the matrix counts it, for the top-up's walk and the
    /// buffer; not part of the board's answer (its fields repeat the rung, the climber and the
    /// tally). None on a stale entry.
    #[serde(skip)]
    pub cell: Option<MatrixCell>,
}

/// One climber on the board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClimberProgress {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub climber_key: ClimberKey,
    pub combination: Combination,
    pub steering: Steering,
    pub status: ClimberStatus,
    /// The first rung, in the ladder's order, the climber has not advanced past (null when
    /// topped out).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub current_rung: Option<RungId>,
    /// Why the current rung's cell cannot be launched, if it cannot.
    pub unlaunchable: Option<UnlaunchableReason>,
    /// Every rung reached (advanced past, standing on, walled at) in the ladder's order, each
    /// followed by its stale verdicts; stale verdicts of rungs not reached come at their place.
    pub rungs: Vec<RungStanding>,
}

/// A verdict a top-up persists, so that it reads `recorded: true` from then on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerdictWrite {
    pub climber: ClimberKey,
    pub rung_id: RungId,
    pub version: String,
    /// The gate's verdict now; `None` clears a persisted verdict the gate no longer holds (a
    /// review was changed). The override column is left as it is.
    pub verdict: Option<Outcome>,
}

/// `GET /ladders/{id}/progress`, plus what a top-up acts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Board {
    pub outer_axis: LadderAxis,
    pub rungs: Vec<RungView>,
    /// In the climbers' resolved order.
    pub climbers: Vec<ClimberProgress>,
}

/// The board and the writes it implies. A GET shows the board and writes nothing; a top-up (and
/// the climb workflow, for the cancellations) applies the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub board: Board,
    /// Decided verdicts not persisted yet (and persisted ones the gate no longer holds).
    pub record: Vec<VerdictWrite>,
    /// With `earlyStop` on: this ladder's still-queued jobs of every decided rung, to cancel
    /// through the atomic cancel transition.
    pub cancel: Vec<JobId>,
}

/// Computes the board. `climbers` are in the ladder's resolved order, with their steering.
pub fn progress(
    ladder: &Ladder,
    climbers: &[Climber],
    evidence: &LadderEvidence,
    cases: &CaseFacts,
    launch: &LaunchFacts,
) -> Progress {
    let rules = ladder.gate_rules();
    let mut rows: BTreeMap<(&ClimberKey, &RungId), Vec<&RecordedVerdict>> = BTreeMap::new();
    for row in &evidence.recorded {
        rows.entry((&row.climber, &row.rung_id)).or_default().push(row);
    }
    let rungs: Vec<RungView> = ladder
        .rungs
        .iter()
        .map(|r| RungView {
            rung_id: r.id.clone(),
            case: r.case.clone(),
            runs: r.runs(ladder.runs_per_cell),
            latest_version: cases.latest(&r.case.slug).map(str::to_string),
            behind: cases.is_stale(&r.case.slug, &r.case.version),
        })
        .collect();
    // A board crosses every rung with every climber: each rung's case facts and each climber's
    // launch check are worked out once, not once per cell.
    let case_views: Vec<CaseView> = rungs.iter().map(|r| CaseView::of(&r.case, cases)).collect();
    // Each rung's pin is written once, each climber's identity once, and each cell key is their
    // join ([`CellKey::joined`]).
    let pins: Vec<String> = rungs.iter().map(|r| r.case.to_string()).collect();
    let no_jobs = BTreeMap::new();
    let mut record = Vec::new();
    let mut cancel = Vec::new();
    let mut board_climbers = Vec::with_capacity(climbers.len());
    for climber in climbers {
        let key = ClimberKey::of(&climber.combination);

        let unlaunchable = launch
            .check(&climber.combination)
            .err()
            .as_ref()
            .map(UnlaunchableReason::from);
        // The gate on every rung, in order; which of them show is decided below.
        let mut live = Vec::with_capacity(rungs.len());
        for (rung, pin) in rungs.iter().zip(&pins) {
            let cell_key = CellKey::joined(pin, &key.0);
            let completed: &[GateRun] = evidence.runs.get(&cell_key).map(Vec::as_slice).unwrap_or(&[]);
            let jobs = evidence.jobs.get(&cell_key).unwrap_or(&no_jobs);
            let waiting: &[JobId] = evidence.waiting.get(&cell_key).map(Vec::as_slice).unwrap_or(&[]);
            let decision = gate::decide(
                &rules,
                &RungEvidence {
                    runs: rung.runs,
                    in_flight: in_flight_of(jobs),
                    completed,
                    waiting,
                },
            );
            let row = rows
                .get(&(&key, &rung.rung_id))
                .and_then(|rs| rs.iter().find(|r| r.version == rung.case.version));
            let stored = row.and_then(|r| r.verdict);
            let live_outcome = decision.verdict.outcome();
            if stored != live_outcome && (row.is_some() || live_outcome.is_some()) {
                record.push(VerdictWrite {
                    climber: key.clone(),
                    rung_id: rung.rung_id.clone(),
                    version: rung.case.version.clone(),
                    verdict: live_outcome,
                });
            }
            cancel.extend(decision.cancel.iter().cloned());
            let override_outcome = row.and_then(|r| r.override_outcome);
            live.push(Live {
                cell_key,
                completed: completed.len() as i64,
                jobs,
                outcome: override_outcome.map(Verdict::from).unwrap_or(decision.verdict),
                recorded: live_outcome.is_some() && stored == live_outcome,
                override_outcome,
                verdict: decision.verdict,
                tally: decision.tally,
            });
        }
        let (current, status) = standing_of(climber.steering.held, &live, &rungs);
        let mut standings = Vec::new();
        for (i, l) in live.into_iter().enumerate() {
            let rung = &rungs[i];
            if Some(i) == current || l.outcome != Verdict::Undecided {
                // The buffer's "not reviewed" is the gate's unjudged: an unloaded run judged
                // broken outright holds no buffer slot.
                let counts = CellCounts {
                    completed: l.completed,
                    unreviewed: l.tally.unjudged,
                    jobs: l.jobs.clone(),
                };
                let cell_key = l.cell_key.clone();
                let cell = Cell {
                    case: rung.case.clone(),
                    combination: climber.combination.clone(),
                    cell_key: l.cell_key,
                };
                let cell = cell_from(cell, rung.runs, &counts, &case_views[i], unlaunchable.clone());
                standings.push(RungStanding {
                    rung_id: rung.rung_id.clone(),
                    version: rung.case.version.clone(),
                    verdict: l.verdict,
                    override_outcome: l.override_outcome,
                    outcome: l.outcome,
                    recorded: l.recorded,
                    stale: false,
                    tally: Some(l.tally),
                    cell_key: Some(cell_key),
                    cell: Some(cell),
                });
            }
            let old = rows.get(&(&key, &rung.rung_id)).into_iter().flatten();
            standings.extend(stale_standings(rung, old));
        }
        board_climbers.push(ClimberProgress {
            climber_key: key,
            combination: climber.combination.clone(),
            steering: climber.steering,
            status,
            current_rung: current.map(|i| rungs[i].rung_id.clone()),
            unlaunchable: current.and(unlaunchable),
            rungs: standings,
        });
    }
    Progress {
        board: Board {
            outer_axis: ladder.outer_axis,
            rungs,
            climbers: board_climbers,
        },
        record,
        cancel,
    }
}

/// Where a climber stands: its current rung (the first it has not cleared) and its status there.
/// A held climber is held wherever it stands; one that cleared every rung topped out; a wall on
/// its current rung walls it; otherwise it climbs while runs are missing or pending, and waits
/// on its reviewer once they are all in.
fn standing_of(held: bool, live: &[Live<'_>], rungs: &[RungView]) -> (Option<usize>, ClimberStatus) {
    let current = live.iter().position(|s| s.outcome != Verdict::Advance);
    let status = match current {
        _ if held => ClimberStatus::Held,
        None => ClimberStatus::ToppedOut,
        Some(i) if live[i].outcome == Verdict::Wall => ClimberStatus::Walled,
        Some(i) => {
            let tally = live[i].tally;
            if tally.completed < rungs[i].runs || tally.pending > 0 {
                ClimberStatus::Climbing
            } else {
                ClimberStatus::AwaitingReview
            }
        }
    };
    (current, status)
}

/// The standings a climber keeps on earlier versions of a rung's case: every recorded verdict or
/// override, shown stale.
fn stale_standings<'r>(
    rung: &'r RungView,
    rows: impl Iterator<Item = &'r &'r RecordedVerdict> + 'r,
) -> impl Iterator<Item = RungStanding> + 'r {
    rows.filter(move |r| r.version != rung.case.version)
        .filter(|r| r.verdict.is_some() || r.override_outcome.is_some())
        .map(move |row| {
            let verdict = row.verdict.map(Verdict::from).unwrap_or(Verdict::Undecided);
            RungStanding {
                rung_id: rung.rung_id.clone(),
                version: row.version.clone(),
                verdict,
                override_outcome: row.override_outcome,
                outcome: row.override_outcome.map(Verdict::from).unwrap_or(verdict),
                recorded: true,
                stale: true,
                tally: None,
                cell_key: None,
                cell: None,
            }
        })
}

/// One climber's gate on one rung, before the board decides whether it shows.
struct Live<'e> {
    cell_key: CellKey,
    completed: i64,
    jobs: &'e BTreeMap<JobStatus, i64>,
    verdict: Verdict,
    override_outcome: Option<Outcome>,
    outcome: Verdict,
    recorded: bool,
    tally: Tally,
}

impl Board {
    /// Climber indices in feed order: priority (higher first), then focused, then the resolved
    /// order.
    fn ranked(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.climbers.len()).collect();
        order.sort_by_key(|&i| {
            let s = self.climbers[i].steering;
            (std::cmp::Reverse(s.priority), !s.focused, i)
        });
        order
    }

    fn rung_index(&self) -> BTreeMap<&RungId, usize> {
        self.rungs.iter().enumerate().map(|(i, r)| (&r.rung_id, i)).collect()
    }

    /// The live (non-stale) standings with their rung positions and feed rank, in the ladder's
    /// emission order: by rung then climber for `rung`, by climber then rung for `combination`.
    fn in_ladder_order(
        &self,
        keep: impl Fn(&ClimberProgress, &RungStanding) -> bool,
    ) -> Vec<(&ClimberProgress, &RungStanding)> {
        let positions = self.rung_index();
        let mut picked = Vec::new();
        for (rank, i) in self.ranked().into_iter().enumerate() {
            let climber = &self.climbers[i];
            for standing in climber.rungs.iter().filter(|s| !s.stale && keep(climber, s)) {
                picked.push((positions[&standing.rung_id], rank, climber, standing));
            }
        }
        match self.outer_axis {
            LadderAxis::Rung => picked.sort_by_key(|(rung, rank, _, _)| (*rung, *rank)),
            LadderAxis::Combination => picked.sort_by_key(|(rung, rank, _, _)| (*rank, *rung)),
        }
        picked.into_iter().map(|(_, _, c, s)| (c, s)).collect()
    }

    /// The cells a ladder top-up walks, in emission order: only the current rung of each climber
    /// that is climbing or awaiting review (never a held, walled or topped-out one).
    pub fn launch_cells(&self) -> Vec<MatrixCell> {
        self.in_ladder_order(|climber, standing| {
            matches!(climber.status, ClimberStatus::Climbing | ClimberStatus::AwaitingReview)
                && climber.current_rung.as_ref() == Some(&standing.rung_id)
        })
        .into_iter()
        .filter_map(|(_, s)| s.cell.clone())
        .collect()
    }

    /// The cells the review buffer and `GET /ladders/{id}/queue` count, in the ladder's order:
    /// every rung each climber has reached (advanced past, standing on, walled at), held climbers
    /// included.
    pub fn reached_cells(&self) -> Vec<&MatrixCell> {
        self.in_ladder_order(|_, _| true)
            .into_iter()
            .filter_map(|(_, s)| s.cell.as_ref())
            .collect()
    }

    /// Whether an override may be set (`Some`) or cleared (`None`) on `rung_id` for the climber
    /// `combination`, and if so the verdict row to store: the gate's verdict on the rung's current
    /// pin, recorded beside the override.
    pub fn override_target(
        &self,
        combination: &Combination,
        rung_id: &RungId,
        outcome: Option<Outcome>,
    ) -> Result<RecordedVerdict, OverrideRefusal> {
        let key = ClimberKey::of(combination);
        let climber = self
            .climbers
            .iter()
            .find(|c| c.climber_key == key)
            .ok_or(OverrideRefusal::UnknownClimber)?;
        let rung = self
            .rungs
            .iter()
            .find(|r| &r.rung_id == rung_id)
            .ok_or(OverrideRefusal::UnknownRung)?;
        let verdict = climber
            .rungs
            .iter()
            .find(|s| !s.stale && &s.rung_id == rung_id)
            .map(|s| s.verdict)
            .unwrap_or(Verdict::Undecided);
        if outcome.is_some() && verdict == Verdict::Undecided {
            return Err(OverrideRefusal::Undecided);
        }
        Ok(RecordedVerdict {
            climber: key,
            rung_id: rung_id.clone(),
            version: rung.case.version.clone(),
            verdict: verdict.outcome(),
            override_outcome: outcome,
        })
    }
}

/// `POST /ladders/{id}/outcomes`: impose `advance` or `wall` on a decided rung, or clear an
/// override with `outcome: null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutcomeInput {
    pub combination: Combination,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub rung_id: RungId,
    /// Required; `null` clears the override.
    #[serde(deserialize_with = "present_or_null")]
    pub outcome: Option<Outcome>,
}

fn present_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Outcome>, D::Error> {
    Option::<Outcome>::deserialize(d)
}

/// Why an override is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OverrideRefusal {
    /// The combination is not a climber of the ladder (409, `combination`).
    #[error("combination: not a climber of this ladder")]
    UnknownClimber,
    /// The rung id is not a rung of the ladder (409, `rungId`).
    #[error("rungId: not a rung of this ladder")]
    UnknownRung,
    /// The gate has not decided the rung (409): there is nothing to promote past, and the
    /// control for "stop here regardless" is a hold.
    #[error("rungId: the gate has not decided this rung; hold the climber to stop it here")]
    Undecided,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::outstanding;
    use crate::catalogue::TestType;
    use crate::coverage::tests::{gg, harness, pin};
    use crate::gate::Gate;
    use crate::generator::XorShift;
    use crate::ids::LadderId;
    use crate::ladder::Rung;
    use crate::matrix::tests::launch_facts;
    use crate::review::Rating::{self, *};

    struct Fixture {
        ladder: Ladder,
        climbers: Vec<Climber>,
        evidence: LadderEvidence,
    }

    fn rung_id(slug: &str) -> RungId {
        RungId(format!("rung_{slug}"))
    }

    impl Fixture {
        /// Rungs `rung_<slug>` on `<slug>@1.0.0`, five runs each, the default gate; climbers in
        /// the order given.
        fn new(slugs: &[&str], climbers: &[Combination]) -> Self {
            Fixture {
                ladder: Ladder {
                    id: LadderId("lad_1".into()),
                    name: "climb".into(),
                    rungs: slugs
                        .iter()
                        .map(|s| Rung {
                            id: rung_id(s),
                            case: pin(s, "1.0.0"),
                            runs: None,
                        })
                        .collect(),
                    combo_groups: vec![],
                    combinations: climbers.to_vec(),
                    runs_per_cell: 5,
                    gate: Gate::default(),
                    unloaded_counts_as_broken: true,
                    early_stop: false,
                    outer_axis: LadderAxis::Rung,
                    buffer_target: None,
                    auto_top_up: true,
                    enabled: true,
                    created_at: 0,
                    updated_at: 0,
                    budget: None,
                    estimated_run_usd: None,
                    spend: Default::default(),
                },
                climbers: climbers
                    .iter()
                    .map(|c| Climber {
                        combination: c.clone(),
                        steering: Steering::default(),
                    })
                    .collect(),
                evidence: LadderEvidence::default(),
            }
        }

        fn key(&self, rung: &str, climber: usize) -> CellKey {
            let r = self.ladder.rungs.iter().find(|r| r.id == rung_id(rung)).unwrap();
            CellKey::of(&r.case, &self.climbers[climber].combination)
        }

        /// Completed, loaded runs with the account's reviews (`None`: not reviewed).
        fn ran(&mut self, rung: &str, climber: usize, reviews: &[Option<Rating>]) -> &mut Self {
            let key = self.key(rung, climber);
            let runs = self.evidence.runs.entry(key).or_default();
            runs.extend(reviews.iter().map(|r| GateRun {
                loaded: true,
                review: *r,
            }));
            self
        }

        fn jobs(&mut self, rung: &str, climber: usize, status: JobStatus, n: i64) -> &mut Self {
            let key = self.key(rung, climber);
            *self.evidence.jobs.entry(key).or_default().entry(status).or_default() += n;
            self
        }

        fn record(
            &mut self,
            rung: &str,
            climber: usize,
            version: &str,
            verdict: Option<Outcome>,
            over: Option<Outcome>,
        ) {
            let climber = ClimberKey::of(&self.climbers[climber].combination);
            self.evidence
                .recorded
                .retain(|r| !(r.climber == climber && r.rung_id == rung_id(rung) && r.version == version));
            self.evidence.recorded.push(RecordedVerdict {
                climber,
                rung_id: rung_id(rung),
                version: version.into(),
                verdict,
                override_outcome: over,
            });
        }

        fn progress(&self) -> Progress {
            let cases = CaseFacts::from_versions(
                self.ladder
                    .rungs
                    .iter()
                    .map(|r| (r.case.slug.as_str(), "1.0.0", TestType::Standard)),
            );
            progress(&self.ladder, &self.climbers, &self.evidence, &cases, &launch_facts())
        }

        fn climber(&self, i: usize) -> ClimberProgress {
            self.progress().board.climbers[i].clone()
        }
    }

    fn standing<'a>(c: &'a ClimberProgress, rung: &str) -> &'a RungStanding {
        c.rungs.iter().find(|s| s.rung_id == rung_id(rung) && !s.stale).unwrap()
    }

    fn current(c: &ClimberProgress) -> Option<&str> {
        c.current_rung.as_ref().map(|r| r.as_str())
    }

    fn solo() -> Vec<Combination> {
        vec![harness("cc", "m")]
    }

    #[test]
    fn cell_keys_written_once_per_pin_and_identity_are_each_cells_key() {
        let climbers = [
            harness("cc", "m"),
            Combination::Harness {
                harness: "or".into(),
                model: "m".into(),
                provider: Some("p".into()),
            },
            gg("gg_1", "m2"),
        ];
        let mut f = Fixture::new(&["a", "b"], &climbers);
        let cells = ladder_cells(&f.ladder, &f.climbers);
        assert_eq!(cells.len(), 6);
        for c in &cells {
            assert_eq!(c.cell_key, CellKey::of(&c.case, &c.combination));
        }
        // The board reads each cell's evidence by the same key: a's runs land on a's standing.
        f.ran("a", 2, &[Some(Great); 5]);
        let p = f.progress();
        for climber in &p.board.climbers {
            for s in &climber.rungs {
                let cell = s.cell.as_ref().unwrap();
                assert_eq!(s.cell_key.as_ref(), Some(&CellKey::of(&cell.case, &cell.combination)));
                assert_eq!(cell.cell_key, CellKey::of(&cell.case, &cell.combination));
            }
        }
        let gg_climber = &p.board.climbers[2];
        assert_eq!(current(gg_climber), Some("rung_b"));
        assert_eq!(standing(gg_climber, "a").tally.unwrap().completed, 5);
    }

    #[test]
    fn a_climber_with_runs_still_to_complete_on_its_rung_is_climbing() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        assert_eq!(f.climber(0).status, ClimberStatus::Climbing);
        assert_eq!(current(&f.climber(0)), Some("rung_a"));
        f.ran("a", 0, &[None, None]).jobs("a", 0, JobStatus::Running, 3);
        assert_eq!(f.climber(0).status, ClimberStatus::Climbing);
        assert_eq!(standing(&f.climber(0), "a").tally.unwrap().pending, 3);
    }

    #[test]
    fn a_rung_that_ran_everything_and_waits_on_the_reviewer_is_awaiting_review() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[None; 5]);
        let c = f.climber(0);
        assert_eq!(c.status, ClimberStatus::AwaitingReview);
        assert_eq!(standing(&c, "a").tally.unwrap().unjudged, 5);
    }

    #[test]
    fn a_climber_whose_every_run_came_back_broken_is_walled_on_that_rung() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Broken); 5]);
        let c = f.climber(0);
        assert_eq!(c.status, ClimberStatus::Walled);
        assert_eq!(current(&c), Some("rung_a"));
        assert_eq!(standing(&c, "a").verdict, Verdict::Wall);
    }

    #[test]
    fn a_held_climber_stays_where_it_stands_and_resumes_from_exactly_there() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Great), None, None, None, None])
            .ran("b", 0, &[None]);
        f.climbers[0].steering.held = true;
        let held = f.climber(0);
        assert_eq!(held.status, ClimberStatus::Held);
        assert_eq!(current(&held), Some("rung_b"));
        assert!(
            f.progress().board.launch_cells().is_empty(),
            "a held climber launches nothing"
        );
        f.climbers[0].steering.held = false;
        let resumed = f.climber(0);
        assert_eq!(resumed.status, ClimberStatus::Climbing);
        assert_eq!(current(&resumed), Some("rung_b"));
    }

    #[test]
    fn a_climber_that_cleared_every_rung_is_topped_out() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Scuffed), None, None, None, None]);
        f.ran(
            "b",
            0,
            &[Some(Broken), Some(Broken), Some(Broken), Some(Broken), Some(Passable)],
        );
        let c = f.climber(0);
        assert_eq!(c.status, ClimberStatus::ToppedOut);
        assert_eq!(c.current_rung, None);
        assert!(f.progress().board.launch_cells().is_empty());
    }

    #[test]
    fn a_verdict_computed_live_moves_the_climber_at_once_and_reads_unrecorded_until_a_top_up_writes_it() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Scuffed), None, None, None, None]);
        let p = f.progress();
        let c = &p.board.climbers[0];
        assert_eq!(current(c), Some("rung_b"));
        assert_eq!(standing(c, "a").verdict, Verdict::Advance);
        assert!(!standing(c, "a").recorded);
        assert_eq!(
            p.record,
            [VerdictWrite {
                climber: ClimberKey::of(&harness("cc", "m")),
                rung_id: rung_id("a"),
                version: "1.0.0".into(),
                verdict: Some(Outcome::Advance),
            }]
        );
        assert_eq!(f.progress(), p, "reading twice changes nothing");

        // The top-up wrote it.
        f.record("a", 0, "1.0.0", Some(Outcome::Advance), None);
        let p = f.progress();
        assert!(standing(&p.board.climbers[0], "a").recorded);
        assert!(p.record.is_empty());
    }

    #[test]
    fn a_persisted_verdict_the_gate_no_longer_holds_is_cleared_by_the_next_top_up() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Broken); 5]);
        f.record("a", 0, "1.0.0", Some(Outcome::Advance), None);
        let p = f.progress();
        assert_eq!(p.record[0].verdict, Some(Outcome::Wall));
        assert!(!standing(&p.board.climbers[0], "a").recorded);
    }

    #[test]
    fn after_a_reorder_a_climber_stands_on_the_first_rung_in_the_new_order_it_has_not_advanced_past() {
        let mut f = Fixture::new(&["a", "b", "c"], &solo());
        f.ran("a", 0, &[Some(Great), None, None, None, None]);
        f.ran("c", 0, &[Some(Great), None, None, None, None]);
        assert_eq!(current(&f.climber(0)), Some("rung_b"));
        // c, a, b: c and a advanced, so still b.
        f.ladder.rungs.rotate_right(1);
        assert_eq!(current(&f.climber(0)), Some("rung_b"));
        // b, c, a: b comes first now.
        f.ladder.rungs.rotate_right(1);
        let c = f.climber(0);
        assert_eq!(current(&c), Some("rung_b"));
        // The verdicts stayed with their rung ids.
        assert_eq!(standing(&c, "a").verdict, Verdict::Advance);
        assert_eq!(standing(&c, "c").verdict, Verdict::Advance);
        let shown: Vec<&str> = c.rungs.iter().map(|s| s.rung_id.as_str()).collect();
        assert_eq!(shown, ["rung_b", "rung_c", "rung_a"], "in the ladder's new order");
    }

    #[test]
    fn bumping_a_rung_keeps_its_verdict_stale_reopens_the_rung_and_pinning_back_restores_it() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Great), None, None, None, None]);
        f.record("a", 0, "1.0.0", Some(Outcome::Advance), None);
        assert_eq!(current(&f.climber(0)), Some("rung_b"));

        f.ladder.rungs[0].case.version = "1.1.0".into();
        let p = f.progress();
        let c = &p.board.climbers[0];
        assert_eq!(current(c), Some("rung_a"), "re-opened");
        assert_eq!(c.status, ClimberStatus::Climbing);
        let live = standing(c, "a");
        assert_eq!((live.version.as_str(), live.verdict), ("1.1.0", Verdict::Undecided));
        let stale = c.rungs.iter().find(|s| s.stale).unwrap();
        assert_eq!(stale.rung_id, rung_id("a"));
        assert_eq!((stale.version.as_str(), stale.verdict), ("1.0.0", Verdict::Advance));
        assert!(stale.recorded && stale.tally.is_none());
        assert!(p.record.is_empty(), "the old verdict is kept, not overwritten");
        assert_eq!(p.board.launch_cells()[0].case.version, "1.1.0");

        f.ladder.rungs[0].case.version = "1.0.0".into();
        let c = f.climber(0);
        assert_eq!(current(&c), Some("rung_b"));
        assert!(standing(&c, "a").recorded);
        assert!(c.rungs.iter().all(|s| !s.stale));
    }

    #[test]
    fn the_board_shows_when_a_rungs_pin_has_fallen_behind() {
        let f = Fixture::new(&["a"], &solo());
        let cases = CaseFacts::from_versions([("a", "1.0.0", TestType::Standard), ("a", "1.2.0", TestType::Standard)]);
        let p = progress(&f.ladder, &f.climbers, &f.evidence, &cases, &launch_facts());
        assert!(p.board.rungs[0].behind);
        assert_eq!(p.board.rungs[0].latest_version.as_deref(), Some("1.2.0"));
    }

    #[test]
    fn an_override_promotes_past_a_wall_beside_the_gates_verdict_and_clearing_it_restores_the_wall() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[Some(Broken); 5]);
        let target = f
            .progress()
            .board
            .override_target(&harness("cc", "m"), &rung_id("a"), Some(Outcome::Advance))
            .unwrap();
        assert_eq!(
            target.verdict,
            Some(Outcome::Wall),
            "the gate's verdict is recorded beside it"
        );
        f.record("a", 0, "1.0.0", target.verdict, target.override_outcome);
        let c = f.climber(0);
        assert_eq!(current(&c), Some("rung_b"));
        assert_eq!(c.status, ClimberStatus::Climbing);
        let a = standing(&c, "a");
        assert_eq!(
            (a.verdict, a.override_outcome, a.outcome),
            (Verdict::Wall, Some(Outcome::Advance), Verdict::Advance)
        );
        // More evidence, a recompute: the override still governs.
        f.jobs("a", 0, JobStatus::Completed, 5);
        assert_eq!(current(&f.climber(0)), Some("rung_b"));

        let clear = f
            .progress()
            .board
            .override_target(&harness("cc", "m"), &rung_id("a"), None)
            .unwrap();
        f.record("a", 0, "1.0.0", clear.verdict, clear.override_outcome);
        let c = f.climber(0);
        assert_eq!(c.status, ClimberStatus::Walled);
        assert_eq!(current(&c), Some("rung_a"));
    }

    #[test]
    fn an_override_on_a_rung_the_gate_has_not_decided_is_refused() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ran("a", 0, &[None; 3]);
        let board = f.progress().board;
        let combo = harness("cc", "m");
        assert_eq!(
            board.override_target(&combo, &rung_id("a"), Some(Outcome::Wall)),
            Err(OverrideRefusal::Undecided)
        );
        assert_eq!(
            board.override_target(&combo, &rung_id("b"), Some(Outcome::Advance)),
            Err(OverrideRefusal::Undecided)
        );
        assert!(
            board.override_target(&combo, &rung_id("a"), None).is_ok(),
            "clearing is always allowed"
        );
        assert_eq!(
            board.override_target(&combo, &rung_id("zz"), None),
            Err(OverrideRefusal::UnknownRung)
        );
        assert_eq!(
            board.override_target(&harness("cc", "x"), &rung_id("a"), None),
            Err(OverrideRefusal::UnknownClimber)
        );
    }

    #[test]
    fn an_outcome_input_requires_the_outcome_field_and_takes_null_to_clear() {
        let base =
            serde_json::json!({"combination": {"kind": "harness", "harness": "cc", "model": "m"}, "rungId": "rung_a"});
        let mut with = base.clone();
        with["outcome"] = serde_json::json!("advance");
        assert_eq!(
            serde_json::from_value::<OutcomeInput>(with).unwrap().outcome,
            Some(Outcome::Advance)
        );
        let mut null = base.clone();
        null["outcome"] = serde_json::Value::Null;
        assert_eq!(serde_json::from_value::<OutcomeInput>(null).unwrap().outcome, None);
        let err = serde_json::from_value::<OutcomeInput>(base).unwrap_err();
        assert!(err.to_string().contains("outcome"), "{err}");
    }

    #[test]
    fn with_early_stop_a_decided_rungs_still_queued_jobs_are_cancelled_and_the_climber_moves_on() {
        let mut f = Fixture::new(&["a", "b"], &solo());
        f.ladder.early_stop = true;
        f.ran("a", 0, &[Some(Passable)]).jobs("a", 0, JobStatus::Queued, 4);
        let key = f.key("a", 0);
        let waiting: Vec<JobId> = (0..4).map(|i| JobId(format!("job_{i}"))).collect();
        f.evidence.waiting.insert(key, waiting.clone());
        let p = f.progress();
        assert_eq!(p.cancel, waiting);
        assert_eq!(current(&p.board.climbers[0]), Some("rung_b"));
        f.ladder.early_stop = false;
        let p = f.progress();
        assert!(p.cancel.is_empty());
        assert_eq!(current(&p.board.climbers[0]), Some("rung_a"));
    }

    #[test]
    fn an_unloaded_run_is_broken_at_once_and_holds_no_buffer_slot() {
        let mut f = Fixture::new(&["a"], &solo());
        let key = f.key("a", 0);
        f.evidence.runs.insert(
            key,
            vec![
                GateRun {
                    loaded: false,
                    review: Some(Flawless),
                };
                5
            ],
        );
        let p = f.progress();
        assert_eq!(p.board.climbers[0].status, ClimberStatus::Walled);
        assert_eq!(outstanding(p.board.reached_cells()), 0);
        f.ladder.unloaded_counts_as_broken = false;
        assert_eq!(f.climber(0).status, ClimberStatus::ToppedOut);
    }

    fn fed(board: &Board) -> Vec<String> {
        board
            .launch_cells()
            .iter()
            .map(|c| format!("{}@{}", c.combination.identity(), c.case.slug))
            .collect()
    }

    #[test]
    fn rung_by_rung_brings_every_climber_up_one_rung_before_anyone_moves_on() {
        let climbers = [harness("cc", "m"), harness("other", "m"), gg("gg_1", "m")];
        let mut f = Fixture::new(&["a", "b"], &climbers);
        f.ran("a", 0, &[Some(Great), None, None, None, None]);
        assert_eq!(fed(&f.progress().board), ["other/m@a", "gg:gg_1[root=m]@a", "cc/m@b"]);
        f.ladder.outer_axis = LadderAxis::Combination;
        assert_eq!(fed(&f.progress().board), ["cc/m@b", "other/m@a", "gg:gg_1[root=m]@a"]);
    }

    #[test]
    fn climbers_are_fed_by_priority_then_focused_then_their_stable_order() {
        let climbers = [harness("cc", "m"), harness("other", "m"), gg("gg_1", "m")];
        let mut f = Fixture::new(&["a"], &climbers);
        f.climbers[2].steering.focused = true;
        assert_eq!(fed(&f.progress().board), ["gg:gg_1[root=m]@a", "cc/m@a", "other/m@a"]);
        f.climbers[1].steering.priority = 2;
        assert_eq!(fed(&f.progress().board), ["other/m@a", "gg:gg_1[root=m]@a", "cc/m@a"]);
        f.climbers[0].steering.priority = -1;
        assert_eq!(fed(&f.progress().board), ["other/m@a", "gg:gg_1[root=m]@a", "cc/m@a"]);
    }

    #[test]
    fn a_climber_added_to_a_running_ladder_starts_at_rung_one_while_the_others_carry_on() {
        let mut f = Fixture::new(&["a", "b", "c"], &solo());
        f.ran("a", 0, &[Some(Great), None, None, None, None]);
        f.ran("b", 0, &[Some(Great), None, None, None, None]);
        f.climbers.push(Climber {
            combination: harness("other", "m"),
            steering: Steering::default(),
        });
        let p = f.progress();
        assert_eq!(current(&p.board.climbers[0]), Some("rung_c"));
        assert_eq!(current(&p.board.climbers[1]), Some("rung_a"));
        assert_eq!(fed(&p.board), ["other/m@a", "cc/m@c"]);
    }

    #[test]
    fn the_buffer_counts_every_rung_reached_advanced_past_standing_on_and_walled_at() {
        let climbers = [harness("cc", "m"), harness("other", "m")];
        let mut f = Fixture::new(&["a", "b", "c"], &climbers);
        // Climber 0: advanced past a (four runs unreviewed), walled at b, never reached c.
        f.ran("a", 0, &[Some(Great), None, None, None, None]);
        f.ran("b", 0, &[Some(Broken); 5]);
        f.ran("c", 0, &[None, None]);
        // Climber 1: standing on a with two unreviewed and one in flight.
        f.ran("a", 1, &[None, None]).jobs("a", 1, JobStatus::Queued, 1);
        let p = f.progress();
        let reached: Vec<String> = p
            .board
            .reached_cells()
            .iter()
            .map(|c| format!("{}@{}", c.combination.identity(), c.case.slug))
            .collect();
        assert_eq!(reached, ["cc/m@a", "other/m@a", "cc/m@b"]);
        assert_eq!(outstanding(p.board.reached_cells()), 4 + 2 + 1);
        assert_eq!(fed(&p.board), ["other/m@a"], "a walled climber launches nothing");
    }

    #[test]
    fn a_climber_with_no_steering_row_gets_the_default_and_the_evidence_is_read_for_every_rung_and_climber() {
        let combos = vec![harness("cc", "m"), harness("other", "m")];
        let rows = BTreeMap::from([(
            ClimberKey::of(&combos[1]),
            Steering {
                priority: 4,
                focused: true,
                held: false,
            },
        )]);
        let climbers = Climber::with_steering(combos, &rows);
        assert_eq!(climbers[0].steering, Steering::default());
        assert_eq!(climbers[1].steering.priority, 4);
        let f = Fixture::new(&["a", "b", "c"], &[harness("cc", "m"), harness("other", "m")]);
        let cells = ladder_cells(&f.ladder, &climbers);
        assert_eq!(cells.len(), 6);
        assert_eq!(cells[1].cell_key, f.key("a", 1));
    }

    #[test]
    fn the_current_cell_reports_why_it_cannot_be_launched() {
        let f = Fixture::new(&["a"], &[harness("cc", "unpriced")]);
        let c = f.climber(0);
        assert_eq!(c.unlaunchable.map(|u| u.code), Some("model_unpriced".into()));
    }

    #[test]
    fn a_climbers_standing_keeps_its_invariants_on_any_evidence() {
        let mut rng = XorShift(0xa076_1d64_78bd_642f);
        let ratings = [
            None,
            Some(Broken),
            Some(Scuffed),
            Some(Passable),
            Some(Great),
            Some(Flawless),
        ];
        for _ in 0..500 {
            let climbers = [harness("cc", "m"), harness("other", "m"), gg("gg_1", "m")];
            let mut f = Fixture::new(&["a", "b", "c", "d"], &climbers);
            f.ladder.early_stop = rng.one_in(2);
            for rung in ["a", "b", "c", "d"] {
                for climber in 0..3 {
                    let reviews: Vec<Option<Rating>> =
                        (0..rng.below(6)).map(|_| ratings[rng.below(6) as usize]).collect();
                    f.ran(rung, climber, &reviews);
                    if rng.one_in(3) {
                        f.jobs(rung, climber, JobStatus::Queued, rng.below(3));
                    }
                }
            }
            for c in &mut f.climbers {
                c.steering.held = rng.one_in(5);
                c.steering.priority = rng.below(3);
            }
            let p = f.progress();
            assert_eq!(p, f.progress());
            let active = p
                .board
                .climbers
                .iter()
                .filter(|c| matches!(c.status, ClimberStatus::Climbing | ClimberStatus::AwaitingReview))
                .count();
            assert_eq!(p.board.launch_cells().len(), active, "one cell per active climber");
            for c in &p.board.climbers {
                let live: Vec<&RungStanding> = c.rungs.iter().filter(|s| !s.stale).collect();
                match &c.current_rung {
                    None => assert_eq!(live.len(), 4),
                    Some(cur) => {
                        let at = p.board.rungs.iter().position(|r| &r.rung_id == cur).unwrap();
                        for r in &p.board.rungs[..at] {
                            assert_eq!(standing(c, &r.rung_id.0["rung_".len()..]).outcome, Verdict::Advance);
                        }
                        assert_ne!(standing(c, &cur.0["rung_".len()..]).outcome, Verdict::Advance);
                    }
                }
                assert!(
                    live.iter().all(|s| !s.recorded),
                    "nothing is recorded before a top-up writes it"
                );
            }
            // Writing what the board asks, the next read asks nothing more.
            for w in &p.record {
                let i = f
                    .climbers
                    .iter()
                    .position(|c| ClimberKey::of(&c.combination) == w.climber)
                    .unwrap();
                f.record(&w.rung_id.0["rung_".len()..], i, &w.version, w.verdict, None);
            }
            let again = f.progress();
            assert!(again.record.is_empty());
            assert_eq!(again.board.launch_cells(), p.board.launch_cells());
            for c in &again.board.climbers {
                for s in c.rungs.iter().filter(|s| !s.stale) {
                    assert_eq!(s.recorded, s.verdict != Verdict::Undecided);
                }
            }
        }
    }
}
