//! The dispatch rule: claim strictly in ascending `queue_seq`, passing over only a job whose
//! harness is at its cap, or a game-jam job of a model that already has a jam run in flight.
//!
//! The store hands this function, per harness with a free slot, the first waiting jobs of that
//! harness in queue order. Walking their union in `queue_seq` order gives the same claims as a
//! walk over the whole queue, because a job of a harness with no free slot could only ever be
//! passed over. When a harness's list was cut short and runs out while the harness still has
//! slots, the walk stops at the end of that list (nothing after it may be claimed before what is
//! behind the cut) and the harness is reported as starved so the store can fetch deeper.

use crate::ids::JobId;
use std::collections::{BTreeMap, BTreeSet};

/// A waiting (queued or pending) job, as the claim sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub id: JobId,
    pub queue_seq: i64,
    pub harness: String,
    /// The models of a game-jam job; empty for any other test type.
    pub jam_models: Vec<String>,
    pub pending: bool,
}

/// One harness lane: its cap, its occupancy (dispatched + starting + running) and whether the
/// candidate list given for it was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    pub cap: i64,
    pub occupied: i64,
    pub truncated: bool,
}

impl Lane {
    pub fn free(&self) -> i64 {
        (self.cap - self.occupied).max(0)
    }
}

/// What one claim does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimPlan {
    /// Jobs to dispatch, in ascending `queue_seq`.
    pub dispatch: Vec<JobId>,
    /// Queued jobs held back individually (jam rule, or a harness missing from the catalogue).
    pub hold: Vec<JobId>,
    /// Harnesses at their cap once this claim is applied: their queued jobs are held back.
    pub full: Vec<String>,
    /// Harnesses whose list ran out while they still had slots; fetch deeper and plan again.
    pub starved: Vec<String>,
}

/// Plans one claim. `candidates` may come in any order; `lanes` has an entry for every harness
/// in the catalogue; `jam_in_flight` lists the models with a game-jam run occupying a slot.
pub fn plan_claims(
    candidates: &[Waiting],
    lanes: &BTreeMap<String, Lane>,
    jam_in_flight: &BTreeSet<String>,
) -> ClaimPlan {
    let mut sorted: Vec<&Waiting> = candidates.iter().collect();
    sorted.sort_by_key(|w| w.queue_seq);

    let mut last_seq: BTreeMap<&str, i64> = BTreeMap::new();
    for w in &sorted {
        last_seq.insert(w.harness.as_str(), w.queue_seq);
    }
    let mut occupied: BTreeMap<&str, i64> = lanes.iter().map(|(h, l)| (h.as_str(), l.occupied)).collect();
    let mut jams = jam_in_flight.clone();
    let mut plan = ClaimPlan::default();

    // A truncated list bounds the walk only if its harness still has room at the list's end;
    // that is known only after the walk, so the bound is applied afterwards.
    for w in &sorted {
        let Some(lane) = lanes.get(&w.harness) else {
            if !w.pending {
                plan.hold.push(w.id.clone());
            }
            continue;
        };
        let occ = occupied.get_mut(w.harness.as_str()).expect("lane occupancy");
        if *occ >= lane.cap {
            continue; // passed over: its harness is at its cap (held in bulk below)
        }
        if w.jam_models.iter().any(|m| jams.contains(m)) {
            if !w.pending {
                plan.hold.push(w.id.clone());
            }
            continue;
        }
        *occ += 1;
        jams.extend(w.jam_models.iter().cloned());
        plan.dispatch.push(w.id.clone());
    }
    plan.starved = lanes
        .iter()
        .filter(|(h, l)| l.truncated && occupied[h.as_str()] < l.cap)
        .map(|(h, _)| h.clone())
        .collect();
    if !plan.starved.is_empty() {
        // Only claims up to the shortest starved list are safe; recompute up to that bound.
        let bound = plan
            .starved
            .iter()
            .filter_map(|h| last_seq.get(h.as_str()).copied())
            .min();
        if let Some(bound) = bound {
            plan.dispatch
                .retain(|id| sorted.iter().any(|w| &w.id == id && w.queue_seq <= bound));
            plan.hold
                .retain(|id| sorted.iter().any(|w| &w.id == id && w.queue_seq <= bound));
        }
        plan.full.clear();
        return plan;
    }
    plan.full = lanes
        .iter()
        .filter(|(h, l)| occupied[h.as_str()] >= l.cap)
        .map(|(h, _)| h.clone())
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, seq: i64, harness: &str) -> Waiting {
        Waiting {
            id: id.into(),
            queue_seq: seq,
            harness: harness.into(),
            jam_models: vec![],
            pending: false,
        }
    }

    fn lanes(spec: &[(&str, i64, i64)]) -> BTreeMap<String, Lane> {
        spec.iter()
            .map(|(h, cap, occ)| {
                (
                    h.to_string(),
                    Lane {
                        cap: *cap,
                        occupied: *occ,
                        truncated: false,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn claims_follow_queue_order_and_pass_over_only_a_harness_at_its_cap() {
        let jobs = [
            job("1", 1, "a"),
            job("2", 2, "a"),
            job("3", 3, "b"),
            job("4", 4, "a"),
            job("5", 5, "b"),
        ];
        let plan = plan_claims(&jobs, &lanes(&[("a", 1, 0), ("b", 2, 0)]), &BTreeSet::new());
        assert_eq!(plan.dispatch, vec!["1", "3", "5"]);
        assert_eq!(plan.full, vec!["a", "b"]);
        assert!(plan.hold.is_empty());
    }

    #[test]
    fn a_harness_already_at_its_cap_gets_nothing() {
        let jobs = [job("1", 1, "a"), job("2", 2, "b")];
        let plan = plan_claims(&jobs, &lanes(&[("a", 2, 2), ("b", 1, 0)]), &BTreeSet::new());
        assert_eq!(plan.dispatch, vec!["2"]);
    }

    #[test]
    fn a_game_jam_job_waits_while_its_model_has_a_jam_run_in_flight() {
        let mut j1 = job("1", 1, "a");
        j1.jam_models = vec!["m".into()];
        let mut j2 = job("2", 2, "b");
        j2.jam_models = vec!["m".into()];
        let j3 = job("3", 3, "b");
        let plan = plan_claims(
            &[j1.clone(), j2.clone(), j3],
            &lanes(&[("a", 5, 0), ("b", 5, 0)]),
            &BTreeSet::new(),
        );
        assert_eq!(plan.dispatch, vec!["1", "3"]);
        assert_eq!(plan.hold, vec!["2"]);
        let plan = plan_claims(&[j1], &lanes(&[("a", 5, 0)]), &BTreeSet::from(["m".to_string()]));
        assert!(plan.dispatch.is_empty());
    }

    #[test]
    fn a_cut_list_that_runs_out_with_room_left_bounds_the_walk() {
        // Harness a was given only job 1 (its list was cut), b has jobs 2 and 5.
        let jobs = [job("1", 1, "a"), job("2", 2, "b"), job("5", 5, "b")];
        let mut l = lanes(&[("a", 3, 0), ("b", 3, 0)]);
        l.get_mut("a").unwrap().truncated = true;
        let plan = plan_claims(&jobs, &l, &BTreeSet::new());
        assert_eq!(plan.starved, vec!["a"]);
        assert_eq!(plan.dispatch, vec!["1"]);
    }

    #[test]
    fn a_cut_list_whose_harness_fills_up_does_not_bound_anything() {
        let jobs = [job("1", 1, "a"), job("2", 2, "b"), job("5", 5, "b")];
        let mut l = lanes(&[("a", 1, 0), ("b", 3, 0)]);
        l.get_mut("a").unwrap().truncated = true;
        let plan = plan_claims(&jobs, &l, &BTreeSet::new());
        assert!(plan.starved.is_empty());
        assert_eq!(plan.dispatch, vec!["1", "2", "5"]);
    }

    #[test]
    fn a_pending_job_is_not_held_a_second_time() {
        let mut j1 = job("1", 1, "a");
        j1.jam_models = vec!["m".into()];
        j1.pending = true;
        let plan = plan_claims(&[j1], &lanes(&[("a", 5, 0)]), &BTreeSet::from(["m".to_string()]));
        assert!(plan.hold.is_empty() && plan.dispatch.is_empty());
    }
}
