//! The dispatch rule: claim strictly in ascending `queue_seq`, passing over only a job one of
//! whose lanes is full (its harness, its provider or one of its models is at its cap), or a
//! game-jam job of a model that already has a jam run in flight.
//!
//! The store hands this function, per harness with a free slot, the first waiting jobs of that
//! harness in queue order. Walking their union in `queue_seq` order gives the same claims as a
//! walk over the whole queue, because a job of a harness with no free slot could only ever be
//! passed over. When a harness's list was cut short and runs out while the harness still has
//! slots, the walk stops at the end of that list (nothing after it may be claimed before what is
//! behind the cut) and the harness is reported as starved so the store can fetch deeper.
//!
//! Provider and model lanes are shared across harnesses: a job occupies each of them beside its
//! harness lane, and a job passed over because one of them is full is held individually, named by
//! that lane, since the lane's other jobs may belong to harnesses the walk never read.

use crate::ids::JobId;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A lane shared across harnesses: a provider's or a model's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LaneKey {
    Provider(String),
    Model(String),
}

impl fmt::Display for LaneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaneKey::Provider(p) => write!(f, "provider:{p}"),
            LaneKey::Model(m) => write!(f, "model:{m}"),
        }
    }
}

/// The name a harness lane goes by where a held job names what holds it.
pub fn harness_lane(harness: &str) -> String {
    format!("harness:{harness}")
}

/// The name a held game-jam job gives for what holds it.
pub fn jam_lane(model: &str) -> String {
    format!("jam:{model}")
}

/// A waiting (queued or pending) job, as the claim sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub id: JobId,
    pub queue_seq: i64,
    pub harness: String,
    /// The provider and model lanes the job occupies besides its harness lane (those with a cap).
    pub lanes: Vec<LaneKey>,
    /// The models of a game-jam job; empty for any other test type.
    pub jam_models: Vec<String>,
    pub pending: bool,
    /// What a pending job was last held by (a lane name), if recorded.
    pub held_by: Option<String>,
}

/// One lane: its cap, its occupancy (dispatched + starting + running) and, for a harness lane,
/// whether the candidate list given for it was cut short.
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

/// A job held back individually, and the lane (or rule) that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub id: JobId,
    pub by: String,
}

/// What one claim does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimPlan {
    /// Jobs to dispatch, in ascending `queue_seq`.
    pub dispatch: Vec<JobId>,
    /// Jobs held back individually (a full provider or model lane, the jam rule, or a harness
    /// missing from the catalogue): queued ones, and pending ones now held by something else.
    pub hold: Vec<Held>,
    /// Harnesses that can take no more once this claim is applied, each with the lane that holds
    /// their queued jobs back: the harness's own, or the provider lane every one of its jobs
    /// occupies.
    pub full: Vec<(String, String)>,
    /// Harnesses whose list ran out while they still had slots; fetch deeper and plan again.
    pub starved: Vec<String>,
}

impl ClaimPlan {
    fn hold(&mut self, w: &Waiting, by: String) {
        if !w.pending || w.held_by.as_deref() != Some(by.as_str()) {
            self.hold.push(Held { id: w.id.clone(), by });
        }
    }
}

/// Plans one claim. `candidates` may come in any order; `lanes` has an entry for every harness
/// in the catalogue; `shared` has an entry for every provider and model lane with a cap (a lane a
/// job names that is missing there is unbounded); `bound` names, for a harness whose every job
/// occupies one provider lane (it runs on that provider and takes no other), that lane: once it
/// is full the harness can take nothing more, however many slots it has left;
/// `jam_in_flight` lists the models with a game-jam run occupying a slot.
pub fn plan_claims(
    candidates: &[Waiting],
    lanes: &BTreeMap<String, Lane>,
    shared: &BTreeMap<LaneKey, Lane>,
    bound: &BTreeMap<String, LaneKey>,
    jam_in_flight: &BTreeSet<String>,
) -> ClaimPlan {
    let mut sorted: Vec<&Waiting> = candidates.iter().collect();
    sorted.sort_by_key(|w| w.queue_seq);

    let mut last_seq: BTreeMap<&str, i64> = BTreeMap::new();
    for w in &sorted {
        last_seq.insert(w.harness.as_str(), w.queue_seq);
    }
    let mut occupied: BTreeMap<&str, i64> = lanes.iter().map(|(h, l)| (h.as_str(), l.occupied)).collect();
    let mut shared_occ: BTreeMap<&LaneKey, i64> = shared.iter().map(|(k, l)| (k, l.occupied)).collect();
    let mut jams = jam_in_flight.clone();
    let mut plan = ClaimPlan::default();

    // A truncated list bounds the walk only if its harness still has room at the list's end;
    // that is known only after the walk, so the bound is applied afterwards.
    for w in &sorted {
        let (Some(lane), Some(occ)) = (lanes.get(&w.harness), occupied.get(w.harness.as_str()).copied()) else {
            plan.hold(w, harness_lane(&w.harness));
            continue;
        };
        if occ >= lane.cap {
            continue; // passed over: its harness is at its cap (held in bulk below)
        }
        let full_lane = w.lanes.iter().find(|k| {
            shared
                .get(*k)
                .is_some_and(|l| shared_occ.get(k).copied().unwrap_or(0) >= l.cap)
        });
        if let Some(k) = full_lane {
            plan.hold(w, k.to_string());
            continue;
        }
        if let Some(m) = w.jam_models.iter().find(|m| jams.contains(*m)) {
            plan.hold(w, jam_lane(m));
            continue;
        }
        occupied.insert(w.harness.as_str(), occ + 1);
        for k in &w.lanes {
            if let Some(n) = shared_occ.get_mut(k) {
                *n += 1;
            }
        }
        jams.extend(w.jam_models.iter().cloned());
        plan.dispatch.push(w.id.clone());
    }
    let occ_of = |h: &str| occupied.get(h).copied().unwrap_or(0);
    // What holds a harness back once the walk is done: its own cap, else its bound provider lane.
    let holder = |h: &str, l: &Lane| -> Option<String> {
        if occ_of(h) >= l.cap {
            return Some(harness_lane(h));
        }
        let k = bound.get(h)?;
        let cap = shared.get(k)?.cap;
        (shared_occ.get(k).copied().unwrap_or(0) >= cap).then(|| k.to_string())
    };
    plan.starved = lanes
        .iter()
        .filter(|(h, l)| l.truncated && holder(h, l).is_none())
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
            let within = |id: &JobId| sorted.iter().any(|w| &w.id == id && w.queue_seq <= bound);
            plan.dispatch.retain(|id| within(id));
            plan.hold.retain(|h| within(&h.id));
        }
        plan.full.clear();
        return plan;
    }
    plan.full = lanes
        .iter()
        .filter_map(|(h, l)| holder(h, l).map(|by| (h.clone(), by)))
        .collect();
    // A full harness's jobs are held in bulk, naming its holder: no need to name each one.
    let harness_of: BTreeMap<&JobId, &str> = sorted.iter().map(|w| (&w.id, w.harness.as_str())).collect();
    let full: BTreeSet<&str> = plan.full.iter().map(|(h, _)| h.as_str()).collect();
    plan.hold.retain(|x| {
        harness_of
            .get(&x.id)
            .is_none_or(|h| !full.contains(h) || x.by.starts_with("jam:"))
    });
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
            lanes: vec![],
            jam_models: vec![],
            pending: false,
            held_by: None,
        }
    }

    fn no_shared() -> BTreeMap<LaneKey, Lane> {
        BTreeMap::new()
    }

    fn held(plan: &ClaimPlan) -> Vec<&str> {
        plan.hold.iter().map(|h| h.id.as_str()).collect()
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
        let plan = plan_claims(
            &jobs,
            &lanes(&[("a", 1, 0), ("b", 2, 0)]),
            &no_shared(),
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        assert_eq!(plan.dispatch, vec!["1", "3", "5"]);
        assert_eq!(
            plan.full,
            vec![("a".into(), "harness:a".into()), ("b".into(), "harness:b".into())]
        );
        assert!(plan.hold.is_empty());
    }

    #[test]
    fn a_harness_already_at_its_cap_gets_nothing() {
        let jobs = [job("1", 1, "a"), job("2", 2, "b")];
        let plan = plan_claims(
            &jobs,
            &lanes(&[("a", 2, 2), ("b", 1, 0)]),
            &no_shared(),
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
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
            &no_shared(),
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        assert_eq!(plan.dispatch, vec!["1", "3"]);
        assert_eq!(held(&plan), vec!["2"]);
        let plan = plan_claims(
            &[j1],
            &lanes(&[("a", 5, 0)]),
            &no_shared(),
            &BTreeMap::new(),
            &BTreeSet::from(["m".to_string()]),
        );
        assert!(plan.dispatch.is_empty());
    }

    #[test]
    fn a_cut_list_that_runs_out_with_room_left_bounds_the_walk() {
        // Harness a was given only job 1 (its list was cut), b has jobs 2 and 5.
        let jobs = [job("1", 1, "a"), job("2", 2, "b"), job("5", 5, "b")];
        let mut l = lanes(&[("a", 3, 0), ("b", 3, 0)]);
        l.get_mut("a").unwrap().truncated = true;
        let plan = plan_claims(&jobs, &l, &no_shared(), &BTreeMap::new(), &BTreeSet::new());
        assert_eq!(plan.starved, vec!["a"]);
        assert_eq!(plan.dispatch, vec!["1"]);
    }

    #[test]
    fn a_cut_list_whose_harness_fills_up_does_not_bound_anything() {
        let jobs = [job("1", 1, "a"), job("2", 2, "b"), job("5", 5, "b")];
        let mut l = lanes(&[("a", 1, 0), ("b", 3, 0)]);
        l.get_mut("a").unwrap().truncated = true;
        let plan = plan_claims(&jobs, &l, &no_shared(), &BTreeMap::new(), &BTreeSet::new());
        assert!(plan.starved.is_empty());
        assert_eq!(plan.dispatch, vec!["1", "2", "5"]);
    }

    #[test]
    fn a_pending_job_is_not_held_a_second_time() {
        let mut j1 = job("1", 1, "a");
        j1.jam_models = vec!["m".into()];
        j1.pending = true;
        j1.held_by = Some("jam:m".into());
        let plan = plan_claims(
            &[j1.clone()],
            &lanes(&[("a", 5, 0)]),
            &no_shared(),
            &BTreeMap::new(),
            &BTreeSet::from(["m".to_string()]),
        );
        assert!(plan.hold.is_empty() && plan.dispatch.is_empty());
        // Held by something else now: it is held again, naming the new lane.
        j1.jam_models = vec![];
        j1.lanes = vec![LaneKey::Provider("p".into())];
        let shared = BTreeMap::from([(
            LaneKey::Provider("p".into()),
            Lane {
                cap: 1,
                occupied: 1,
                truncated: false,
            },
        )]);
        let plan = plan_claims(
            &[j1],
            &lanes(&[("a", 5, 0)]),
            &shared,
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        assert_eq!(
            plan.hold,
            vec![Held {
                id: "1".into(),
                by: "provider:p".into()
            }]
        );
    }

    #[test]
    fn a_harness_whose_provider_lane_is_full_is_full_and_never_starved() {
        let p = LaneKey::Provider("acme".into());
        let jobs = [
            on(job("1", 1, "a"), std::slice::from_ref(&p)),
            on(job("2", 2, "a"), std::slice::from_ref(&p)),
            job("3", 3, "b"),
        ];
        let mut l = lanes(&[("a", 5, 0), ("b", 5, 0)]);
        if let Some(a) = l.get_mut("a") {
            a.truncated = true; // more of a's jobs wait behind the list: reading them is pointless
        }
        let bound = BTreeMap::from([("a".to_string(), p.clone())]);
        let plan = plan_claims(&jobs, &l, &shared(&[(p, 1, 0)]), &bound, &BTreeSet::new());
        assert!(plan.starved.is_empty());
        assert_eq!(plan.dispatch, vec!["1", "3"]);
        assert_eq!(plan.full, vec![("a".into(), "provider:acme".into())]);
        assert!(plan.hold.is_empty(), "a's jobs are held in bulk, naming the provider");
    }

    fn shared(spec: &[(LaneKey, i64, i64)]) -> BTreeMap<LaneKey, Lane> {
        spec.iter()
            .map(|(k, cap, occ)| {
                (
                    k.clone(),
                    Lane {
                        cap: *cap,
                        occupied: *occ,
                        truncated: false,
                    },
                )
            })
            .collect()
    }

    fn on(mut w: Waiting, lanes: &[LaneKey]) -> Waiting {
        w.lanes = lanes.to_vec();
        w
    }

    #[test]
    fn a_provider_lane_of_one_across_two_harnesses_holds_the_second_job_naming_the_lane() {
        let p = LaneKey::Provider("acme".into());
        let jobs = [
            on(job("1", 1, "a"), std::slice::from_ref(&p)),
            on(job("2", 2, "b"), std::slice::from_ref(&p)),
            job("3", 3, "b"),
        ];
        let plan = plan_claims(
            &jobs,
            &lanes(&[("a", 5, 0), ("b", 5, 0)]),
            &shared(&[(p, 1, 0)]),
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        assert_eq!(plan.dispatch, vec!["1", "3"]);
        assert_eq!(
            plan.hold,
            vec![Held {
                id: "2".into(),
                by: "provider:acme".into()
            }]
        );
        assert!(plan.full.is_empty(), "no harness is full");
    }

    #[test]
    fn a_model_lane_already_full_passes_over_its_jobs_and_keeps_queue_order_for_the_rest() {
        let m = LaneKey::Model("big".into());
        let jobs = [
            on(job("1", 1, "a"), std::slice::from_ref(&m)),
            job("2", 2, "a"),
            on(job("3", 3, "a"), std::slice::from_ref(&m)),
        ];
        let plan = plan_claims(
            &jobs,
            &lanes(&[("a", 5, 0)]),
            &shared(&[(m, 2, 2)]),
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        assert_eq!(plan.dispatch, vec!["2"]);
        assert_eq!(held(&plan), vec!["1", "3"]);
        assert_eq!(plan.hold[0].by, "model:big");
    }

    #[test]
    fn a_lane_without_a_cap_bounds_nothing() {
        let jobs = [on(job("1", 1, "a"), &[LaneKey::Model("free".into())]), job("2", 2, "a")];
        let plan = plan_claims(
            &jobs,
            &lanes(&[("a", 5, 0)]),
            &no_shared(),
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        assert_eq!(plan.dispatch, vec!["1", "2"]);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        const HARNESSES: [&str; 3] = ["h0", "h1", "h2"];

        fn key(i: usize) -> LaneKey {
            match i {
                0 => LaneKey::Provider("p0".into()),
                1 => LaneKey::Provider("p1".into()),
                2 => LaneKey::Model("m0".into()),
                _ => LaneKey::Model("m1".into()),
            }
        }

        fn arb_jobs() -> impl Strategy<Value = Vec<Waiting>> {
            prop::collection::vec((0..3usize, prop::collection::btree_set(0..4usize, 0..3)), 0..40).prop_map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, (h, ks))| {
                        let mut w = job(&format!("j{i}"), i as i64 * 3 + 1, HARNESSES[h]);
                        w.lanes = ks.into_iter().map(key).collect();
                        w
                    })
                    .collect()
            })
        }

        fn arb_lanes() -> impl Strategy<Value = (BTreeMap<String, Lane>, BTreeMap<LaneKey, Lane>)> {
            let lane = (1..5i64, 0..6i64).prop_map(|(cap, occ)| Lane {
                cap,
                occupied: occ,
                truncated: false,
            });
            (prop::collection::vec(lane.clone(), 3), prop::collection::vec(lane, 4)).prop_map(|(h, s)| {
                (
                    HARNESSES.iter().map(|n| n.to_string()).zip(h).collect(),
                    s.into_iter().enumerate().map(|(i, l)| (key(i), l)).collect(),
                )
            })
        }

        proptest! {
            #[test]
            fn no_claim_ever_makes_a_lane_exceed_its_cap(jobs in arb_jobs(), (hl, sl) in arb_lanes()) {
                let plan = plan_claims(&jobs, &hl, &sl, &BTreeMap::new(), &BTreeSet::new());
                let claimed: Vec<&Waiting> = jobs.iter().filter(|w| plan.dispatch.contains(&w.id)).collect();
                for (h, l) in &hl {
                    let n = claimed.iter().filter(|w| &w.harness == h).count() as i64;
                    prop_assert!(n == 0 || l.occupied + n <= l.cap, "harness {h}: {} + {n} > {}", l.occupied, l.cap);
                }
                for (k, l) in &sl {
                    let n = claimed.iter().filter(|w| w.lanes.contains(k)).count() as i64;
                    prop_assert!(n == 0 || l.occupied + n <= l.cap, "{k}: {} + {n} > {}", l.occupied, l.cap);
                }
            }

            #[test]
            fn claims_within_lanes_follow_queue_seq(jobs in arb_jobs(), (hl, sl) in arb_lanes()) {
                let plan = plan_claims(&jobs, &hl, &sl, &BTreeMap::new(), &BTreeSet::new());
                let seq = |id: &JobId| jobs.iter().find(|w| &w.id == id).map(|w| w.queue_seq);
                let seqs: Vec<Option<i64>> = plan.dispatch.iter().map(seq).collect();
                prop_assert!(seqs.windows(2).all(|p| p[0] < p[1]), "dispatch is in queue order");
                // A job passed over had one of its lanes full when the walk reached it: the
                // lane's earlier claims filled it. So no later job took a slot it could have had.
                for w in &jobs {
                    if plan.dispatch.contains(&w.id) {
                        continue;
                    }
                    let before = |f: &dyn Fn(&Waiting) -> bool| jobs
                        .iter()
                        .filter(|c| c.queue_seq < w.queue_seq && plan.dispatch.contains(&c.id) && f(c))
                        .count() as i64;
                    let h = &hl[&w.harness];
                    let harness_full = h.occupied + before(&|c| c.harness == w.harness) >= h.cap;
                    let shared_full = w.lanes.iter().any(|k| {
                        let l = &sl[k];
                        l.occupied + before(&|c| c.lanes.contains(k)) >= l.cap
                    });
                    prop_assert!(harness_full || shared_full, "{} was passed over with every lane free", w.id);
                    if !harness_full {
                        let bulk = plan.full.iter().any(|(h, _)| h == &w.harness);
                        prop_assert!(bulk || plan.hold.iter().any(|x| x.id == w.id), "{} is held, naming its lane", w.id);
                    }
                }
            }
        }
    }
}
