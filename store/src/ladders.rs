//! Ladders: the ladder rows with their rungs, each climber's steering, the verdict rows (keyed by
//! climber, rung id and exact case version), and what the board, a ladder top-up, the scoped
//! queue and the climb read.
//!
//! A ladder shares the plan machinery: its reads hand every rung × climber cell to
//! [`coverage::coverage_facts`]'s reads (the grouped job counts and the catalogue), its claim is the
//! plan's conditional update with the same lease on the ladder row, and its enqueue inserts the
//! walk's launches through the plan's keyed insert and records its answer beside the plans'. What
//! it adds is one read of the cells' completed runs with the requesting account's own review (the
//! gate's evidence), this ladder's still-queued jobs (what an early stop cancels) and its verdict
//! rows; the board itself is the one pure [`progress::progress`].

use crate::coverage::{self, Claim, CoverageFacts, Feed};
use crate::dialect;
use crate::jobs::{cancel_in, job_in, take_dispatch_lock};
use crate::rows::{enum_from, enum_text, json, status_list, to_json};
use crate::{StoreError, Tx, events, new_id_body, now_ms};
use belay_domain::buffer::{BufferTarget, outstanding, target_in_force};
use belay_domain::coverage::Cell;
use belay_domain::gate::{GateRun, Outcome};
use belay_domain::ids::{AccountId, JobId, LadderId, RungId};
use belay_domain::job::{CellKey, JobStatus, Origin};
use belay_domain::ladder::{ClimberKey, Ladder, LadderAxis, LadderInput, LadderTopUpAnswer, Rung, Steering};
use belay_domain::progress::{
    Climber, LadderEvidence, Progress, RecordedVerdict, VerdictWrite, ladder_cells, progress,
};
use belay_domain::review::Rating;
use belay_domain::top_up::TopUpAnswer;
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A ladder resolved for reading: the ladder, its climbers (resolved order, with steering), every
/// rung × climber cell, and the buffer target in force.
#[derive(Debug, Clone)]
pub struct ResolvedLadder {
    pub ladder: Ladder,
    pub climbers: Vec<Climber>,
    pub cells: Vec<Cell>,
    pub target: BufferTarget,
}

const LADDER_COLUMNS: &str = "id, name, rungs, combo_groups, combinations, runs_per_cell, gate, \
     unloaded_counts_as_broken, early_stop, outer_axis, buffer_target, auto_top_up, enabled, created_at, updated_at, \
     budget_micros, estimated_run_micros, spent_micros, reserved_micros";

fn ladder_row(r: &AnyRow) -> Result<Ladder, StoreError> {
    let target: Option<String> = r.try_get("buffer_target")?;
    let spend = coverage::spend_row(r)?;
    Ok(Ladder {
        id: LadderId(r.try_get("id")?),
        name: r.try_get("name")?,
        rungs: json(&r.try_get::<String, _>("rungs")?, "rungs")?,
        combo_groups: json(&r.try_get::<String, _>("combo_groups")?, "combo_groups")?,
        combinations: json(&r.try_get::<String, _>("combinations")?, "combinations")?,
        runs_per_cell: r.try_get("runs_per_cell")?,
        gate: json(&r.try_get::<String, _>("gate")?, "gate")?,
        unloaded_counts_as_broken: r.try_get::<i64, _>("unloaded_counts_as_broken")? != 0,
        early_stop: r.try_get::<i64, _>("early_stop")? != 0,
        outer_axis: enum_from::<LadderAxis>(&r.try_get::<String, _>("outer_axis")?, "outer axis")?,
        buffer_target: target.as_deref().map(|t| json(t, "buffer_target")).transpose()?,
        auto_top_up: r.try_get::<i64, _>("auto_top_up")? != 0,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get::<Option<i64>, _>("updated_at")?.unwrap_or_default(),
        budget: spend.budget.map(belay_domain::budget::BudgetInput::of),
        estimated_run_usd: r
            .try_get::<Option<i64>, _>("estimated_run_micros")?
            .map(|m| belay_domain::budget::Micros(m).usd()),
        spend,
    })
}

/// A new rung id: random, so never reused and never a position.
pub fn mint_rung_id() -> RungId {
    RungId::from_body(&new_id_body())
}

fn bind_ladder<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    input: &LadderInput,
    rungs: &[Rung],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    q.bind(input.name.clone())
        .bind(to_json(&rungs))
        .bind(to_json(&input.combo_groups))
        .bind(to_json(&input.combinations))
        .bind(input.runs_per_cell)
        .bind(to_json(&input.gate))
        .bind(input.unloaded_counts_as_broken as i64)
        .bind(input.early_stop as i64)
        .bind(enum_text(&input.outer_axis))
        .bind(input.buffer_target.as_ref().map(to_json))
        .bind(input.auto_top_up as i64)
        .bind(input.enabled as i64)
}

/// Stores a new ladder (validated, its pointers checked, its rungs' ids minted).
pub async fn create_ladder(
    tx: &mut Tx,
    account_id: &AccountId,
    input: &LadderInput,
    rungs: &[Rung],
) -> Result<Ladder, StoreError> {
    let id = LadderId::from_body(&new_id_body());
    let q = sqlx::query(
        r#"insert into ladders (id, account_id, created_at, updated_at, name, rungs, combo_groups, combinations,
               runs_per_cell, gate, unloaded_counts_as_broken, early_stop, outer_axis, buffer_target, auto_top_up,
               enabled)
           values ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"#,
    )
    .bind(id.as_str().to_string())
    .bind(account_id.to_string())
    .bind(now_ms());
    bind_ladder(q, input, rungs).execute(tx.conn()).await?;
    save_budget(tx, &id, input).await?;
    events::append(
        tx.conn(),
        id.as_str(),
        "ladder.created",
        &serde_json::json!({ "accountId": account_id, "enabled": input.enabled }),
    )
    .await?;
    get_ladder(tx, account_id, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("ladder", &id))
}

/// One of the account's ladders (another account's is absent).
pub async fn get_ladder(tx: &mut Tx, account_id: &AccountId, id: &LadderId) -> Result<Option<Ladder>, StoreError> {
    let sql = format!("select {LADDER_COLUMNS} from ladders where id = $1 and account_id = $2 and name is not null");
    let row = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(ladder_row).transpose()
}

/// The account's ladders, oldest first.
pub async fn list_ladders(tx: &mut Tx, account_id: &AccountId) -> Result<Vec<Ladder>, StoreError> {
    let sql = format!(
        "select {LADDER_COLUMNS} from ladders where account_id = $1 and name is not null order by created_at, id"
    );
    let rows = sqlx::query(&sql).bind(account_id.as_str()).fetch_all(tx.conn()).await?;
    rows.iter().map(ladder_row).collect()
}

/// Saves the ladder's budget and `estimatedRunUsd` (what it spent and reserved stays).
async fn save_budget(tx: &mut Tx, id: &LadderId, input: &LadderInput) -> Result<(), StoreError> {
    let (budget, estimated) = coverage::budget_of(input.budget.as_ref(), input.estimated_run_usd)?;
    crate::budget::set_budget(tx, &Origin::Ladder(id.to_string()), budget, estimated).await
}

/// Replaces a ladder's fields and rungs; `None` when the account has no such ladder.
pub async fn update_ladder(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &LadderId,
    input: &LadderInput,
    rungs: &[Rung],
) -> Result<Option<Ladder>, StoreError> {
    let q = sqlx::query(
        r#"update ladders set name = $4, rungs = $5, combo_groups = $6, combinations = $7, runs_per_cell = $8,
               gate = $9, unloaded_counts_as_broken = $10, early_stop = $11, outer_axis = $12, buffer_target = $13,
               auto_top_up = $14, enabled = $15, updated_at = $3
           where id = $1 and account_id = $2 and name is not null"#,
    )
    .bind(id.to_string())
    .bind(account_id.to_string())
    .bind(now_ms());
    let done = bind_ladder(q, input, rungs).execute(tx.conn()).await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    save_budget(tx, id, input).await?;
    events::append(
        tx.conn(),
        id,
        "ladder.updated",
        &serde_json::json!({ "accountId": account_id, "enabled": input.enabled }),
    )
    .await?;
    get_ladder(tx, account_id, id).await
}

/// Puts the ladder's rungs in a new order (the caller checked it is a permutation).
pub async fn reorder_rungs(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &LadderId,
    order: &[RungId],
) -> Result<Option<Ladder>, StoreError> {
    let Some(ladder) = get_ladder(tx, account_id, id).await? else {
        return Ok(None);
    };
    let by_id: BTreeMap<&RungId, &Rung> = ladder.rungs.iter().map(|r| (&r.id, r)).collect();
    let rungs: Vec<&Rung> = order.iter().filter_map(|i| by_id.get(i).copied()).collect();
    sqlx::query("update ladders set rungs = $3, updated_at = $4 where id = $1 and account_id = $2")
        .bind(id.as_str())
        .bind(account_id.as_str())
        .bind(to_json(&rungs))
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    events::append(
        tx.conn(),
        id,
        "ladder.rungs_reordered",
        &serde_json::json!({ "accountId": account_id, "rungIds": order }),
    )
    .await?;
    get_ladder(tx, account_id, id).await
}

/// Deletes a ladder with its steering and verdicts; the jobs it launched keep their `origin`.
/// False when there was none.
pub async fn delete_ladder(tx: &mut Tx, account_id: &AccountId, id: &LadderId) -> Result<bool, StoreError> {
    let done = sqlx::query("delete from ladders where id = $1 and account_id = $2 and name is not null")
        .bind(id.as_str())
        .bind(account_id.as_str())
        .execute(tx.conn())
        .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    for table in ["ladder_steering", "ladder_verdicts"] {
        sqlx::query(&format!("delete from {table} where ladder_id = $1"))
            .bind(id.as_str())
            .execute(tx.conn())
            .await?;
    }
    events::append(
        tx.conn(),
        id,
        "ladder.deleted",
        &serde_json::json!({ "accountId": account_id }),
    )
    .await?;
    Ok(true)
}

/// Enables or disables a ladder, recording why; `None` when there is no such ladder.
pub async fn set_enabled(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &LadderId,
    enabled: bool,
    why: &str,
) -> Result<Option<Ladder>, StoreError> {
    let done = sqlx::query(
        "update ladders set enabled = $3, updated_at = $4 where id = $1 and account_id = $2 and name is not null",
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(enabled as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    let kind = if enabled { "ladder.enabled" } else { "ladder.disabled" };
    events::append(
        tx.conn(),
        id,
        kind,
        &serde_json::json!({ "accountId": account_id, "by": why }),
    )
    .await?;
    get_ladder(tx, account_id, id).await
}

// ---- steering and verdicts -------------------------------------------------------------------

/// The ladder's steering rows by climber key.
pub async fn steering(tx: &mut Tx, ladder_id: &LadderId) -> Result<BTreeMap<ClimberKey, Steering>, StoreError> {
    let rows = sqlx::query("select climber_key, priority, focused, held from ladder_steering where ladder_id = $1")
        .bind(ladder_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    let mut out = BTreeMap::new();
    for r in rows {
        out.insert(
            ClimberKey(r.try_get("climber_key")?),
            Steering {
                priority: r.try_get("priority")?,
                focused: r.try_get::<i64, _>("focused")? != 0,
                held: r.try_get::<i64, _>("held")? != 0,
            },
        );
    }
    Ok(out)
}

/// Saves one climber's steering.
pub async fn put_steering(
    tx: &mut Tx,
    ladder_id: &LadderId,
    climber: &ClimberKey,
    s: Steering,
) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into ladder_steering (ladder_id, climber_key, priority, focused, held, updated_at)
           values ($1, $2, $3, $4, $5, $6)
           on conflict (ladder_id, climber_key) do update set priority = excluded.priority,
               focused = excluded.focused, held = excluded.held, updated_at = excluded.updated_at"#,
    )
    .bind(ladder_id.as_str())
    .bind(climber.0.clone())
    .bind(s.priority)
    .bind(s.focused as i64)
    .bind(s.held as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        ladder_id,
        "ladder.steered",
        &serde_json::json!({ "climber": climber.0, "steering": s }),
    )
    .await
}

fn outcome_from(text: Option<String>, what: &str) -> Result<Option<Outcome>, StoreError> {
    text.map(|t| enum_from::<Outcome>(&t, what)).transpose()
}

/// A ladder's verdict rows (`$1`), every version.
const VERDICTS_SQL: &str = r#"select climber_key, rung_id, version, verdict, override_outcome from ladder_verdicts
   where ladder_id = $1"#;

/// The columns of [`VERDICTS_SQL`], in the order a packed read gives them.
const VERDICTS_COLUMNS: &[&str] = &["climber_key", "rung_id", "version", "verdict", "override_outcome"];

/// The ladder's verdict rows, every version, by climber, rung and version (byte order).
pub async fn verdicts(tx: &mut Tx, ladder_id: &LadderId) -> Result<Vec<RecordedVerdict>, StoreError> {
    let sql = dialect::grouped_sql(tx.backend(), VERDICTS_SQL, VERDICTS_COLUMNS);
    let q = sqlx::query(&sql).bind(ladder_id.as_str());
    type Row = (String, String, String, Option<String>, Option<String>);
    let mut rows = dialect::grouped::<Row>(q, tx, "ladder verdicts").await?;
    rows.sort_unstable_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    rows.into_iter()
        .map(|(climber, rung, version, verdict, override_outcome)| {
            Ok(RecordedVerdict {
                climber: ClimberKey(climber),
                rung_id: RungId(rung),
                version,
                verdict: outcome_from(verdict, "verdict")?,
                override_outcome: outcome_from(override_outcome, "override")?,
            })
        })
        .collect()
}

/// Persists the gate's verdicts (the override column left as it is).
pub async fn write_verdicts(tx: &mut Tx, ladder_id: &LadderId, writes: &[VerdictWrite]) -> Result<(), StoreError> {
    let now = now_ms();
    for w in writes {
        sqlx::query(
            r#"insert into ladder_verdicts (ladder_id, climber_key, rung_id, version, verdict, updated_at)
               values ($1, $2, $3, $4, $5, $6)
               on conflict (ladder_id, climber_key, rung_id, version)
               do update set verdict = excluded.verdict, updated_at = excluded.updated_at"#,
        )
        .bind(ladder_id.as_str())
        .bind(w.climber.0.clone())
        .bind(w.rung_id.as_str().to_string())
        .bind(w.version.clone())
        .bind(w.verdict.as_ref().map(enum_text))
        .bind(now)
        .execute(tx.conn())
        .await?;
    }
    Ok(())
}

/// Sets or clears an override, stored beside the gate's verdict (which is left as persisted, or
/// written as the gate holds it now when no row exists yet).
pub async fn put_override(tx: &mut Tx, ladder_id: &LadderId, row: &RecordedVerdict) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into ladder_verdicts (ladder_id, climber_key, rung_id, version, verdict, override_outcome, updated_at)
           values ($1, $2, $3, $4, $5, $6, $7)
           on conflict (ladder_id, climber_key, rung_id, version)
           do update set override_outcome = excluded.override_outcome, updated_at = excluded.updated_at"#,
    )
    .bind(ladder_id.as_str())
    .bind(row.climber.0.clone())
    .bind(row.rung_id.as_str().to_string())
    .bind(row.version.clone())
    .bind(row.verdict.as_ref().map(enum_text))
    .bind(row.override_outcome.as_ref().map(enum_text))
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        ladder_id,
        "ladder.outcome_overridden",
        &serde_json::json!({ "climber": row.climber.0, "rungId": row.rung_id, "version": row.version,
            "override": row.override_outcome }),
    )
    .await
}

// ---- reading the board -----------------------------------------------------------------------

/// A ladder of the account resolved to its climbers and cells, or `None`.
pub async fn resolve_ladder(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &LadderId,
) -> Result<Option<ResolvedLadder>, StoreError> {
    let Some(ladder) = get_ladder(tx, account_id, id).await? else {
        return Ok(None);
    };
    Ok(Some(resolve(tx, account_id, ladder).await?))
}

async fn resolve(tx: &mut Tx, account_id: &AccountId, ladder: Ladder) -> Result<ResolvedLadder, StoreError> {
    let groups = coverage::group_members(tx, account_id).await?;
    let steering = steering(tx, &ladder.id).await?;
    let climbers = Climber::with_steering(ladder.climbers(&groups), &steering);
    let cells = ladder_cells(&ladder, &climbers);
    let target = target_in_force(coverage::buffer_setting(tx, account_id).await?, ladder.buffer_target);
    Ok(ResolvedLadder {
        ladder,
        climbers,
        cells,
        target,
    })
}

/// The gate only counts a cell's runs by (loaded, worst): the runs grouped so, with the review of
/// the account bound as `$1`. `filter` narrows the cells (` where r.cell_key in (…)`) or is empty.
fn gate_runs_sql(filter: &str) -> String {
    format!(
        r#"select r.cell_key, r.loaded, v.worst, count(*) as n
           from runs r left join reviews v on v.run_id = r.id and v.account_id = $1{filter}
           group by r.cell_key, r.loaded, v.worst"#
    )
}

/// The columns of [`gate_runs_sql`], in the order a packed read gives them.
const GATE_RUNS_COLUMNS: &[&str] = &["cell_key", "loaded", "worst", "n"];

/// The jobs of an origin (`$1`) still queued or pending, in queue order.
fn waiting_sql() -> String {
    format!(
        "select id, cell_key from jobs where origin = $1 and status in ({}) order by queue_seq",
        status_list(&JobStatus::WAITING)
    )
}

/// The gate's evidence for `cells` as `account_id` sees it: each cell's completed runs with that
/// account's own review (the worst domain of its one review), and this ladder's jobs still
/// queued or pending.
async fn gate_runs(
    tx: &mut Tx,
    account_id: &AccountId,
    ladder_id: &LadderId,
    cells: &[Cell],
) -> Result<(HashMap<CellKey, Vec<GateRun>>, HashMap<CellKey, Vec<JobId>>), StoreError> {
    let wanted: HashSet<&CellKey> = cells.iter().map(|c| &c.cell_key).collect();
    let keys: Option<Vec<&str>> = (wanted.len() <= 500).then(|| wanted.iter().map(|k| k.0.as_str()).collect());
    let filter = keys
        .as_ref()
        .map(|k| {
            let marks: Vec<String> = (0..k.len()).map(|i| format!("${}", i + 2)).collect();
            format!(" where r.cell_key in ({})", marks.join(", "))
        })
        .unwrap_or_default();
    let sql = dialect::grouped_sql(tx.backend(), &gate_runs_sql(&filter), GATE_RUNS_COLUMNS);
    let mut q = sqlx::query(&sql).bind(account_id.as_str());
    for k in keys.iter().flatten() {
        q = q.bind(*k);
    }
    let mut runs: HashMap<CellKey, Vec<GateRun>> = HashMap::with_capacity(wanted.len());
    // The few ratings there are, each read once (a row per cell and rating).
    let mut ratings: Vec<(String, Rating)> = Vec::new();
    type Row = (String, i64, Option<String>, i64);
    for (key, loaded, worst, n) in dialect::grouped::<Row>(q, tx, "gate runs").await? {
        let key = CellKey(key);
        if !wanted.contains(&key) {
            continue;
        }
        let review = match worst {
            None => None,
            Some(w) => Some(match ratings.iter().find(|(text, _)| *text == w) {
                Some((_, r)) => *r,
                None => {
                    let r = json::<Rating>(&w, "worst")?;
                    ratings.push((w, r));
                    r
                }
            }),
        };
        let run = GateRun {
            loaded: loaded != 0,
            review,
        };
        let n = usize::try_from(n).unwrap_or(0);
        runs.entry(key).or_default().extend(std::iter::repeat_n(run, n));
    }
    let mut waiting: HashMap<CellKey, Vec<JobId>> = HashMap::new();
    for r in sqlx::query(&waiting_sql())
        .bind(Origin::Ladder(ladder_id.to_string()).to_string())
        .fetch_all(tx.conn())
        .await?
    {
        waiting
            .entry(CellKey(r.try_get("cell_key")?))
            .or_default()
            .push(JobId(r.try_get("id")?));
    }
    Ok((runs, waiting))
}

/// What the board of a resolved ladder is computed from, as `account_id` sees it: the gate's
/// evidence and the catalogue's facts (whose grouped job counts move into the evidence), with the
/// harness lanes' loads when a walk follows (`lanes`).
pub async fn read_evidence(
    tx: &mut Tx,
    account_id: &AccountId,
    r: &ResolvedLadder,
    lanes: bool,
) -> Result<(LadderEvidence, CoverageFacts), StoreError> {
    let reads = coverage::Reads { runs: false, lanes };
    let mut facts = coverage::facts(tx, account_id, &r.cells, reads).await?;
    let (runs, waiting) = gate_runs(tx, account_id, &r.ladder.id, &r.cells).await?;
    let evidence = LadderEvidence {
        runs,
        jobs: std::mem::take(&mut facts.counts)
            .into_iter()
            .map(|(k, c)| (k, c.jobs))
            .collect(),
        waiting,
        recorded: verdicts(tx, &r.ladder.id).await?,
    };
    Ok((evidence, facts))
}

/// The board of a resolved ladder as `account_id` sees it, with the writes it implies (which a
/// read leaves alone), and the facts it was computed from (no lanes: no walk follows a read).
pub async fn read_progress(
    tx: &mut Tx,
    account_id: &AccountId,
    r: &ResolvedLadder,
) -> Result<(Progress, CoverageFacts), StoreError> {
    board_and_facts(tx, account_id, r, false).await
}

async fn board_and_facts(
    tx: &mut Tx,
    account_id: &AccountId,
    r: &ResolvedLadder,
    lanes: bool,
) -> Result<(Progress, CoverageFacts), StoreError> {
    let (evidence, facts) = read_evidence(tx, account_id, r, lanes).await?;
    let p = progress(&r.ladder, &r.climbers, &evidence, &facts.cases, &facts.launch);
    Ok((p, facts))
}

/// Cancels `ids` through the one cancel transition; returns each cancelled job with the status
/// it was cancelled from.
async fn cancel_jobs(tx: &mut Tx, ids: &[JobId]) -> Result<Vec<(String, JobStatus)>, StoreError> {
    let now = now_ms();
    let mut out = Vec::new();
    for id in ids {
        let Some(job) = job_in(tx, id).await? else {
            continue;
        };
        if cancel_in(tx, &job, now).await? {
            out.push((job.id.to_string(), job.status));
        }
    }
    Ok(out)
}

/// The write half of the board, which a read never does: applies the early-stop cancellations
/// and, with `record` (a top-up), persists what the gate has decided. Returns the verdicts written
/// and the jobs cancelled, with the board as it stands after them (re-read only when a cancellation
/// changed it: writing a verdict down changes no standing) and the facts it was read from.
pub async fn settle(
    tx: &mut Tx,
    account_id: &AccountId,
    r: &ResolvedLadder,
    record: bool,
) -> Result<(i64, Vec<(String, JobStatus)>, Progress, CoverageFacts), StoreError> {
    // Only a top-up (`record`) walks next: it reads the harness lanes' loads.
    let (p, facts) = board_and_facts(tx, account_id, r, record).await?;
    if record {
        write_verdicts(tx, &r.ladder.id, &p.record).await?;
    }
    let cancelled = cancel_jobs(tx, &p.cancel).await?;
    if !cancelled.is_empty() {
        events::append(
            tx.conn(),
            r.ladder.id.as_str(),
            "ladder.early_stopped",
            &serde_json::json!({ "accountId": account_id, "cancelled": cancelled.len() }),
        )
        .await?;
    }
    let recorded = if record { p.record.len() as i64 } else { 0 };
    let (p, facts) = if cancelled.is_empty() {
        (p, facts)
    } else {
        board_and_facts(tx, account_id, r, record).await?
    };
    Ok((recorded, cancelled, p, facts))
}

// ---- top-up ----------------------------------------------------------------------------------

/// Takes the top-up claim on a ladder for `holder`: the plan's conditional update and lease on
/// the ladder row. A disabled ladder is not claimed.
pub async fn claim_top_up(
    tx: &mut Tx,
    account_id: &AccountId,
    ladder_id: &LadderId,
    holder: &str,
    now: i64,
    lease_ms: i64,
) -> Result<Claim, StoreError> {
    let Some(ladder) = get_ladder(tx, account_id, ladder_id).await? else {
        return Ok(Claim::Missing);
    };
    if !ladder.enabled {
        return Ok(Claim::Paused);
    }
    Ok(
        if coverage::take_claim(tx, Feed::Ladder, account_id, ladder_id, holder, now, lease_ms).await? {
            Claim::Claimed
        } else {
            Claim::Busy
        },
    )
}

/// Releases `holder`'s claim on the ladder.
pub async fn release_top_up(tx: &mut Tx, ladder_id: &LadderId, holder: &str) -> Result<bool, StoreError> {
    coverage::drop_claim(tx, Feed::Ladder, ladder_id, holder).await
}

/// Records that a ladder top-up did not run because the ladder is disabled.
pub async fn record_skipped(tx: &mut Tx, account_id: &AccountId, ladder_id: &LadderId) -> Result<(), StoreError> {
    events::append(
        tx.conn(),
        ladder_id,
        "ladder.top_up_skipped",
        &serde_json::json!({ "accountId": account_id, "skipped": "paused" }),
    )
    .await
}

/// The recorded answer of ladder top-up `topup_id`, if it ran.
pub async fn top_up_answer(tx: &mut Tx, topup_id: &str) -> Result<Option<LadderTopUpAnswer>, StoreError> {
    let row = sqlx::query("select answer from coverage_topups where id = $1")
        .bind(topup_id)
        .fetch_optional(tx.conn())
        .await?;
    row.map(|r| json(&r.try_get::<String, _>("answer")?, "answer"))
        .transpose()
}

/// One ladder top-up, in this transaction: it first persists the verdicts the gate has decided
/// and applies the early-stop cancellations, then walks each climber's current rung in the
/// ladder's emission order under the buffer counted over every reached rung, enqueues what the
/// walk emits and records the answer under `topup_id`. Called again with the same `topup_id` it
/// returns the recorded answer and does nothing. `None` when the ladder is gone.
pub async fn enqueue_top_up(
    tx: &mut Tx,
    account_id: &AccountId,
    ladder_id: &LadderId,
    topup_id: &str,
) -> Result<Option<LadderTopUpAnswer>, StoreError> {
    take_dispatch_lock(tx).await?;
    if let Some(answer) = top_up_answer(tx, topup_id).await? {
        return Ok(Some(answer));
    }
    let Some(r) = resolve_ladder(tx, account_id, ladder_id).await? else {
        return Ok(None);
    };
    let (recorded, cancelled, p, facts) = settle(tx, account_id, &r, true).await?;
    let launch = p.board.launch_cells();
    let occupancy = outstanding(p.board.reached_cells());
    let origin = Origin::Ladder(ladder_id.to_string());
    let plan = crate::budget::walk_and_reserve(tx, &origin, &launch, r.target, occupancy, &facts).await?;
    let job_ids = coverage::insert_launches(tx, account_id, &origin, &plan, &facts, topup_id).await?;
    crate::budget::mark_reserved(tx, &plan, &job_ids).await?;
    let answer = LadderTopUpAnswer {
        top_up: TopUpAnswer::ran(plan, job_ids),
        recorded,
        cancelled: cancelled.into_iter().map(|(id, _)| id).collect(),
    };
    coverage::record_answer(tx, account_id, &origin, topup_id, &answer).await?;
    events::append(
        tx.conn(),
        ladder_id,
        "ladder.topped_up",
        &serde_json::json!({
            "topUpId": topup_id, "accountId": account_id, "bufferTarget": answer.top_up.buffer_target,
            "occupancy": answer.top_up.occupancy, "enqueued": answer.top_up.enqueued,
            "cells": answer.top_up.launched.len(), "recorded": answer.recorded, "cancelled": answer.cancelled.len(),
        }),
    )
    .await?;
    Ok(Some(answer))
}

/// The account's ladders one of whose cells (any rung at its current pin, any climber) is `cell`
/// (for the review trigger).
pub async fn ladders_with_cell(tx: &mut Tx, account_id: &AccountId, cell: &CellKey) -> Result<Vec<Ladder>, StoreError> {
    let groups = coverage::group_members(tx, account_id).await?;
    Ok(list_ladders(tx, account_id)
        .await?
        .into_iter()
        .filter(|l| {
            let climbers = Climber::with_steering(l.climbers(&groups), &BTreeMap::new());
            ladder_cells(l, &climbers).iter().any(|c| &c.cell_key == cell)
        })
        .collect())
}

/// One read of the climb: `None` when the ladder is gone or disabled; else the early-stop
/// cancellations it applied and the board after them.
pub async fn climb_step(
    tx: &mut Tx,
    account_id: &AccountId,
    ladder_id: &LadderId,
) -> Result<Option<(Vec<(String, JobStatus)>, Progress)>, StoreError> {
    let Some(r) = resolve_ladder(tx, account_id, ladder_id).await? else {
        return Ok(None);
    };
    if !r.ladder.enabled {
        return Ok(None);
    }
    let (_, cancelled, p, _) = settle(tx, account_id, &r, false).await?;
    Ok(Some((cancelled, p)))
}

/// The account that owns a ladder, if it exists.
pub async fn ladder_owner(tx: &mut Tx, ladder_id: &LadderId) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("select account_id from ladders where id = $1 and name is not null")
        .bind(ladder_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.map(|r| Ok(r.try_get::<String, _>("account_id")?)).transpose()
}

// ---- benchmarks ------------------------------------------------------------------------------

/// For `belay bench ladder` only: the raw queries a ladder's board is built from (the runs
/// counted by cell, loaded and the reviewer's worst rating, the grouped in-flight jobs, the
/// ladder's waiting jobs, its verdict rows), nothing else: the same SQL the board runs for a
/// ladder of more than 500 cells, in a read transaction on the same pool, as the board reads
/// them. Returns the runs counted and the other rows read.
pub async fn bench_raw_ladder_reads(
    tx: &mut Tx,
    account_id: &AccountId,
    ladder_id: &LadderId,
) -> Result<usize, StoreError> {
    let runs = sqlx::query(&gate_runs_sql(""))
        .bind(account_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    let jobs = sqlx::query(&coverage::jobs_by_cell_sql(""))
        .fetch_all(tx.conn())
        .await?;
    let waiting = sqlx::query(&waiting_sql())
        .bind(Origin::Ladder(ladder_id.to_string()).to_string())
        .fetch_all(tx.conn())
        .await?;
    let verdicts = sqlx::query(VERDICTS_SQL)
        .bind(ladder_id.as_str())
        .fetch_all(tx.conn())
        .await?;
    let mut counted = 0usize;
    for r in &runs {
        counted += usize::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0);
    }
    Ok(counted + jobs.len() + waiting.len() + verdicts.len())
}

crate::one_step! {
    read bench_raw_ladder_reads(account_id: &AccountId, ladder_id: &LadderId) -> usize;
}
