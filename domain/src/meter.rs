//! The monthly Sandbox meter: how many Sandbox seconds a Project may use, and what one use costs.
//!
//! Every Project gets SANDBOX_MONTHLY_SECONDS of Sandbox time a month. Work that needs the
//! Sandbox first reserves a fixed amount (refused when used plus open reservations plus the new
//! one would pass the cap, which the API answers with 429 `sandbox_cap`), and settles once it is
//! done. A settle charges what the Project's container was really kept awake for: a use keeps the
//! container awake from its start to its end plus the idle tail (sandboxd removes a container
//! after two idle minutes), and uses that overlap, tail included, are charged once. So the charge
//! of a use is the awake time it ADDS to the time already charged this month.
//!
//! Pure: time is unix seconds passed in by the caller, and the store keeps the charged intervals.
//! Atomicity of concurrent reservations is the store's job (a conditional update over this rule).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Sandbox seconds a Project may use in a calendar month (20 h).
pub const SANDBOX_MONTHLY_SECONDS: u64 = 72_000;

/// How long a container stays awake after a use ends before sandboxd removes it (sleepAfter 2 min).
pub const IDLE_TAIL_SECONDS: i64 = 120;

/// What a reservation is for; each purpose reserves a fixed amount up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reservation {
    /// An agent workspace opening (fork, clone, install, tools).
    OpenWorkspace,
    /// A Candidate's checks, run one after another in one workflow.
    CandidateChecks,
    /// One command of a code edit session.
    EditSessionCommand,
}

impl Reservation {
    /// Its name as stored and serialized.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reservation::OpenWorkspace => "open_workspace",
            Reservation::CandidateChecks => "candidate_checks",
            Reservation::EditSessionCommand => "edit_session_command",
        }
    }

    /// The seconds this purpose reserves.
    pub const fn seconds(self) -> u64 {
        match self {
            Reservation::OpenWorkspace => 300,
            Reservation::CandidateChecks => 900,
            Reservation::EditSessionCommand => 480,
        }
    }
}

/// A reservation the monthly cap cannot hold; the API maps it to 429 `sandbox_cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "sandbox_cap: reserving {requested} s on top of {used} s used and {reserved} s reserved \
     this month would pass the cap of {cap} s"
)]
pub struct CapExceeded {
    pub used: u64,
    pub reserved: u64,
    pub requested: u64,
    pub cap: u64,
}

/// Whether `amount` more seconds may be reserved for a Project that has used `used_this_month`
/// seconds and holds `open_reservations` seconds of reservations not yet settled.
/// Reaching the cap exactly is allowed; passing it is not.
pub fn reserve(used_this_month: u64, open_reservations: u64, amount: u64) -> Result<(), CapExceeded> {
    let total = used_this_month.saturating_add(open_reservations).saturating_add(amount);
    if total > SANDBOX_MONTHLY_SECONDS {
        return Err(CapExceeded {
            used: used_this_month,
            reserved: open_reservations,
            requested: amount,
            cap: SANDBOX_MONTHLY_SECONDS,
        });
    }
    Ok(())
}

/// A half-open span of time `[start, end)` in unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Interval {
    pub start: i64,
    pub end: i64,
}

impl Interval {
    /// Its length in seconds (zero for an empty or inverted interval).
    pub fn seconds(self) -> u64 {
        u64::try_from(self.end.saturating_sub(self.start)).unwrap_or(0)
    }

    /// The time a use over this interval keeps the container awake: the use plus the idle tail.
    pub fn awake(self) -> Interval {
        Interval {
            start: self.start,
            end: self.end.saturating_add(IDLE_TAIL_SECONDS),
        }
    }
}

/// A use whose end lies before its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("a Sandbox use cannot end ({end}) before it starts ({start})")]
pub struct InvalidUse {
    pub start: i64,
    pub end: i64,
}

/// The result of a settle: what to charge, and the awake intervals to store in place of the old.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settlement {
    /// Seconds this use adds to the Project's awake time; zero when it lies inside time already charged.
    pub charged_seconds: u64,
    /// All awake time charged so far, this use included: sorted, disjoint and not touching.
    pub awake: Vec<Interval>,
}

/// Charges a use `[use_start, use_end]` against the awake intervals already charged for the
/// Project's container. The use keeps the container awake until `use_end + IDLE_TAIL_SECONDS`;
/// only the part of that not already covered is charged.
///
/// `charged` may be in any order and may overlap (it is normalised first).
pub fn settle(charged: &[Interval], use_start: i64, use_end: i64) -> Result<Settlement, InvalidUse> {
    if use_end < use_start {
        return Err(InvalidUse {
            start: use_start,
            end: use_end,
        });
    }
    let before = union(charged.iter().copied());
    let used = Interval {
        start: use_start,
        end: use_end,
    }
    .awake();
    let already: u64 = before.iter().map(|i| overlap(*i, used)).sum();
    let charged_seconds = used.seconds() - already;
    let awake = union(before.into_iter().chain(std::iter::once(used)));
    Ok(Settlement { charged_seconds, awake })
}

/// How a reservation ends: the one lifecycle every Sandbox use follows (a workspace, an
/// edit-session command, a Candidate's checks). A reservation is taken before the use; when the use
/// started, its awake time is charged (`Settle`), whatever the use's outcome (a command that ran
/// and failed still kept the Sandbox awake); a use that never started is released uncharged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Close {
    Settle { start: i64, end: i64 },
    Release,
}

/// The close of a use that started at `started` (unix seconds; `None`: it never started) and is
/// over at `ended`. An end before the start (clocks of two machines) is taken as the start.
pub fn close_of(started: Option<i64>, ended: i64) -> Close {
    match started {
        Some(start) => Close::Settle {
            start,
            end: ended.max(start),
        },
        None => Close::Release,
    }
}

/// The total length of the union of `intervals`.
pub fn measure(intervals: &[Interval]) -> u64 {
    union(intervals.iter().copied()).iter().map(|i| i.seconds()).sum()
}

fn overlap(a: Interval, b: Interval) -> u64 {
    Interval {
        start: a.start.max(b.start),
        end: a.end.min(b.end),
    }
    .seconds()
}

/// Sorted, disjoint, non-touching intervals covering the same time; empty ones are dropped.
fn union(intervals: impl IntoIterator<Item = Interval>) -> Vec<Interval> {
    let mut sorted: Vec<Interval> = intervals.into_iter().filter(|i| i.end > i.start).collect();
    sorted.sort();
    let mut merged: Vec<Interval> = Vec::with_capacity(sorted.len());
    for i in sorted {
        match merged.last_mut() {
            Some(last) if i.start <= last.end => last.end = last.end.max(i.end),
            _ => merged.push(i),
        }
    }
    merged
}

/// The limits a model call is held to: the deployment's monthly budget, its daily call cap and
/// a Change's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelLimits {
    pub monthly_budget_usd: f64,
    pub daily_call_cap: i64,
    pub change_budget_usd: f64,
}

/// A model call's reservation on the meters, to settle or release: what was reserved, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelReservation {
    pub change_id: String,
    pub month: String,
    pub estimate_micro: i64,
    /// The UTC day whose call cap counted the call (`YYYY-MM-DD`).
    #[serde(default)]
    pub day: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::XorShift;

    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn iv(start: i64, end: i64) -> Interval {
        Interval {
            start: T0 + start,
            end: T0 + end,
        }
    }

    #[test]
    fn the_reservations_are_the_spec_amounts() {
        assert_eq!(Reservation::OpenWorkspace.seconds(), 300);
        assert_eq!(Reservation::CandidateChecks.seconds(), 900);
        assert_eq!(Reservation::EditSessionCommand.seconds(), 480);
        assert_eq!(SANDBOX_MONTHLY_SECONDS, 20 * 3600);
    }

    #[test]
    fn a_single_use_is_charged_its_length_plus_the_idle_tail() {
        let s = settle(&[], T0, T0 + 300).unwrap();
        assert_eq!(s.charged_seconds, 420);
        assert_eq!(s.awake, vec![iv(0, 420)]);
    }

    #[test]
    fn two_overlapping_uses_are_charged_once() {
        // A runs 0..600, B runs 100..500 entirely inside A: B adds nothing.
        let a = settle(&[], T0, T0 + 600).unwrap();
        assert_eq!(a.charged_seconds, 720);
        let b = settle(&a.awake, T0 + 100, T0 + 500).unwrap();
        assert_eq!(b.charged_seconds, 0);
        assert_eq!(b.awake, vec![iv(0, 720)]);
        // Partly overlapping: C runs 650..800, awake until 920; 720..920 is new.
        let c = settle(&b.awake, T0 + 650, T0 + 800).unwrap();
        assert_eq!(c.charged_seconds, 200);
        assert_eq!(a.charged_seconds + b.charged_seconds + c.charged_seconds, 920);
    }

    #[test]
    fn a_use_inside_another_uses_tail_is_charged_only_its_excess() {
        // A runs 0..60 (awake until 180); B starts 60 s after A ended, at 120, and runs to 150
        // (awake until 270): only 180..270 is new.
        let a = settle(&[], T0, T0 + 60).unwrap();
        assert_eq!(a.charged_seconds, 180);
        let b = settle(&a.awake, T0 + 120, T0 + 150).unwrap();
        assert_eq!(b.charged_seconds, 90);
        assert_eq!(b.awake, vec![iv(0, 270)]);
    }

    #[test]
    fn a_use_after_the_container_slept_is_charged_in_full() {
        let a = settle(&[], T0, T0 + 60).unwrap();
        let b = settle(&a.awake, T0 + 1_000, T0 + 1_010).unwrap();
        assert_eq!(b.charged_seconds, 130);
        assert_eq!(b.awake, vec![iv(0, 180), iv(1_000, 1_130)]);
    }

    #[test]
    fn a_use_settled_late_and_out_of_order_fills_only_the_gap() {
        let charged = [iv(0, 100), iv(300, 400)];
        // Awake 50..350: only the gap 100..300 is new.
        let s = settle(&charged, T0 + 50, T0 + 230).unwrap();
        assert_eq!(s.charged_seconds, 200);
        assert_eq!(s.awake, vec![iv(0, 400)]);
    }

    #[test]
    fn a_use_that_ends_before_it_starts_is_refused() {
        assert_eq!(
            settle(&[], T0 + 10, T0 + 5),
            Err(InvalidUse {
                start: T0 + 10,
                end: T0 + 5
            })
        );
    }

    #[test]
    fn a_reservation_that_reaches_the_cap_exactly_is_allowed() {
        assert_eq!(reserve(71_000, 100, 900), Ok(()));
    }

    #[test]
    fn a_reservation_past_the_cap_is_refused() {
        let err = reserve(71_000, 300, 900).unwrap_err();
        assert_eq!(
            err,
            CapExceeded {
                used: 71_000,
                reserved: 300,
                requested: 900,
                cap: 72_000
            }
        );
        assert!(err.to_string().starts_with("sandbox_cap"));
        // Open reservations count: 150 edit commands fit in an empty month, the 151st does not.
        let per = Reservation::EditSessionCommand.seconds();
        assert_eq!(reserve(0, 149 * per, per), Ok(()));
        assert!(reserve(0, 150 * per, per).is_err());
    }

    #[test]
    fn a_reservation_never_overflows() {
        assert!(reserve(u64::MAX, u64::MAX, 1).is_err());
    }

    #[test]
    fn the_total_charge_equals_the_measure_of_the_union_of_the_awake_intervals() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _round in 0..300 {
            let uses: Vec<(i64, i64)> = (0..rng.below(12) + 1)
                .map(|_| {
                    let start = rng.below(3_000);
                    (start, start + rng.below(400))
                })
                .collect();
            let mut charged = Vec::new();
            let mut total = 0;
            for &(s, e) in &uses {
                let settlement = settle(&charged, T0 + s, T0 + e).unwrap();
                assert!(settlement.charged_seconds <= u64::try_from(e - s + IDLE_TAIL_SECONDS).unwrap());
                total += settlement.charged_seconds;
                charged = settlement.awake;
            }
            // Independent check: count the seconds covered by some [start, end + tail).
            let mut covered = vec![false; 3_000 + 400 + 200];
            for &(s, e) in &uses {
                for second in s..e + IDLE_TAIL_SECONDS {
                    covered[usize::try_from(second).unwrap()] = true;
                }
            }
            let expected = covered.iter().filter(|c| **c).count() as u64;
            assert_eq!(total, expected, "uses {uses:?}");
            let awake: Vec<Interval> = uses.iter().map(|&(s, e)| iv(s, e).awake()).collect();
            assert_eq!(total, measure(&awake));
            assert_eq!(measure(&charged), total);
        }
    }
}

/// The UTC month (`YYYY-MM`) a unix time falls in: the meter's period.
pub fn month_of(unix_secs: i64) -> String {
    crate::calendar::utc_month(unix_secs)
}

#[cfg(test)]
mod month_tests {
    use super::{Close, Reservation, close_of, month_of};

    #[test]
    fn the_meter_period_is_the_utc_month() {
        assert_eq!(month_of(0), "1970-01");
        assert_eq!(month_of(1_796_009_402), "2026-11");
        assert_eq!(month_of(1_798_761_599), "2026-12"); // 2026-12-31T23:59:59Z
        assert_eq!(month_of(1_798_761_600), "2027-01");
        assert_eq!(month_of(951_782_400), "2000-02"); // 2000-02-29
    }

    #[test]
    fn a_use_that_started_is_charged_and_one_that_never_did_is_released() {
        assert_eq!(close_of(Some(100), 160), Close::Settle { start: 100, end: 160 });
        assert_eq!(close_of(Some(100), 90), Close::Settle { start: 100, end: 100 });
        assert_eq!(close_of(None, 160), Close::Release);
    }

    #[test]
    fn a_purposes_stored_name_is_its_serialized_name() {
        for r in [
            Reservation::OpenWorkspace,
            Reservation::CandidateChecks,
            Reservation::EditSessionCommand,
        ] {
            assert_eq!(serde_json::to_value(r).unwrap(), serde_json::json!(r.as_str()));
        }
    }
}
