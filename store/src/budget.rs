//! What plans and ladders spend (decision 0054): each row's ledger (`budget_micros`,
//! `spent_micros`, `reserved_micros`), the estimate of a cell's next run, the top-up's reservation
//! and the settlement when a job ends.
//!
//! A top-up walks under the ledger it read and then reserves what it emitted with ONE conditional
//! update on the plan's or ladder's row (`spent + reserved + amount <= budget`), before it inserts
//! a job: zero rows means the ledger moved (a settlement above its estimate, a lowered budget), and
//! the walk is made again from the row as it now stands. Each launched job carries its reservation;
//! when it ends it is settled once (a conditional update on the job), moving the reservation to
//! `spent` at the reported cost (completed) or releasing it (failed, cancelled; a retry re-reserves
//! the same amount in the same transaction). A job without a reservation, one launched by hand, is
//! never budgeted.

use crate::coverage::{CoverageFacts, Feed, FeedRow};
use crate::{StoreError, Tx};
use belay_domain::budget::{CostBasis, EstimateFacts, Ledger, Micros, Reported, combination_price, estimate, run_cost};
use belay_domain::buffer::BufferTarget;
use belay_domain::catalogue::{ListPrice, ModelCatalogue, ModelFacts};
use belay_domain::ids::{JobId, RunId};
use belay_domain::job::{CellKey, Job, Origin};
use belay_domain::matrix::MatrixCell;
use belay_domain::top_up::{CellBudget, TopUpPlan, plan_top_up_within};
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};

/// Keys up to this many are read by key; more read the whole table of means.
const IN_LIST_MAX: usize = 500;

/// How often a top-up walks again when its reservation found the ledger moved under it.
const RESERVE_TRIES: usize = 4;

/// The plan's or ladder's row an origin names.
fn row_of(origin: &Origin) -> (Feed, &str) {
    match origin {
        Origin::Plan(id) => (Feed::Plan, id.as_str()),
        Origin::Ladder(id) => (Feed::Ladder, id.as_str()),
    }
}

fn micros(v: Option<i64>) -> Option<Micros> {
    v.map(Micros)
}

/// The ledger and the `estimatedRunUsd` of the plan or ladder `origin` names (an empty ledger
/// when there is no such row).
pub async fn ledger(tx: &mut Tx, origin: &Origin) -> Result<(Ledger, Option<Micros>), StoreError> {
    let (feed, id) = row_of(origin);
    let sql = format!(
        "select budget_micros, estimated_run_micros, spent_micros, reserved_micros from {} where id = $1",
        feed.table()
    );
    let Some(r) = sqlx::query(&sql).bind(id).fetch_optional(tx.conn()).await? else {
        return Ok((Ledger::default(), None));
    };
    let ledger = Ledger {
        budget: micros(r.try_get("budget_micros")?),
        spent: Micros(r.try_get("spent_micros")?),
        reserved: Micros(r.try_get("reserved_micros")?),
    };
    Ok((ledger, micros(r.try_get("estimated_run_micros")?)))
}

/// Saves a plan's or ladder's budget and `estimatedRunUsd` (what it spent and reserved stays).
pub(crate) async fn set_budget(
    tx: &mut Tx,
    origin: &Origin,
    budget: Option<Micros>,
    estimated_run: Option<Micros>,
) -> Result<(), StoreError> {
    let (feed, id) = row_of(origin);
    let sql = format!(
        "update {} set budget_micros = $2, estimated_run_micros = $3 where id = $1",
        feed.table()
    );
    sqlx::query(&sql)
        .bind(id)
        .bind(budget.map(|m| m.0))
        .bind(estimated_run.map(|m| m.0))
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// The key of a cell's mean in `run_cost_means`.
fn case_key(cell: &CellKey) -> String {
    format!("case:{cell}")
}

/// The key of a combination's mean (over any case) in `run_cost_means`.
fn combination_key(identity: &str) -> String {
    format!("combination:{identity}")
}

/// Adds a measured run's cost to its cell's and its combination's means.
async fn add_to_means(tx: &mut Tx, job: &Job, cost: Micros) -> Result<(), StoreError> {
    let cell = CellKey::of(&job.case, &job.combination);
    for key in [case_key(&cell), combination_key(&job.combination.identity())] {
        sqlx::query(
            r#"insert into run_cost_means (mean_key, total_micros, runs) values ($1, $2, 1)
               on conflict (mean_key) do update set total_micros = run_cost_means.total_micros + excluded.total_micros,
                   runs = run_cost_means.runs + 1"#,
        )
        .bind(key)
        .bind(cost.0)
        .execute(tx.conn())
        .await?;
    }
    Ok(())
}

/// The means the estimates of `cells` (those missing a run) need, by key: each cell's (the case
/// mean) and each of their combinations' (over any case), read by key from `run_cost_means` (the
/// whole table when the keys are many, one scan either way).
async fn measured_means(tx: &mut Tx, cells: &[MatrixCell]) -> Result<BTreeMap<String, Micros>, StoreError> {
    let wanted: BTreeSet<String> = cells
        .iter()
        .filter(|c| c.remaining > 0)
        .flat_map(|c| [case_key(&c.cell_key), combination_key(&c.combination.identity())])
        .collect();
    if wanted.is_empty() {
        return Ok(BTreeMap::new());
    }
    let rows = if wanted.len() <= IN_LIST_MAX {
        let list = (1..=wanted.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("select mean_key, total_micros, runs from run_cost_means where mean_key in ({list})");
        let mut q = sqlx::query(&sql);
        for k in &wanted {
            q = q.bind(k.as_str());
        }
        q.fetch_all(tx.conn()).await?
    } else {
        sqlx::query("select mean_key, total_micros, runs from run_cost_means")
            .fetch_all(tx.conn())
            .await?
    };
    let mut out = BTreeMap::new();
    for r in rows {
        let (key, total, n): (String, i64, i64) =
            (r.try_get("mean_key")?, r.try_get("total_micros")?, r.try_get("runs")?);
        if n > 0 && wanted.contains(&key) {
            out.insert(key, Micros(total / n));
        }
    }
    Ok(out)
}

/// Each cell's estimate of one run: the case mean, else the combination mean, else
/// `estimated_run`, else the list price × the default token counts ([`estimate`]). Only cells a
/// walk could emit (something missing) are estimated.
pub async fn cell_estimates(
    tx: &mut Tx,
    cells: &[MatrixCell],
    estimated_run: Option<Micros>,
    models: &ModelCatalogue,
) -> Result<BTreeMap<CellKey, Micros>, StoreError> {
    let means = measured_means(tx, cells).await?;
    let mut out = BTreeMap::new();
    for c in cells.iter().filter(|c| c.remaining > 0) {
        let facts = EstimateFacts {
            case_mean: means.get(&case_key(&c.cell_key)).copied(),
            combination_mean: means.get(&combination_key(&c.combination.identity())).copied(),
            estimated_run,
            price: combination_price(&c.combination, models),
        };
        if let Some((m, _)) = estimate(&facts) {
            out.insert(c.cell_key.clone(), m);
        }
    }
    Ok(out)
}

/// What the budget walk of `origin`'s cells reads now: its ledger and each cell's estimate.
pub async fn cell_budget(
    tx: &mut Tx,
    origin: &Origin,
    cells: &[MatrixCell],
    models: &ModelCatalogue,
) -> Result<CellBudget, StoreError> {
    let (ledger, estimated_run) = ledger(tx, origin).await?;
    let estimates = cell_estimates(tx, cells, estimated_run, models).await?;
    Ok(CellBudget { ledger, estimates })
}

/// The reservation: ONE conditional update adding `amount` to the row's reserved while spent +
/// reserved + amount stays within its budget (any amount without one). False when it would not.
pub async fn reserve(tx: &mut Tx, origin: &Origin, amount: Micros) -> Result<bool, StoreError> {
    if amount.0 <= 0 {
        // Nothing to reserve fits any ledger, one already past its budget included.
        return Ok(true);
    }
    let (feed, id) = row_of(origin);
    let sql = format!(
        r#"update {} set reserved_micros = reserved_micros + $2
           where id = $1 and (budget_micros is null or spent_micros + reserved_micros + $2 <= budget_micros)"#,
        feed.table()
    );
    let done = sqlx::query(&sql).bind(id).bind(amount.0).execute(tx.conn()).await?;
    Ok(done.rows_affected() == 1)
}

/// The top-up's walk of `cells` (a matrix's, in walk order) under `origin`'s budget, with what it
/// emits reserved: walked from the ledger as it stands, then reserved in one conditional update;
/// walked again when that update found the ledger moved.
pub(crate) async fn walk_and_reserve(
    tx: &mut Tx,
    origin: &Origin,
    cells: &[MatrixCell],
    target: BufferTarget,
    outstanding: i64,
    facts: &CoverageFacts,
) -> Result<TopUpPlan, StoreError> {
    for _ in 0..RESERVE_TRIES {
        let budget = cell_budget(tx, origin, cells, &facts.launch.models).await?;
        let plan = plan_top_up_within(cells, target, outstanding, &facts.lanes, Some(budget));
        if reserve(tx, origin, plan.reserved).await? {
            return Ok(plan);
        }
    }
    Err(StoreError::Conflict(format!(
        "the budget of {origin} kept changing while a top-up reserved against it"
    )))
}

/// Records on each launched job what was reserved for it (its cell's estimate), in one update per
/// distinct estimate.
pub(crate) async fn mark_reserved(tx: &mut Tx, plan: &TopUpPlan, job_ids: &[Vec<JobId>]) -> Result<(), StoreError> {
    let mut by_amount: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for (each, ids) in plan.reservations.iter().zip(job_ids) {
        by_amount
            .entry(each.0)
            .or_default()
            .extend(ids.iter().map(|id| id.as_str()));
    }
    for (amount, ids) in by_amount {
        for chunk in ids.chunks(500) {
            let list = (2..chunk.len() + 2)
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("update jobs set reserved_micros = $1 where reserved_micros is null and id in ({list})");
            let mut q = sqlx::query(&sql).bind(amount);
            for id in chunk {
                q = q.bind(*id);
            }
            q.execute(tx.conn()).await?;
        }
    }
    Ok(())
}

/// Settles a job's reservation once, at `cost` (`None`: at what was reserved), moving it from
/// its plan's or ladder's reserved to its spent. Returns what was reserved and what was settled;
/// `None` when the job has no reservation or was settled already.
pub(crate) async fn settle(
    tx: &mut Tx,
    job_id: &JobId,
    cost: Option<Micros>,
) -> Result<Option<(Micros, Micros)>, StoreError> {
    let row = sqlx::query(
        r#"update jobs set cost_micros = coalesce($2, reserved_micros)
           where id = $1 and reserved_micros is not null and cost_micros is null
           returning origin, reserved_micros, cost_micros"#,
    )
    .bind(job_id.as_str())
    .bind(cost.map(|c| c.0))
    .fetch_optional(tx.conn())
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    let reserved = Micros(r.try_get("reserved_micros")?);
    let settled = Micros(r.try_get("cost_micros")?);
    if let Some(origin) = r.try_get::<Option<String>, _>("origin")? {
        let origin = Origin::parse(&origin)?;
        let (feed, id) = row_of(&origin);
        let sql = format!(
            "update {} set reserved_micros = reserved_micros - $2, spent_micros = spent_micros + $3 where id = $1",
            feed.table()
        );
        sqlx::query(&sql)
            .bind(id)
            .bind(reserved.0)
            .bind(settled.0)
            .execute(tx.conn())
            .await?;
    }
    Ok(Some((reserved, settled)))
}

/// Releases the reservation of a job that ended without a run (failed or cancelled): it spent
/// nothing the budget counts.
pub(crate) async fn release(tx: &mut Tx, job_id: &JobId) -> Result<(), StoreError> {
    settle(tx, job_id, Some(Micros::ZERO)).await.map(|_| ())
}

/// A retry of `failed` (whose reservation was released when it failed) reserves the same amount
/// for `retry`, unconditionally: it was admitted under the budget once already, and the release
/// and this happen in one transaction.
pub(crate) async fn carry_to_retry(tx: &mut Tx, failed: &JobId, retry: &JobId) -> Result<(), StoreError> {
    let row = sqlx::query("select reserved_micros, origin from jobs where id = $1")
        .bind(failed.as_str())
        .fetch_optional(tx.conn())
        .await?;
    let Some(r) = row else { return Ok(()) };
    let (Some(amount), Some(origin)) = (
        r.try_get::<Option<i64>, _>("reserved_micros")?,
        r.try_get::<Option<String>, _>("origin")?,
    ) else {
        return Ok(());
    };
    let moved = sqlx::query("update jobs set reserved_micros = $2 where id = $1 and reserved_micros is null")
        .bind(retry.as_str())
        .bind(amount)
        .execute(tx.conn())
        .await?;
    if moved.rows_affected() == 1 {
        let origin = Origin::parse(&origin)?;
        let (feed, id) = row_of(&origin);
        let sql = format!(
            "update {} set reserved_micros = reserved_micros + $2 where id = $1",
            feed.table()
        );
        sqlx::query(&sql).bind(id).bind(amount).execute(tx.conn()).await?;
    }
    Ok(())
}

/// The list prices of `models`.
async fn prices(tx: &mut Tx, models: &[&str]) -> Result<ModelCatalogue, StoreError> {
    let mut out = ModelCatalogue::new();
    for m in models {
        let row = sqlx::query("select input_per_mtok_usd, output_per_mtok_usd from models where id = $1")
            .bind(*m)
            .fetch_optional(tx.conn())
            .await?;
        let Some(r) = row else { continue };
        let (i, o): (Option<f64>, Option<f64>) = (r.try_get("input_per_mtok_usd")?, r.try_get("output_per_mtok_usd")?);
        let list_price = match (i, o) {
            (Some(i), Some(o)) => Some(ListPrice {
                input_per_mtok_usd: i,
                output_per_mtok_usd: o,
            }),
            _ => None,
        };
        out.insert(
            m.to_string(),
            ModelFacts {
                context_window: None,
                list_price,
            },
        );
    }
    Ok(out)
}

/// The cost of the run `run_id` that `job` just completed with, from what its adapter `reported`:
/// recorded on the run (its measured cost apart, for the estimates' means) and, for a budgeted
/// job, settled against its plan or ladder. A run launched by hand that reported nothing has no
/// cost.
pub(crate) async fn settle_run(tx: &mut Tx, job: &Job, run_id: &RunId, reported: Reported) -> Result<(), StoreError> {
    let reserved: Option<i64> = sqlx::query("select reserved_micros from jobs where id = $1")
        .bind(job.id.as_str())
        .fetch_one(tx.conn())
        .await?
        .try_get("reserved_micros")?;
    let price = if reported.cost.is_none() && reported.usage.is_some() {
        combination_price(&job.combination, &prices(tx, &job.combination.models()).await?)
    } else {
        None
    };
    let (cost, basis) = run_cost(reported, price, Micros(reserved.unwrap_or(0)));
    let measured = (basis != CostBasis::Estimate).then_some(cost);
    if let Some(m) = measured {
        add_to_means(tx, job, m).await?;
    }
    let cost = match reserved {
        Some(_) => settle(tx, &job.id, Some(cost)).await?.map(|(_, settled)| settled),
        None => measured,
    };
    if cost.is_some() || measured.is_some() {
        sqlx::query("update runs set cost_micros = $2, measured_cost_micros = $3 where id = $1")
            .bind(run_id.as_str())
            .bind(cost.map(|c| c.0))
            .bind(measured.map(|c| c.0))
            .execute(tx.conn())
            .await?;
    }
    Ok(())
}

/// For `belay bench coverage` only: gives every run the measured cost `cost`, and its cell's and
/// combination's means, as a database of runs that report their costs would hold them.
pub async fn bench_price_runs(tx: &mut Tx, cost: Micros) -> Result<u64, StoreError> {
    let done = sqlx::query("update runs set cost_micros = $1, measured_cost_micros = $1")
        .bind(cost.0)
        .execute(tx.conn())
        .await?;
    let rows = sqlx::query("select cell_key, count(*) as n from runs group by cell_key")
        .fetch_all(tx.conn())
        .await?;
    let mut means: BTreeMap<String, i64> = BTreeMap::new();
    for r in rows {
        let (cell, n): (String, i64) = (r.try_get("cell_key")?, r.try_get("n")?);
        if let Some((_, identity)) = cell.split_once(" × ") {
            *means.entry(combination_key(identity)).or_default() += n;
        }
        means.insert(case_key(&CellKey(cell)), n);
    }
    sqlx::query("delete from run_cost_means").execute(tx.conn()).await?;
    let means: Vec<(String, i64)> = means.into_iter().collect();
    for chunk in means.chunks(300) {
        let values = (0..chunk.len())
            .map(|i| format!("(${}, ${}, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("insert into run_cost_means (mean_key, total_micros, runs) values {values}");
        let mut q = sqlx::query(&sql);
        for (key, n) in chunk {
            q = q.bind(key.as_str()).bind(cost.0.saturating_mul(*n)).bind(*n);
        }
        q.execute(tx.conn()).await?;
    }
    Ok(done.rows_affected())
}

/// For `belay bench coverage` only: the estimates' read of the means `cells` need; how many it
/// found.
pub async fn bench_measured_means(tx: &mut Tx, cells: &[MatrixCell]) -> Result<usize, StoreError> {
    Ok(measured_means(tx, cells).await?.len())
}

crate::one_step! {
    read bench_measured_means(cells: &[MatrixCell]) -> usize;
    read ledger(origin: &Origin) -> (Ledger, Option<Micros>);
    write reserve(origin: &Origin, amount: Micros) -> bool;
    write bench_price_runs(cost: Micros) -> u64;
}
