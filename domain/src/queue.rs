//! The scoped review queue: a plan's (or ladder's) completed runs the requesting account has not
//! reviewed, in the order their cells are emitted rather than newest first, so a cell's repeats
//! sit together and can be judged against each other. It is capped rather than paginated,
//! because it exists to be walked from the front.
//!
//! Auto-graded (`performance`) runs never appear: nobody can act on them. On a ladder that counts
//! an unloaded build as broken, an unloaded run is already judged and does not appear either, so
//! the queue and the buffer are drawn from the same set.

use crate::catalogue::TestType;
use crate::ids::RunId;
use crate::job::CellKey;
use crate::validation::ValidationError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

pub const DEFAULT_QUEUE_LIMIT: i64 = 50;
pub const MAX_QUEUE_LIMIT: i64 = 200;

/// The `limit` query parameter: default 50, at most 200.
pub fn queue_limit(limit: Option<i64>) -> Result<usize, ValidationError> {
    let limit = limit.unwrap_or(DEFAULT_QUEUE_LIMIT);
    if !(1..=MAX_QUEUE_LIMIT).contains(&limit) {
        return Err(ValidationError::new(
            "limit",
            format!("must be an integer from 1 to {MAX_QUEUE_LIMIT}"),
        ));
    }
    Ok(limit as usize)
}

/// A completed run the requesting account has not reviewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueRun {
    pub run_id: RunId,
    pub cell_key: CellKey,
    /// The `queue_seq` of the job that produced it: a cell's repeats in the order they ran.
    pub queue_seq: i64,
    pub test_type: TestType,
    pub loaded: bool,
}

/// The queue's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReviewQueue {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub runs: Vec<RunId>,
    /// More runs are waiting behind the cap.
    pub truncated: bool,
}

/// Orders the queue. `cells` are the cells it draws from, in emission order (a plan's matrix
/// cells; a ladder's [`crate::progress::Board::reached_cells`]); `runs` are the account's
/// unreviewed completed runs of those cells, in any order (runs of other cells are ignored);
/// `unloaded_is_judged` is a ladder's `unloadedCountsAsBroken` (false for a plan).
pub fn review_queue<'a>(
    cells: impl IntoIterator<Item = &'a CellKey>,
    runs: &[QueueRun],
    unloaded_is_judged: bool,
    limit: usize,
) -> ReviewQueue {
    let mut position = BTreeMap::new();
    for (i, key) in cells.into_iter().enumerate() {
        position.entry(key).or_insert(i);
    }
    let mut listed: Vec<(usize, i64, &RunId)> = runs
        .iter()
        .filter(|r| r.test_type != TestType::Performance && (r.loaded || !unloaded_is_judged))
        .filter_map(|r| position.get(&r.cell_key).map(|p| (*p, r.queue_seq, &r.run_id)))
        .collect();
    listed.sort();
    let truncated = listed.len() > limit;
    ReviewQueue {
        runs: listed.into_iter().take(limit).map(|(_, _, id)| id.clone()).collect(),
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> CellKey {
        CellKey(s.into())
    }

    fn run(id: &str, cell: &str, seq: i64) -> QueueRun {
        QueueRun {
            run_id: RunId(format!("run_{id}")),
            cell_key: key(cell),
            queue_seq: seq,
            test_type: TestType::Standard,
            loaded: true,
        }
    }

    fn ids(q: &ReviewQueue) -> Vec<&str> {
        q.runs.iter().map(|r| r.as_str()).collect()
    }

    #[test]
    fn the_queue_follows_emission_order_with_a_cells_repeats_adjacent_not_newest_first() {
        let cells = [key("a"), key("b")];
        let runs = [
            run("b1", "b", 1),
            run("a2", "a", 4),
            run("b2", "b", 2),
            run("a1", "a", 3),
        ];
        let q = review_queue(&cells, &runs, false, 50);
        assert_eq!(ids(&q), ["run_a1", "run_a2", "run_b1", "run_b2"]);
        assert!(!q.truncated);
    }

    #[test]
    fn a_performance_run_never_appears_and_neither_does_a_run_of_another_cell() {
        let mut bench = run("p", "a", 1);
        bench.test_type = TestType::Performance;
        let q = review_queue(
            &[key("a")],
            &[bench, run("x", "elsewhere", 2), run("a", "a", 3)],
            false,
            50,
        );
        assert_eq!(ids(&q), ["run_a"]);
    }

    #[test]
    fn an_unloaded_run_appears_on_a_plan_but_not_on_a_ladder_that_judges_it_broken() {
        let mut unloaded = run("u", "a", 1);
        unloaded.loaded = false;
        assert_eq!(
            ids(&review_queue(&[key("a")], &[unloaded.clone()], false, 50)),
            ["run_u"]
        );
        assert!(review_queue(&[key("a")], &[unloaded], true, 50).runs.is_empty());
    }

    #[test]
    fn a_capped_queue_says_it_was_truncated() {
        let runs: Vec<QueueRun> = (0..5).map(|i| run(&i.to_string(), "a", i)).collect();
        let q = review_queue(&[key("a")], &runs, false, 3);
        assert_eq!(ids(&q), ["run_0", "run_1", "run_2"]);
        assert!(q.truncated);
        assert!(!review_queue(&[key("a")], &runs, false, 5).truncated);
    }

    #[test]
    fn the_limit_defaults_to_fifty_and_is_at_most_two_hundred() {
        assert_eq!(queue_limit(None), Ok(50));
        assert_eq!(queue_limit(Some(200)), Ok(200));
        assert_eq!(queue_limit(Some(201)).unwrap_err().field, "limit");
        assert!(queue_limit(Some(0)).is_err());
    }
}
