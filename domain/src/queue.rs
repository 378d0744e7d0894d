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
    /// The same runs grouped by cell, in the same order: each cell's unreviewed repeats together,
    /// so a reviewer judges them side by side. A cell cut by the cap lists the repeats that fit.
    pub cells: Vec<QueueCell>,
    /// More runs are waiting behind the cap.
    pub truncated: bool,
}

/// One cell of the queue and its unreviewed repeats, in the order they ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueueCell {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cell_key: CellKey,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub runs: Vec<RunId>,
}

/// Which order a queue's cells come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOrder {
    /// A plan's: the order its cells were emitted, read from the jobs' `queue_seq` (a cell comes
    /// where its first run was enqueued), so a top-up that set a throttled harness's cells aside
    /// is reviewed in the order it filled the buffer.
    Emission,
    /// A ladder's own order: the order `cells` are given in.
    Given,
}

/// Orders the queue. `cells` are the cells it draws from (a plan's matrix cells; a ladder's
/// [`crate::progress::Board::reached_cells`], in the ladder's order); `runs` are the account's
/// unreviewed completed runs of those cells, in any order (runs of other cells are ignored);
/// `unloaded_is_judged` is a ladder's `unloadedCountsAsBroken` (false for a plan). A cell's
/// repeats are always adjacent, in the order they ran, a retried run with its cell.
pub fn review_queue<'a>(
    cells: impl IntoIterator<Item = &'a CellKey>,
    runs: &[QueueRun],
    unloaded_is_judged: bool,
    order: QueueOrder,
    limit: usize,
) -> ReviewQueue {
    let mut position = BTreeMap::new();
    for (i, key) in cells.into_iter().enumerate() {
        position.entry(key).or_insert(i);
    }
    let kept: Vec<&QueueRun> = runs
        .iter()
        .filter(|r| r.test_type != TestType::Performance && (r.loaded || !unloaded_is_judged))
        .filter(|r| position.contains_key(&r.cell_key))
        .collect();
    // Where each cell was emitted: the first of its runs' jobs to be enqueued.
    let mut first_seq: BTreeMap<&CellKey, i64> = BTreeMap::new();
    for r in &kept {
        let e = first_seq.entry(&r.cell_key).or_insert(r.queue_seq);
        *e = (*e).min(r.queue_seq);
    }
    let mut listed: Vec<(i64, usize, i64, &RunId, &CellKey)> = kept
        .iter()
        .map(|r| {
            let at = position[&r.cell_key];
            let cell_rank = match order {
                QueueOrder::Emission => first_seq[&r.cell_key],
                QueueOrder::Given => at as i64,
            };
            (cell_rank, at, r.queue_seq, &r.run_id, &r.cell_key)
        })
        .collect();
    listed.sort();
    let truncated = listed.len() > limit;
    listed.truncate(limit);
    // Sorted by cell first, so a cell's repeats are one contiguous stretch.
    let mut cells: Vec<QueueCell> = Vec::new();
    for (_, _, _, id, cell) in &listed {
        match cells.last_mut() {
            Some(last) if &last.cell_key == *cell => last.runs.push((*id).clone()),
            _ => cells.push(QueueCell {
                cell_key: (*cell).clone(),
                runs: vec![(*id).clone()],
            }),
        }
    }
    ReviewQueue {
        runs: listed.into_iter().map(|(_, _, _, id, _)| id.clone()).collect(),
        cells,
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
        let q = review_queue(&cells, &runs, false, QueueOrder::Given, 50);
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
            QueueOrder::Given,
            50,
        );
        assert_eq!(ids(&q), ["run_a"]);
    }

    #[test]
    fn an_unloaded_run_appears_on_a_plan_but_not_on_a_ladder_that_judges_it_broken() {
        let mut unloaded = run("u", "a", 1);
        unloaded.loaded = false;
        assert_eq!(
            ids(&review_queue(
                &[key("a")],
                &[unloaded.clone()],
                false,
                QueueOrder::Given,
                50
            )),
            ["run_u"]
        );
        assert!(
            review_queue(&[key("a")], &[unloaded], true, QueueOrder::Given, 50)
                .runs
                .is_empty()
        );
    }

    #[test]
    fn a_capped_queue_says_it_was_truncated() {
        let runs: Vec<QueueRun> = (0..5).map(|i| run(&i.to_string(), "a", i)).collect();
        let q = review_queue(&[key("a")], &runs, false, QueueOrder::Given, 3);
        assert_eq!(ids(&q), ["run_0", "run_1", "run_2"]);
        assert!(q.truncated);
        assert!(!review_queue(&[key("a")], &runs, false, QueueOrder::Given, 5).truncated);
    }

    #[test]
    fn the_limit_defaults_to_fifty_and_is_at_most_two_hundred() {
        assert_eq!(queue_limit(None), Ok(50));
        assert_eq!(queue_limit(Some(200)), Ok(200));
        assert_eq!(queue_limit(Some(201)).unwrap_err().field, "limit");
        assert!(queue_limit(Some(0)).is_err());
    }

    #[test]
    fn a_plans_queue_follows_the_order_its_cells_were_emitted_not_the_axis_order() {
        // Harness X at its cap, Y idle: the top-up emitted d1×Y, d2×Y, then d1×X, d2×X.
        let cells = [key("d1X"), key("d1Y"), key("d2X"), key("d2Y")];
        let runs = [
            run("d1x", "d1X", 3),
            run("d1y", "d1Y", 1),
            run("d2x", "d2X", 4),
            run("d2y", "d2Y", 2),
        ];
        let q = review_queue(&cells, &runs, false, QueueOrder::Emission, 50);
        assert_eq!(ids(&q), ["run_d1y", "run_d2y", "run_d1x", "run_d2x"]);
        // The ladder's own order is the order its cells are given.
        let q = review_queue(&cells, &runs, false, QueueOrder::Given, 50);
        assert_eq!(ids(&q), ["run_d1x", "run_d1y", "run_d2x", "run_d2y"]);
    }

    #[test]
    fn a_cells_repeats_stay_adjacent_a_retried_run_with_its_cell() {
        let cells = [key("a"), key("b")];
        let runs = [
            run("a1", "a", 1),
            run("b1", "b", 2),
            run("b2", "b", 3),
            // a's second repeat failed and was retried as a later job.
            run("a2", "a", 9),
        ];
        let q = review_queue(&cells, &runs, false, QueueOrder::Emission, 50);
        assert_eq!(ids(&q), ["run_a1", "run_a2", "run_b1", "run_b2"]);
    }

    #[test]
    fn the_queue_groups_each_cells_repeats_in_the_order_of_its_runs() {
        let cells = [key("a"), key("b")];
        let runs = [
            run("a1", "a", 1),
            run("b1", "b", 2),
            run("b2", "b", 3),
            run("a2", "a", 9),
            run("b3", "b", 4),
        ];
        let q = review_queue(&cells, &runs, false, QueueOrder::Emission, 4);
        let grouped: Vec<(&str, Vec<&str>)> = q
            .cells
            .iter()
            .map(|c| (c.cell_key.0.as_str(), c.runs.iter().map(|r| r.as_str()).collect()))
            .collect();
        // Capped at 4: the second cell shows the repeats that fit, and the queue says so.
        assert_eq!(
            grouped,
            [("a", vec!["run_a1", "run_a2"]), ("b", vec!["run_b1", "run_b2"])]
        );
        assert!(q.truncated);
        let flat: Vec<&RunId> = q.cells.iter().flat_map(|c| &c.runs).collect();
        assert_eq!(
            flat,
            q.runs.iter().collect::<Vec<_>>(),
            "the cells hold the same runs in the same order"
        );
    }
}
