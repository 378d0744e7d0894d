//! The fork rule (`planCandidateSets`): which Candidates a verification round composes from the
//! Change's proposed ChangeSets and its open conflicts.
//!
//! Without a counting conflict there is one Candidate holding every proposed ChangeSet. The first
//! counting conflict forks the round: a `confirmed` conflict gives one Candidate per side, a
//! `fork_required` one adds the combined Candidate that shows whether the sides work together.
//! Each side Candidate also holds the shared ChangeSets. A round has at most `MAX_CANDIDATES`, so
//! the ChangeSets of any further counting conflict wait for a later round.

use crate::change::{ChangeSet, Task};
use crate::conflict::{ConflictStatus, depends_on};
use crate::ids::{ChangeSetId, ConflictId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Candidates per Change per round.
pub const MAX_CANDIDATES: usize = 3;

/// An open conflict between two Tasks (by Task id), in the order the conflicts were recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenConflict {
    pub id: ConflictId,
    pub status: ConflictStatus,
    pub task_ids: [String; 2],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CandidateRole {
    /// No counting conflict: every proposed ChangeSet.
    All,
    /// The first side of the conflict, with the shared ChangeSets.
    SideA,
    /// The second side, with the shared ChangeSets.
    SideB,
    /// Both sides, the shared ChangeSets and those that need both sides.
    Combined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlannedCandidate {
    pub role: CandidateRole,
    /// In Work Graph order.
    pub change_set_ids: Vec<ChangeSetId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CandidateSetPlan {
    pub candidates: Vec<PlannedCandidate>,
    /// The conflict that forked the round.
    pub conflict_id: Option<ConflictId>,
    /// Proposed ChangeSets this round leaves for a later one.
    pub waiting: Vec<ChangeSetId>,
}

/// `planCandidateSets`.
/// - `tasks`: the Change's Tasks (their dependencies say which ChangeSets need which side);
/// - `proposed`: the proposed ChangeSets, in Work Graph order;
/// - `conflicts`: the open (unresolved) conflicts in the order they were recorded.
pub fn plan_candidate_sets(tasks: &[Task], proposed: &[&ChangeSet], conflicts: &[OpenConflict]) -> CandidateSetPlan {
    let has_proposed = |task_id: &str| proposed.iter().any(|c| c.task_id == task_id);
    let counting: Vec<&OpenConflict> = conflicts
        .iter()
        .filter(|c| c.status != ConflictStatus::Dismissed)
        .filter(|c| c.task_ids[0] != c.task_ids[1])
        .filter(|c| has_proposed(&c.task_ids[0]) && has_proposed(&c.task_ids[1]))
        .collect();
    let ids = |sets: &[&&ChangeSet]| sets.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
    let Some(first) = counting.first() else {
        return CandidateSetPlan {
            candidates: vec![PlannedCandidate {
                role: CandidateRole::All,
                change_set_ids: ids(&proposed.iter().collect::<Vec<_>>()),
            }],
            conflict_id: None,
            waiting: vec![],
        };
    };
    let key_of = |task_id: &str| tasks.iter().find(|t| t.id == task_id).map(|t| t.key.clone());
    let (a, b) = (first.task_ids[0].clone(), first.task_ids[1].clone());
    let (ka, kb) = (key_of(&a), key_of(&b));
    let needs = |task_id: &str, side: &Option<String>| match (key_of(task_id), side) {
        (Some(k), Some(s)) => &k == s || depends_on(tasks, &k, s),
        _ => false,
    };
    // Tasks the first sides are built on cannot wait without them.
    let built_on_by_sides = |task_id: &str| {
        let k = key_of(task_id);
        [&ka, &kb].iter().any(|side| match (side, &k) {
            (Some(s), Some(k)) => depends_on(tasks, s, k),
            _ => false,
        })
    };
    let mut wait: BTreeSet<String> = counting
        .iter()
        .skip(1)
        .filter(|c| {
            let pair: BTreeSet<&String> = c.task_ids.iter().collect();
            pair != [&a, &b].into_iter().collect()
        })
        .flat_map(|c| c.task_ids.iter().cloned())
        .filter(|t| *t != a && *t != b && !built_on_by_sides(t))
        .collect();
    let roots: Vec<Option<String>> = wait.iter().map(|t| key_of(t)).collect();
    for t in tasks {
        if roots.iter().flatten().any(|r| depends_on(tasks, &t.key, r)) {
            wait.insert(t.id.to_string());
        }
    }
    wait.remove(&a);
    wait.remove(&b);

    let (mut shared, mut side_a, mut side_b, mut both, mut waiting) = (vec![], vec![], vec![], vec![], vec![]);
    for c in proposed {
        let t = c.task_id.as_str();
        if wait.contains(t) {
            waiting.push(c);
        } else if t == a {
            side_a.push(c);
        } else if t == b {
            side_b.push(c);
        } else {
            match (needs(t, &ka), needs(t, &kb)) {
                (true, true) => both.push(c),
                (true, false) => side_a.push(c),
                (false, true) => side_b.push(c),
                (false, false) => shared.push(c),
            }
        }
    }
    let in_order = |parts: &[&Vec<&&ChangeSet>]| {
        let chosen: BTreeSet<&str> = parts.iter().flat_map(|p| p.iter().map(|c| c.id.as_str())).collect();
        let sets: Vec<&&ChangeSet> = proposed.iter().filter(|c| chosen.contains(c.id.as_str())).collect();
        ids(&sets)
    };
    let mut candidates = vec![
        PlannedCandidate {
            role: CandidateRole::SideA,
            change_set_ids: in_order(&[&shared, &side_a]),
        },
        PlannedCandidate {
            role: CandidateRole::SideB,
            change_set_ids: in_order(&[&shared, &side_b]),
        },
    ];
    if first.status == ConflictStatus::ForkRequired {
        candidates.push(PlannedCandidate {
            role: CandidateRole::Combined,
            change_set_ids: in_order(&[&shared, &side_a, &side_b, &both]),
        });
    } else {
        // Without the combined Candidate, what needs both sides has nowhere to go this round.
        waiting.extend(both);
    }
    candidates.truncate(MAX_CANDIDATES);
    let waiting_ids: BTreeSet<&str> = waiting.iter().map(|c| c.id.as_str()).collect();
    CandidateSetPlan {
        candidates,
        conflict_id: Some(first.id.clone()),
        waiting: proposed
            .iter()
            .filter(|c| waiting_ids.contains(c.id.as_str()))
            .map(|c| c.id.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::TaskKind;
    use proptest::prelude::*;

    fn task(key: &str, deps: &[&str]) -> Task {
        Task {
            id: format!("task_{key}").into(),
            change_id: "chg_1".into(),
            key: key.into(),
            kind: TaskKind::Implement,
            title: key.into(),
            semantic_resources: vec![format!("{key}:api")],
            dependencies: deps.iter().map(|s| s.to_string()).collect(),
            created_at: 0,
        }
    }

    fn cs(key: &str) -> ChangeSet {
        ChangeSet {
            id: format!("cs_{key}").into(),
            task_id: format!("task_{key}").into(),
            run_id: "run_1".into(),
            commit: "0".repeat(40),
            contract_changes: vec![],
            data_changes: vec![],
            patch_ref: None,
            created_at: 0,
        }
    }

    fn conflict(id: &str, status: ConflictStatus, a: &str, b: &str) -> OpenConflict {
        OpenConflict {
            id: ConflictId::from_body(id),
            status,
            task_ids: [format!("task_{a}"), format!("task_{b}")],
        }
    }

    fn sets(plan: &CandidateSetPlan) -> Vec<(CandidateRole, Vec<String>)> {
        plan.candidates
            .iter()
            .map(|c| (c.role, c.change_set_ids.iter().map(|i| i.0.clone()).collect()))
            .collect()
    }

    struct World {
        tasks: Vec<Task>,
        sets: Vec<ChangeSet>,
    }

    impl World {
        /// t1 shared; t2 and t3 the rivals; t4 needs t2; t5 needs t2 and t3; t6 and t7 a second pair.
        fn new() -> World {
            World {
                tasks: vec![
                    task("t1", &[]),
                    task("t2", &[]),
                    task("t3", &[]),
                    task("t4", &["t2"]),
                    task("t5", &["t2", "t3"]),
                    task("t6", &[]),
                    task("t7", &[]),
                ],
                sets: ["t1", "t2", "t3", "t4", "t5", "t6", "t7"]
                    .iter()
                    .map(|k| cs(k))
                    .collect(),
            }
        }

        fn plan(&self, conflicts: &[OpenConflict]) -> CandidateSetPlan {
            let proposed: Vec<&ChangeSet> = self.sets.iter().collect();
            plan_candidate_sets(&self.tasks, &proposed, conflicts)
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| format!("cs_{s}")).collect()
    }

    #[test]
    fn without_a_counting_conflict_one_candidate_holds_every_proposed_change_set() {
        let w = World::new();
        let plan = w.plan(&[]);
        assert_eq!(
            sets(&plan),
            [(CandidateRole::All, names(&["t1", "t2", "t3", "t4", "t5", "t6", "t7"]))]
        );
        assert_eq!(plan.conflict_id, None);
        let dismissed = w.plan(&[conflict("c1", ConflictStatus::Dismissed, "t2", "t3")]);
        assert_eq!(dismissed.candidates.len(), 1);
    }

    #[test]
    fn a_conflict_counts_only_when_both_sides_have_a_proposed_change_set() {
        let w = World::new();
        let proposed: Vec<&ChangeSet> = w.sets.iter().filter(|c| c.id != "cs_t3").collect();
        let plan = plan_candidate_sets(
            &w.tasks,
            &proposed,
            &[conflict("c1", ConflictStatus::Confirmed, "t2", "t3")],
        );
        assert_eq!(plan.candidates.len(), 1);
        assert_eq!(plan.candidates[0].role, CandidateRole::All);
    }

    #[test]
    fn a_confirmed_conflict_gives_one_candidate_per_side_with_the_shared_change_sets() {
        let w = World::new();
        let plan = w.plan(&[conflict("c1", ConflictStatus::Confirmed, "t2", "t3")]);
        assert_eq!(
            sets(&plan),
            [
                (CandidateRole::SideA, names(&["t1", "t2", "t4", "t6", "t7"])),
                (CandidateRole::SideB, names(&["t1", "t3", "t6", "t7"])),
            ]
        );
        assert_eq!(plan.waiting, [ChangeSetId("cs_t5".into())]);
        assert_eq!(plan.conflict_id, Some(ConflictId::from_body("c1")));
    }

    #[test]
    fn a_fork_required_conflict_adds_the_combined_candidate() {
        let w = World::new();
        let plan = w.plan(&[conflict("c1", ConflictStatus::ForkRequired, "t2", "t3")]);
        assert_eq!(
            sets(&plan)[2],
            (
                CandidateRole::Combined,
                names(&["t1", "t2", "t3", "t4", "t5", "t6", "t7"])
            )
        );
        assert!(plan.waiting.is_empty());
    }

    #[test]
    fn a_further_counting_conflict_waits_for_a_later_round() {
        let w = World::new();
        let plan = w.plan(&[
            conflict("c1", ConflictStatus::ForkRequired, "t2", "t3"),
            conflict("c2", ConflictStatus::Confirmed, "t6", "t7"),
        ]);
        assert_eq!(plan.candidates.len(), MAX_CANDIDATES);
        assert_eq!(
            plan.waiting,
            names(&["t6", "t7"]).into_iter().map(ChangeSetId).collect::<Vec<_>>()
        );
        for c in &plan.candidates {
            assert!(!c.change_set_ids.iter().any(|i| i.0 == "cs_t6" || i.0 == "cs_t7"));
        }
    }

    #[test]
    fn a_task_a_side_is_built_on_never_waits() {
        let mut w = World::new();
        w.tasks[1] = task("t2", &["t6"]);
        let plan = w.plan(&[
            conflict("c1", ConflictStatus::Confirmed, "t2", "t3"),
            conflict("c2", ConflictStatus::Confirmed, "t6", "t7"),
        ]);
        assert_eq!(plan.waiting, [ChangeSetId("cs_t5".into()), ChangeSetId("cs_t7".into())]);
        assert!(plan.candidates[0].change_set_ids.contains(&ChangeSetId("cs_t6".into())));
    }

    fn any_conflicts() -> impl Strategy<Value = Vec<OpenConflict>> {
        let key = prop::sample::select(vec!["t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
        let status = prop::sample::select(vec![
            ConflictStatus::Confirmed,
            ConflictStatus::ForkRequired,
            ConflictStatus::Dismissed,
        ]);
        prop::collection::vec((key.clone(), key, status), 0..5).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (a, b, s))| conflict(&format!("c{i}"), s, a, b))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn every_proposed_change_set_is_in_a_candidate_or_waits_and_no_round_passes_the_cap(conflicts in any_conflicts()) {
            let w = World::new();
            let plan = w.plan(&conflicts);
            prop_assert!(!plan.candidates.is_empty() && plan.candidates.len() <= MAX_CANDIDATES);
            for c in &w.sets {
                let id = c.id.clone();
                let placed = plan.candidates.iter().any(|p| p.change_set_ids.contains(&id));
                prop_assert!(placed != plan.waiting.contains(&id), "{} placed {} waiting {:?}", c.id, placed, plan.waiting);
            }
            for p in &plan.candidates {
                prop_assert!(!p.change_set_ids.is_empty());
                // Work Graph order is kept.
                let pos: Vec<usize> = p.change_set_ids.iter().map(|i| w.sets.iter().position(|c| c.id == i.0).unwrap()).collect();
                prop_assert!(pos.windows(2).all(|x| x[0] < x[1]));
            }
        }
    }
}
