//! The ladder gate: one parameterised rule, `advance when count(my runs on this rung rated floor
//! or better) >= threshold`, decided conservatively in both directions.
//!
//! It reads only the requesting account's own review of each run (the worst domain within that
//! one review), never the stored cross-reviewer rating, so a stranger's harsh review cannot wall
//! someone else's ladder. A run whose build never loaded is broken outright when
//! `unloadedCountsAsBroken` is on, overriding a review. Failed and canceled jobs never reach the
//! gate: they are retried, and an eviction is no evidence about a model.
//!
//! Advance only if the bar is cleared even when every unjudged and every still-to-come run ends
//! up failing the floor; wall only if the bar cannot be reached even when all of them pass;
//! otherwise undecided. With `earlyStop` off nothing is decided until every run of the rung is in.
//! The tally is the evidence behind the answer, so a dashboard never re-derives these rules.

use crate::ids::JobId;
use crate::review::Rating;
use crate::validation::ValidationError;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// How close to an integer `of × runs` must be to count as that integer, so that `0.7 × 10`
/// requires 7 runs rather than the 8 a binary `7.000000000000001` would round up to.
const FRACTION_TOLERANCE: f64 = 1e-9;

/// The bar a rung's runs must clear.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Threshold {
    /// At least `runs` passing runs.
    Count { runs: i64 },
    /// At least `of` × the run count the rung will finish with (not the count so far).
    Fraction { of: f64 },
}

/// The ladder's gate: a floor rating and a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gate {
    /// A run rated at the floor or better passes.
    pub floor: Rating,
    pub threshold: Threshold,
}

impl Default for Gate {
    /// The gentlest rule that still stops a hopeless climb: one scuffed-or-better run advances.
    fn default() -> Self {
        Self {
            floor: Rating::Scuffed,
            threshold: Threshold::Count { runs: 1 },
        }
    }
}

impl Gate {
    /// Checks the threshold; `field` is the gate's path (`gate`).
    pub fn validate(&self, field: &str) -> Result<(), ValidationError> {
        match self.threshold {
            Threshold::Count { runs } if runs < 1 => Err(ValidationError::new(
                format!("{field}.threshold.runs"),
                "must be at least 1 passing run",
            )),
            Threshold::Fraction { of } if !(of > 0.0 && of <= 1.0) => Err(ValidationError::new(
                format!("{field}.threshold.of"),
                "must be a fraction greater than 0 and at most 1",
            )),
            _ => Ok(()),
        }
    }

    /// Passing runs a rung that will finish with `total` runs needs.
    pub fn required(&self, total: i64) -> i64 {
        match self.threshold {
            Threshold::Count { runs } => runs,
            Threshold::Fraction { of } => ((of * total as f64) - FRACTION_TOLERANCE).ceil().max(0.0) as i64,
        }
    }
}

/// The ladder's settings the gate reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateRules {
    pub gate: Gate,
    pub unloaded_counts_as_broken: bool,
    pub early_stop: bool,
}

/// One completed run of a rung's cell, as the gate sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateRun {
    /// Whether the run's build loaded.
    pub loaded: bool,
    /// The worst domain of the requesting account's own review of the run; `None` when that
    /// account has not reviewed it.
    pub review: Option<Rating>,
}

impl GateRun {
    /// The rating the gate counts for this run, if it has one yet.
    pub fn judgement(&self, unloaded_counts_as_broken: bool) -> Option<Rating> {
        if !self.loaded && unloaded_counts_as_broken {
            Some(Rating::Broken)
        } else {
            self.review
        }
    }
}

/// Everything known about one rung for one climber.
#[derive(Debug, Clone, Copy)]
pub struct RungEvidence<'a> {
    /// The rung's runs: its `runs` override, else the ladder's `runsPerCell`.
    pub runs: i64,
    /// The cell's jobs queued, pending, dispatched, starting or running (globally).
    pub in_flight: i64,
    /// The cell's completed runs (globally).
    pub completed: &'a [GateRun],
    /// This ladder's jobs of the cell still queued or pending: what an early stop cancels.
    pub waiting: &'a [JobId],
}

/// The gate's answer for one rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Advance,
    Wall,
    Undecided,
}

/// A decided verdict, and what an override imposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Advance,
    Wall,
}

impl Verdict {
    pub fn outcome(self) -> Option<Outcome> {
        match self {
            Verdict::Advance => Some(Outcome::Advance),
            Verdict::Wall => Some(Outcome::Wall),
            Verdict::Undecided => None,
        }
    }
}

impl From<Outcome> for Verdict {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Advance => Verdict::Advance,
            Outcome::Wall => Verdict::Wall,
        }
    }
}

/// The evidence behind a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Completed runs of the rung.
    pub completed: i64,
    /// Completed runs with a rating the gate counts (the account's review, or unloaded-broken).
    pub judged: i64,
    /// Completed runs still waiting for the account's review.
    pub unjudged: i64,
    /// Judged runs rated at the floor or better.
    pub passing: i64,
    /// The rung's runs not completed yet: its jobs queued, pending, dispatched, starting or running.
    pub pending: i64,
    /// Passing runs the rung needs.
    pub required: i64,
}

/// The gate's decision on one rung, with the early-stop cancellations it implies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateDecision {
    pub verdict: Verdict,
    pub tally: Tally,
    /// With `earlyStop` on and the rung decided: this ladder's still-queued jobs of the rung.
    pub cancel: Vec<JobId>,
}

/// Decides one rung.
pub fn decide(rules: &GateRules, evidence: &RungEvidence<'_>) -> GateDecision {
    let completed = evidence.completed.len() as i64;
    let mut judged = 0;
    let mut passing = 0;
    for run in evidence.completed {
        if let Some(rating) = run.judgement(rules.unloaded_counts_as_broken) {
            judged += 1;
            passing += i64::from(rating >= rules.gate.floor);
        }
    }
    let unjudged = completed - judged;
    // The run count the rung will finish with: its target, or more if more are already out.
    let total = evidence.runs.max(completed + evidence.in_flight);
    let to_come = total - completed;
    let required = rules.gate.required(total);
    let all_in = to_come == 0;
    let verdict = if !rules.early_stop && !all_in {
        Verdict::Undecided
    } else if passing >= required {
        Verdict::Advance
    } else if passing + unjudged + to_come < required {
        Verdict::Wall
    } else {
        Verdict::Undecided
    };
    let cancel = if rules.early_stop && verdict != Verdict::Undecided {
        evidence.waiting.to_vec()
    } else {
        Vec::new()
    };
    GateDecision {
        verdict,
        tally: Tally {
            completed,
            judged,
            unjudged,
            passing,
            pending: evidence.in_flight,
            required,
        },
        cancel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::XorShift;
    use Rating::*;

    fn rules(floor: Rating, threshold: Threshold, early_stop: bool) -> GateRules {
        GateRules {
            gate: Gate { floor, threshold },
            unloaded_counts_as_broken: true,
            early_stop,
        }
    }

    fn rated(ratings: &[Option<Rating>]) -> Vec<GateRun> {
        ratings
            .iter()
            .map(|r| GateRun {
                loaded: true,
                review: *r,
            })
            .collect()
    }

    fn verdict(rules: &GateRules, runs: i64, in_flight: i64, completed: &[GateRun]) -> Verdict {
        decide(
            rules,
            &RungEvidence {
                runs,
                in_flight,
                completed,
                waiting: &[],
            },
        )
        .verdict
    }

    const HALF: Threshold = Threshold::Fraction { of: 0.5 };
    const ONE: Threshold = Threshold::Count { runs: 1 };

    #[test]
    fn stop_when_over_half_are_broken_walls_once_three_of_five_are_broken() {
        let r = rules(Scuffed, HALF, false);
        assert_eq!(
            r.gate.required(5),
            3,
            "2.5 runs must be scuffed-or-better, so three must be"
        );
        let three_broken = rated(&[Some(Broken), Some(Broken), Some(Broken), None, None]);
        assert_eq!(verdict(&r, 5, 0, &three_broken), Verdict::Wall);
        let two_broken = rated(&[Some(Broken), Some(Broken), None, None, None]);
        assert_eq!(verdict(&r, 5, 0, &two_broken), Verdict::Undecided);
        let three_scuffed = rated(&[Some(Scuffed), Some(Great), Some(Scuffed), Some(Broken), Some(Broken)]);
        assert_eq!(verdict(&r, 5, 0, &three_scuffed), Verdict::Advance);
    }

    #[test]
    fn stop_when_all_are_broken_advances_on_one_playable_run_and_walls_only_when_every_run_is_broken() {
        let r = rules(Scuffed, ONE, false);
        let one_playable = rated(&[Some(Broken), Some(Scuffed), None, None, None]);
        assert_eq!(verdict(&r, 5, 0, &one_playable), Verdict::Advance);
        let four_broken = rated(&[Some(Broken), Some(Broken), Some(Broken), Some(Broken), None]);
        assert_eq!(verdict(&r, 5, 0, &four_broken), Verdict::Undecided);
        let all_broken = rated(&[Some(Broken); 5]);
        assert_eq!(verdict(&r, 5, 0, &all_broken), Verdict::Wall);
        assert_eq!(r.gate, Gate::default(), "this row is the default gate");
    }

    #[test]
    fn pass_if_any_run_is_passable_carries_the_rung_on_one_decent_run_however_bad_the_rest() {
        let r = rules(Passable, ONE, false);
        let one_passable = rated(&[Some(Broken), Some(Broken), Some(Passable), Some(Broken), Some(Broken)]);
        assert_eq!(verdict(&r, 5, 0, &one_passable), Verdict::Advance);
        let scuffed_at_best = rated(&[Some(Scuffed), Some(Broken), Some(Scuffed), Some(Broken), Some(Broken)]);
        assert_eq!(verdict(&r, 5, 0, &scuffed_at_best), Verdict::Wall);
    }

    #[test]
    fn with_early_stop_off_a_rung_runs_all_its_runs_before_deciding_however_certain() {
        let off = rules(Scuffed, ONE, false);
        let on = rules(Scuffed, ONE, true);
        let one_great = rated(&[Some(Great)]);
        assert_eq!(verdict(&off, 5, 4, &one_great), Verdict::Undecided);
        assert_eq!(verdict(&on, 5, 4, &one_great), Verdict::Advance);
        // Not yet launched counts as still to come, just as in flight does.
        assert_eq!(verdict(&off, 5, 0, &one_great), Verdict::Undecided);
        let three_broken = rated(&[Some(Broken); 3]);
        let over_half = rules(Scuffed, HALF, true);
        assert_eq!(verdict(&over_half, 5, 2, &three_broken), Verdict::Wall);
        assert_eq!(
            verdict(&rules(Scuffed, HALF, false), 5, 2, &three_broken),
            Verdict::Undecided
        );
    }

    #[test]
    fn an_early_stop_cancels_the_rungs_still_queued_jobs_and_a_full_run_cancels_nothing() {
        let waiting = [JobId("job_a".into()), JobId("job_b".into())];
        let evidence = RungEvidence {
            runs: 5,
            in_flight: 3,
            completed: &rated(&[Some(Flawless), None]),
            waiting: &waiting,
        };
        let on = decide(&rules(Scuffed, ONE, true), &evidence);
        assert_eq!(on.verdict, Verdict::Advance);
        assert_eq!(on.cancel, waiting);
        let off = decide(&rules(Scuffed, ONE, false), &evidence);
        assert!(off.cancel.is_empty());
        let undecided = decide(
            &rules(Scuffed, ONE, true),
            &RungEvidence {
                completed: &rated(&[None]),
                ..evidence
            },
        );
        assert_eq!(undecided.verdict, Verdict::Undecided);
        assert!(undecided.cancel.is_empty());
    }

    #[test]
    fn an_unloaded_run_is_broken_over_a_flawless_review_when_unloaded_counts_as_broken() {
        let unloaded = [GateRun {
            loaded: false,
            review: Some(Flawless),
        }];
        let mut r = rules(Scuffed, ONE, false);
        assert_eq!(verdict(&r, 1, 0, &unloaded), Verdict::Wall);
        r.unloaded_counts_as_broken = false;
        assert_eq!(verdict(&r, 1, 0, &unloaded), Verdict::Advance);
        // Unreviewed and unloaded: judged at once when the rule is on, waiting for a review when off.
        let unreviewed = [GateRun {
            loaded: false,
            review: None,
        }];
        assert_eq!(verdict(&r, 1, 0, &unreviewed), Verdict::Undecided);
        r.unloaded_counts_as_broken = true;
        let d = decide(
            &r,
            &RungEvidence {
                runs: 1,
                in_flight: 0,
                completed: &unreviewed,
                waiting: &[],
            },
        );
        assert_eq!(d.verdict, Verdict::Wall);
        assert_eq!((d.tally.judged, d.tally.unjudged), (1, 0));
    }

    #[test]
    fn the_tally_reports_the_evidence_behind_the_verdict() {
        let runs = rated(&[Some(Great), Some(Broken), None]);
        let d = decide(
            &rules(Passable, HALF, false),
            &RungEvidence {
                runs: 5,
                in_flight: 2,
                completed: &runs,
                waiting: &[],
            },
        );
        assert_eq!(
            d.tally,
            Tally {
                completed: 3,
                judged: 2,
                unjudged: 1,
                passing: 1,
                pending: 2,
                required: 3
            }
        );
    }

    #[test]
    fn a_fraction_is_measured_against_the_run_count_the_rung_will_finish_with() {
        let r = rules(Scuffed, HALF, true);
        // Two passing of two completed is not half of five.
        assert_eq!(
            verdict(&r, 5, 3, &rated(&[Some(Great), Some(Great)])),
            Verdict::Undecided
        );
        assert_eq!(
            verdict(&r, 5, 2, &rated(&[Some(Great), Some(Great), Some(Great)])),
            Verdict::Advance
        );
        let seventy = Gate {
            floor: Scuffed,
            threshold: Threshold::Fraction { of: 0.7 },
        };
        assert_eq!(seventy.required(10), 7);
        assert_eq!(
            Gate {
                floor: Scuffed,
                threshold: Threshold::Fraction { of: 1.0 }
            }
            .required(5),
            5
        );
        assert_eq!(
            Gate {
                floor: Scuffed,
                threshold: Threshold::Fraction { of: 0.01 }
            }
            .required(5),
            1
        );
    }

    #[test]
    fn a_gate_refuses_a_threshold_nobody_means() {
        let bad = |threshold| {
            Gate {
                floor: Scuffed,
                threshold,
            }
            .validate("gate")
            .unwrap_err()
            .field
        };
        assert_eq!(bad(Threshold::Count { runs: 0 }), "gate.threshold.runs");
        assert_eq!(bad(Threshold::Fraction { of: 0.0 }), "gate.threshold.of");
        assert_eq!(bad(Threshold::Fraction { of: 1.5 }), "gate.threshold.of");
        assert_eq!(bad(Threshold::Fraction { of: f64::NAN }), "gate.threshold.of");
        let g: Gate = serde_json::from_str(r#"{"floor":"passable","threshold":{"kind":"fraction","of":0.5}}"#).unwrap();
        assert_eq!(g.threshold, HALF);
        assert!(serde_json::from_str::<Gate>(r#"{"floor":"meh","threshold":{"kind":"count","runs":1}}"#).is_err());
    }

    /// One run's life: launched, completed (loaded or not), maybe reviewed.
    #[derive(Clone, Copy)]
    struct Fate {
        loaded: bool,
        review: Option<Rating>,
    }

    const RATINGS: [Rating; 5] = [Broken, Scuffed, Passable, Great, Flawless];

    /// Replays a random order of launches, completions and reviews for one rung, and calls `at`
    /// with the evidence after every event (including before the first).
    fn replay(rng: &mut XorShift, runs: usize, mut at: impl FnMut(i64, &[GateRun], bool)) {
        let fates: Vec<Fate> = (0..runs)
            .map(|_| Fate {
                loaded: !rng.one_in(5),
                review: (!rng.one_in(4)).then(|| RATINGS[rng.below(5) as usize]),
            })
            .collect();
        // Each run passes through stages 0 (not launched) → 1 (in flight) → 2 (completed) → 3
        // (reviewed, if its fate has a review).
        let mut stage = vec![0u8; runs];
        let last = |f: &Fate| if f.review.is_some() { 3 } else { 2 };
        loop {
            let in_flight = stage.iter().filter(|s| **s == 1).count() as i64;
            let completed: Vec<GateRun> = stage
                .iter()
                .zip(&fates)
                .filter(|(s, _)| **s >= 2)
                .map(|(s, f)| GateRun {
                    loaded: f.loaded,
                    review: if *s == 3 { f.review } else { None },
                })
                .collect();
            let open: Vec<usize> = (0..runs).filter(|i| stage[*i] < last(&fates[*i])).collect();
            at(in_flight, &completed, open.is_empty());
            if open.is_empty() {
                break;
            }
            let i = open[rng.below(open.len() as u64) as usize];
            stage[i] += 1;
        }
    }

    fn random_rules(rng: &mut XorShift, early_stop: bool) -> GateRules {
        let threshold = if rng.one_in(2) {
            Threshold::Count { runs: rng.below(4) + 1 }
        } else {
            Threshold::Fraction {
                of: [0.2, 0.5, 0.6, 0.75, 1.0][rng.below(5) as usize],
            }
        };
        GateRules {
            gate: Gate {
                floor: RATINGS[rng.below(5) as usize],
                threshold,
            },
            unloaded_counts_as_broken: !rng.one_in(3),
            early_stop,
        }
    }

    #[test]
    fn a_decision_never_has_to_be_taken_back_as_more_evidence_lands() {
        let mut rng = XorShift(0x5851_f42d_4c95_7f2d);
        for _ in 0..3_000 {
            let runs = rng.below(7) as usize + 1;
            let early_stop = !rng.one_in(3);
            let r = random_rules(&mut rng, early_stop);
            let mut decided: Option<Verdict> = None;
            replay(&mut rng, runs, |in_flight, completed, _| {
                let v = verdict(&r, runs as i64, in_flight, completed);
                if let Some(d) = decided {
                    assert_eq!(
                        v, d,
                        "{r:?} took back {d:?} at {completed:?} with {in_flight} in flight"
                    );
                }
                if v != Verdict::Undecided {
                    decided = Some(v);
                }
            });
        }
    }

    #[test]
    fn early_stop_and_full_run_decisions_agree_whenever_both_decide() {
        let mut rng = XorShift(0x1405_7b7e_f767_814f);
        for _ in 0..3_000 {
            let runs = rng.below(7) as usize + 1;
            let on = random_rules(&mut rng, true);
            let off = GateRules {
                early_stop: false,
                ..on
            };
            let mut early: Option<Verdict> = None;
            let mut full: Option<Verdict> = None;
            replay(&mut rng, runs, |in_flight, completed, _| {
                let e = verdict(&on, runs as i64, in_flight, completed);
                let f = verdict(&off, runs as i64, in_flight, completed);
                if f != Verdict::Undecided {
                    assert_eq!(e, f, "in the same state");
                    full = Some(f);
                }
                if e != Verdict::Undecided && early.is_none() {
                    early = Some(e);
                }
            });
            if let (Some(e), Some(f)) = (early, full) {
                assert_eq!(e, f, "the early decision is the one the full run reaches");
            }
        }
    }

    #[test]
    fn a_rung_whose_every_run_is_in_and_judged_is_always_decided() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2_000 {
            let runs = rng.below(7) as usize + 1;
            let early_stop = rng.one_in(2);
            let r = random_rules(&mut rng, early_stop);
            let all: Vec<GateRun> = (0..runs)
                .map(|_| GateRun {
                    loaded: true,
                    review: Some(RATINGS[rng.below(5) as usize]),
                })
                .collect();
            assert_ne!(verdict(&r, runs as i64, 0, &all), Verdict::Undecided, "{r:?} {all:?}");
        }
    }
}
