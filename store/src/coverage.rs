//! Coverage groups and plans, the account's buffer target, and what a matrix, a top-up, a
//! schedule and the scoped review queue read: one grouped query per source (runs by cell key, jobs
//! by cell key and status, the account's reviews, the catalogue), never one per cell.
//!
//! The reads take any cells, so a ladder hands its own (every rung its climbers reached) to the
//! same functions. A top-up's claim is a conditional update on the plan row with a lease; its
//! enqueue inserts each repeat under a natural key, in one transaction that also records the
//! top-up's answer, so a retried enqueue returns the first answer and inserts nothing twice.

use crate::dialect;
use crate::jobs::{insert_keyed_job, job_in, take_dispatch_lock};
use crate::rows::{self, enum_from, enum_text, json, status_list, to_json};
use crate::{Backend, StoreError, Tx, events, new_id_body, now_ms};
use belay_domain::budget::{BudgetInput, Ledger, Micros};
use belay_domain::buffer::{BufferTarget, outstanding, target_in_force};
use belay_domain::catalogue::{CaseFacts, GgConfigFacts, ModelFacts};
use belay_domain::coverage::{
    Cell, CoverageGroup, CoverageGroupInput, CoveragePlan, CoveragePlanInput, GroupKind, GroupMember, GroupMembers,
    OuterAxis,
};
use belay_domain::ids::{AccountId, GroupId, JobId, PlanId};
use belay_domain::job::{CellKey, Combination, Job, JobStatus, Origin};
use belay_domain::launch::{GgConfigEntry, HarnessFacts, LaunchFacts};
use belay_domain::matrix::{CellCounts, Matrix, matrix};
use belay_domain::queue::QueueRun;
use belay_domain::top_up::{Lane, TopUpAnswer, TopUpPlan, plan_top_up_within, topup_job_key};
use sqlx::any::AnyRow;
use sqlx::{Any, Row};
use std::collections::{BTreeMap, BTreeSet};

/// How long a top-up's claim holds the plan by default: one that dies without releasing it frees
/// the plan when this has passed. A worker may be given another (`--top-up-lease-seconds`).
pub const TOP_UP_LEASE_MS: i64 = 120_000;

/// Cell sets up to this size are filtered in SQL (`cell_key in (…)`); larger ones read the
/// grouped counts of every cell and keep theirs, which is one scan either way.
const IN_LIST_MAX: usize = 500;

/// What a top-up's claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The plan is this holder's until it releases it (or the lease ends).
    Claimed,
    /// Another top-up holds it.
    Busy,
    /// The plan is paused: no claim taken.
    Paused,
    /// No such plan in this account.
    Missing,
}

/// Whose row a top-up's claim is on.
pub use belay_domain::top_up::Feed;

/// The row of what a top-up feeds.
pub(crate) trait FeedRow {
    /// The table whose row holds the top-up's claim.
    fn table(self) -> &'static str;
    /// When the row may be claimed: a plan while not paused, a ladder while enabled.
    fn open(self) -> &'static str;
}

impl FeedRow for Feed {
    fn table(self) -> &'static str {
        match self {
            Feed::Plan => "coverage_plans",
            Feed::Ladder => "ladders",
        }
    }

    fn open(self) -> &'static str {
        match self {
            Feed::Plan => "paused = 0",
            Feed::Ladder => "enabled = 1",
        }
    }
}

/// Everything the matrix, a top-up and the schedule read, for a given set of cells.
#[derive(Debug, Clone, Default)]
pub struct CoverageFacts {
    pub counts: BTreeMap<CellKey, CellCounts>,
    pub cases: CaseFacts,
    pub launch: LaunchFacts,
    /// Every harness in the catalogue with its cap and its in-flight load, globally (empty when
    /// the read was a matrix's or a board's, which no walk follows).
    pub lanes: BTreeMap<String, Lane>,
}

/// A plan resolved for reading: the plan, its cells in walk order, and the target in force.
#[derive(Debug, Clone)]
pub struct ResolvedPlan {
    pub plan: CoveragePlan,
    pub cells: Vec<Cell>,
    pub target: BufferTarget,
}

const GROUP_COLUMNS: &str = "id, name, kind, members, created_at, updated_at";
const PLAN_COLUMNS: &str = "id, name, case_groups, combo_groups, cases, combinations, runs_per_cell, outer_axis, \
     buffer_target, auto_top_up, paused, created_at, updated_at, budget_micros, estimated_run_micros, spent_micros, \
     reserved_micros";

fn group_row(r: &AnyRow) -> Result<CoverageGroup, StoreError> {
    Ok(CoverageGroup {
        id: GroupId(r.try_get("id")?),
        name: r.try_get("name")?,
        kind: enum_from(&r.try_get::<String, _>("kind")?, "group kind")?,
        members: json(&r.try_get::<String, _>("members")?, "members")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn plan_row(r: &AnyRow) -> Result<CoveragePlan, StoreError> {
    let target: Option<String> = r.try_get("buffer_target")?;
    let spend = spend_row(r)?;
    Ok(CoveragePlan {
        id: PlanId(r.try_get("id")?),
        name: r.try_get("name")?,
        case_groups: json(&r.try_get::<String, _>("case_groups")?, "case_groups")?,
        combo_groups: json(&r.try_get::<String, _>("combo_groups")?, "combo_groups")?,
        cases: json(&r.try_get::<String, _>("cases")?, "cases")?,
        combinations: json(&r.try_get::<String, _>("combinations")?, "combinations")?,
        runs_per_cell: r.try_get("runs_per_cell")?,
        outer_axis: enum_from::<OuterAxis>(&r.try_get::<String, _>("outer_axis")?, "outer axis")?,
        buffer_target: target.as_deref().map(|t| json(t, "buffer_target")).transpose()?,
        auto_top_up: r.try_get::<i64, _>("auto_top_up")? != 0,
        paused: r.try_get::<i64, _>("paused")? != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get::<Option<i64>, _>("updated_at")?.unwrap_or_default(),
        budget: spend.budget.map(BudgetInput::of),
        estimated_run_usd: r
            .try_get::<Option<i64>, _>("estimated_run_micros")?
            .map(|m| Micros(m).usd()),
        spend,
    })
}

/// The ledger columns of a plan's or a ladder's row.
pub(crate) fn spend_row(r: &AnyRow) -> Result<Ledger, StoreError> {
    Ok(Ledger {
        budget: r.try_get::<Option<i64>, _>("budget_micros")?.map(Micros),
        spent: Micros(r.try_get("spent_micros")?),
        reserved: Micros(r.try_get("reserved_micros")?),
    })
}

/// The budget and `estimatedRunUsd` an input (already validated) saves, in micro-dollars.
pub(crate) fn budget_of(
    budget: Option<&BudgetInput>,
    estimated_run_usd: Option<f64>,
) -> Result<(Option<Micros>, Option<Micros>), StoreError> {
    let budget = budget.map(BudgetInput::micros).transpose()?;
    let estimated = estimated_run_usd.map(belay_domain::budget::estimated_run).transpose()?;
    Ok((budget, estimated))
}

/// The stored members of a group as the union reads them.
fn members_of(g: &CoverageGroup) -> GroupMembers {
    match g.kind {
        GroupKind::Combo => GroupMembers::Combo(
            g.members
                .iter()
                .filter_map(|m| match m {
                    GroupMember::Combination(c) => Some(c.clone()),
                    GroupMember::Case(_) => None,
                })
                .collect(),
        ),
        GroupKind::Case => GroupMembers::Case(
            g.members
                .iter()
                .filter_map(|m| match m {
                    GroupMember::Case(c) => Some(c.clone()),
                    GroupMember::Combination(_) => None,
                })
                .collect(),
        ),
    }
}

/// `$from, $from+1, …` for `n` binds.
fn placeholders(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// The cell keys to bind in an `in (…)` list, or `None` when the set is large enough that one
/// unfiltered grouped scan is the better query.
fn key_list(cells: &[Cell]) -> Option<Vec<&str>> {
    if cells.len() <= IN_LIST_MAX {
        let keys: BTreeSet<&str> = cells.iter().map(|c| c.cell_key.0.as_str()).collect();
        Some(keys.into_iter().collect())
    } else {
        None
    }
}

// ---- groups ----------------------------------------------------------------------------------

/// Stores a new group (the input already validated, its gg members checked against the account).
pub async fn create_group(
    tx: &mut Tx,
    account_id: &AccountId,
    input: &CoverageGroupInput,
) -> Result<CoverageGroup, StoreError> {
    let members = input.validate()?;
    let id = GroupId::from_body(&new_id_body());
    let now = now_ms();
    sqlx::query(
        r#"insert into coverage_groups (id, account_id, name, kind, members, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, $6)"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(&input.name)
    .bind(input.kind.as_str())
    .bind(to_json(&members.to_members()))
    .bind(now)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        id.as_str(),
        "coverage_group.created",
        &serde_json::json!({ "accountId": account_id, "kind": input.kind.as_str() }),
    )
    .await?;
    get_group(tx, account_id, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("coverage group", &id))
}

/// One of the account's groups (another account's is absent).
pub async fn get_group(tx: &mut Tx, account_id: &AccountId, id: &GroupId) -> Result<Option<CoverageGroup>, StoreError> {
    let sql = format!("select {GROUP_COLUMNS} from coverage_groups where id = $1 and account_id = $2");
    let row = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(group_row).transpose()
}

/// The account's groups, oldest first.
pub async fn list_groups(tx: &mut Tx, account_id: &AccountId) -> Result<Vec<CoverageGroup>, StoreError> {
    let sql = format!("select {GROUP_COLUMNS} from coverage_groups where account_id = $1 order by created_at, id");
    let rows = sqlx::query(&sql).bind(account_id.as_str()).fetch_all(tx.conn()).await?;
    rows.iter().map(group_row).collect()
}

/// Replaces a group's name, kind and members; `None` when the account has no such group.
pub async fn update_group(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &GroupId,
    input: &CoverageGroupInput,
) -> Result<Option<CoverageGroup>, StoreError> {
    let members = input.validate()?;
    let done = sqlx::query(
        r#"update coverage_groups set name = $3, kind = $4, members = $5, updated_at = $6
           where id = $1 and account_id = $2"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(&input.name)
    .bind(input.kind.as_str())
    .bind(to_json(&members.to_members()))
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    events::append(
        tx.conn(),
        id,
        "coverage_group.updated",
        &serde_json::json!({ "accountId": account_id }),
    )
    .await?;
    get_group(tx, account_id, id).await
}

/// Deletes one of the account's groups; false when there was none. Plans pointing at it keep the
/// pointer, which resolves to nothing.
pub async fn delete_group(tx: &mut Tx, account_id: &AccountId, id: &GroupId) -> Result<bool, StoreError> {
    delete_owned(
        tx,
        "delete from coverage_groups where id = $1 and account_id = $2",
        account_id,
        id,
        "coverage_group.deleted",
    )
    .await
}

/// Runs a delete of one owned row (`sql` binds the id, then the account) and records `event`
/// when it deleted one.
async fn delete_owned(
    tx: &mut Tx,
    sql: &str,
    account_id: &AccountId,
    id: &str,
    event: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(sql)
        .bind(id)
        .bind(account_id.as_str())
        .execute(tx.conn())
        .await?;
    if done.rows_affected() == 1 {
        events::append(tx.conn(), id, event, &serde_json::json!({ "accountId": account_id })).await?;
    }
    Ok(done.rows_affected() == 1)
}

/// The account's groups with their kinds, for checking a plan's pointers.
pub async fn group_kinds(tx: &mut Tx, account_id: &AccountId) -> Result<BTreeMap<GroupId, GroupKind>, StoreError> {
    Ok(list_groups(tx, account_id)
        .await?
        .into_iter()
        .map(|g| (g.id, g.kind))
        .collect())
}

/// The account's groups' current members, for resolving plans (and ladders) to cells.
pub async fn group_members(tx: &mut Tx, account_id: &AccountId) -> Result<BTreeMap<GroupId, GroupMembers>, StoreError> {
    Ok(list_groups(tx, account_id)
        .await?
        .iter()
        .map(|g| (g.id.clone(), members_of(g)))
        .collect())
}

/// The gg configuration ids of `combos` that `account_id` has never owned (deleted ones count as
/// owned: their cells report `gg_config_deleted`).
pub async fn foreign_gg_configs<'c>(
    tx: &mut Tx,
    account_id: &str,
    combos: impl IntoIterator<Item = &'c Combination>,
) -> Result<Vec<String>, StoreError> {
    let owned: BTreeSet<String> = sqlx::query("select id from gg_configs where account_id = $1")
        .bind(account_id)
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(|r| r.try_get::<String, _>("id"))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for c in combos {
        if let Combination::Gg { gg_config_id, .. } = c
            && !owned.contains(gg_config_id)
            && !out.contains(gg_config_id)
        {
            out.push(gg_config_id.clone());
        }
    }
    Ok(out)
}

// ---- plans -----------------------------------------------------------------------------------

fn bind_plan<'q>(
    q: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    input: &CoveragePlanInput,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    q.bind(input.name.clone())
        .bind(to_json(&input.case_groups))
        .bind(to_json(&input.combo_groups))
        .bind(to_json(&input.cases))
        .bind(to_json(&input.combinations))
        .bind(input.runs_per_cell)
        .bind(enum_text(&input.outer_axis))
        .bind(input.buffer_target.as_ref().map(to_json))
        .bind(input.auto_top_up as i64)
        .bind(input.paused as i64)
}

/// Stores a new plan (validated, its pointers checked against the account's groups).
pub async fn create_plan(
    tx: &mut Tx,
    account_id: &AccountId,
    input: &CoveragePlanInput,
) -> Result<CoveragePlan, StoreError> {
    let id = PlanId::from_body(&new_id_body());
    let now = now_ms();
    let q = sqlx::query(
        r#"insert into coverage_plans (id, account_id, created_at, updated_at, name, case_groups, combo_groups, cases,
               combinations, runs_per_cell, outer_axis, buffer_target, auto_top_up, paused)
           values ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"#,
    )
    .bind(id.as_str().to_string())
    .bind(account_id.to_string())
    .bind(now);
    bind_plan(q, input).execute(tx.conn()).await?;
    let (budget, estimated) = budget_of(input.budget.as_ref(), input.estimated_run_usd)?;
    crate::budget::set_budget(tx, &Origin::Plan(id.to_string()), budget, estimated).await?;
    events::append(
        tx.conn(),
        id.as_str(),
        "coverage_plan.created",
        &serde_json::json!({ "accountId": account_id }),
    )
    .await?;
    get_plan(tx, account_id, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("coverage plan", &id))
}

/// One of the account's plans (another account's is absent).
pub async fn get_plan(tx: &mut Tx, account_id: &AccountId, id: &PlanId) -> Result<Option<CoveragePlan>, StoreError> {
    let sql =
        format!("select {PLAN_COLUMNS} from coverage_plans where id = $1 and account_id = $2 and name is not null");
    let row = sqlx::query(&sql)
        .bind(id.as_str())
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(plan_row).transpose()
}

/// The account's plans, oldest first.
pub async fn list_plans(tx: &mut Tx, account_id: &AccountId) -> Result<Vec<CoveragePlan>, StoreError> {
    let sql = format!(
        "select {PLAN_COLUMNS} from coverage_plans where account_id = $1 and name is not null order by created_at, id"
    );
    let rows = sqlx::query(&sql).bind(account_id.as_str()).fetch_all(tx.conn()).await?;
    rows.iter().map(plan_row).collect()
}

/// Replaces a plan's fields; `None` when the account has no such plan.
pub async fn update_plan(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &PlanId,
    input: &CoveragePlanInput,
) -> Result<Option<CoveragePlan>, StoreError> {
    let q = sqlx::query(
        r#"update coverage_plans set name = $4, case_groups = $5, combo_groups = $6, cases = $7, combinations = $8,
               runs_per_cell = $9, outer_axis = $10, buffer_target = $11, auto_top_up = $12, paused = $13,
               updated_at = $3
           where id = $1 and account_id = $2 and name is not null"#,
    )
    .bind(id.to_string())
    .bind(account_id.to_string())
    .bind(now_ms());
    let done = bind_plan(q, input).execute(tx.conn()).await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    let (budget, estimated) = budget_of(input.budget.as_ref(), input.estimated_run_usd)?;
    crate::budget::set_budget(tx, &Origin::Plan(id.to_string()), budget, estimated).await?;
    events::append(
        tx.conn(),
        id,
        "coverage_plan.updated",
        &serde_json::json!({ "accountId": account_id, "paused": input.paused }),
    )
    .await?;
    get_plan(tx, account_id, id).await
}

/// Deletes a plan; the jobs it launched keep their `origin`. False when there was none.
pub async fn delete_plan(tx: &mut Tx, account_id: &AccountId, id: &PlanId) -> Result<bool, StoreError> {
    delete_owned(
        tx,
        "delete from coverage_plans where id = $1 and account_id = $2 and name is not null",
        account_id,
        id,
        "coverage_plan.deleted",
    )
    .await
}

/// Pauses or resumes a plan, recording which in the events; `None` when there is no such plan.
pub async fn set_paused(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &PlanId,
    paused: bool,
    why: &str,
) -> Result<Option<CoveragePlan>, StoreError> {
    let done = sqlx::query(
        "update coverage_plans set paused = $3, updated_at = $4 where id = $1 and account_id = $2 and name is not null",
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(paused as i64)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    let kind = if paused {
        "coverage_plan.paused"
    } else {
        "coverage_plan.resumed"
    };
    events::append(
        tx.conn(),
        id,
        kind,
        &serde_json::json!({ "accountId": account_id, "by": why }),
    )
    .await?;
    get_plan(tx, account_id, id).await
}

// ---- settings --------------------------------------------------------------------------------

/// The account's saved buffer target, if it ever saved one.
pub async fn buffer_setting(tx: &mut Tx, account_id: &AccountId) -> Result<Option<BufferTarget>, StoreError> {
    let row = sqlx::query("select buffer_target from coverage_settings where account_id = $1")
        .bind(account_id.as_str())
        .fetch_optional(tx.conn())
        .await?;
    row.map(|r| json(&r.try_get::<String, _>("buffer_target")?, "buffer_target"))
        .transpose()
}

/// Saves the account's buffer target (already clamped).
pub async fn put_buffer_setting(tx: &mut Tx, account_id: &AccountId, target: BufferTarget) -> Result<(), StoreError> {
    sqlx::query(
        r#"insert into coverage_settings (account_id, buffer_target, updated_at) values ($1, $2, $3)
           on conflict (account_id) do update set buffer_target = excluded.buffer_target, updated_at = excluded.updated_at"#,
    )
    .bind(account_id.as_str())
    .bind(to_json(&target))
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        account_id,
        "coverage_settings.updated",
        &serde_json::json!({ "bufferTarget": target }),
    )
    .await?;
    Ok(())
}

// ---- reading the matrix ----------------------------------------------------------------------

/// A plan of the account resolved to its cells and its target in force, or `None`.
pub async fn resolve_plan(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &PlanId,
) -> Result<Option<ResolvedPlan>, StoreError> {
    let Some(plan) = get_plan(tx, account_id, id).await? else {
        return Ok(None);
    };
    let groups = group_members(tx, account_id).await?;
    let cells = plan.cells(&groups);
    let target = target_in_force(buffer_setting(tx, account_id).await?, plan.buffer_target);
    Ok(Some(ResolvedPlan { plan, cells, target }))
}

/// Every count and fact the walk and the schedule read for `cells`, as seen by `account_id`
/// (whose reviews decide `unreviewed` and whose gg configurations are resolved).
pub async fn coverage_facts(tx: &mut Tx, account_id: &AccountId, cells: &[Cell]) -> Result<CoverageFacts, StoreError> {
    facts(tx, account_id, cells, Reads::WALK).await
}

/// What the matrix reads for `cells`: [`coverage_facts`] without the harness lanes' loads, which
/// only a walk needs (`lanes` is left empty).
pub async fn matrix_facts(tx: &mut Tx, account_id: &AccountId, cells: &[Cell]) -> Result<CoverageFacts, StoreError> {
    facts(tx, account_id, cells, Reads::MATRIX).await
}

/// Which of the optional reads [`facts`] makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reads {
    /// The grouped run counts; without them they are left at zero (a ladder reads its cells'
    /// runs grouped by how the gate judges them, and counts them itself).
    pub runs: bool,
    /// Each harness's cap and in-flight load, globally (what a walk defers by); without them
    /// `lanes` is empty.
    pub lanes: bool,
}

impl Reads {
    /// What a walk reads: everything.
    const WALK: Reads = Reads {
        runs: true,
        lanes: true,
    };
    /// What the matrix reads: no lanes.
    const MATRIX: Reads = Reads {
        runs: true,
        lanes: false,
    };
}

/// [`coverage_facts`], making the optional reads `reads` names.
pub(crate) async fn facts(
    tx: &mut Tx,
    account_id: &AccountId,
    cells: &[Cell],
    reads: Reads,
) -> Result<CoverageFacts, StoreError> {
    let counts = cell_counts(tx, account_id, cells, reads).await?;
    // The catalogue: case versions, harnesses with their caps and loads, models, the account's
    // gg configurations (deleted ones too).
    let cases = case_facts(tx).await?;
    let (launch, lanes) = launch_facts(tx, account_id, reads.lanes).await?;
    Ok(CoverageFacts {
        counts,
        cases,
        launch,
        lanes,
    })
}

/// Each wanted cell's completed runs (and those the account has not reviewed) and its in-flight
/// jobs by status.
async fn cell_counts(
    tx: &mut Tx,
    account_id: &AccountId,
    cells: &[Cell],
    reads: Reads,
) -> Result<BTreeMap<CellKey, CellCounts>, StoreError> {
    let wanted: BTreeSet<&CellKey> = cells.iter().map(|c| &c.cell_key).collect();
    let keys = key_list(cells);
    let mut counts: BTreeMap<CellKey, CellCounts> = BTreeMap::new();

    // Runs by cell key, with the ones this account has not reviewed (auto-graded ones never).
    if reads.runs {
        for (key, completed, unreviewed) in run_counts(tx, account_id, keys.as_deref()).await? {
            let key = CellKey(key);
            if wanted.contains(&key) {
                let c = counts.entry(key).or_default();
                c.completed = completed;
                c.unreviewed = unreviewed;
            }
        }
    }

    // In-flight jobs by cell key and status.
    let filter = keys
        .as_ref()
        .map(|k| format!(" and cell_key in ({})", placeholders(1, k.len())))
        .unwrap_or_default();
    let sql = dialect::grouped_sql(tx.backend(), &jobs_by_cell_sql(&filter), JOBS_BY_CELL_COLUMNS);
    let mut q = sqlx::query(&sql);
    for k in keys.iter().flatten() {
        q = q.bind(*k);
    }
    type Row = (String, String, i64);
    for (key, status, n) in dialect::grouped::<Row>(q, tx, "jobs by cell").await? {
        let key = CellKey(key);
        if wanted.contains(&key) {
            let status = rows::status(&status)?;
            counts.entry(key).or_default().jobs.insert(status, n);
        }
    }

    Ok(counts)
}

/// What a launch is checked against: the harnesses (with their lanes' caps and loads when
/// `with_lanes`), the models and the account's gg configurations, deleted ones too.
async fn launch_facts(
    tx: &mut Tx,
    account_id: &AccountId,
    with_lanes: bool,
) -> Result<(LaunchFacts, BTreeMap<String, Lane>), StoreError> {
    let mut launch = LaunchFacts::default();
    let mut lanes = BTreeMap::new();
    for r in sqlx::query("select name, provider_routed, max_parallelism from harnesses")
        .fetch_all(tx.conn())
        .await?
    {
        let name: String = r.try_get("name")?;
        launch.harnesses.insert(
            name.clone(),
            HarnessFacts {
                provider_routed: r.try_get::<i64, _>("provider_routed")? != 0,
            },
        );
        if with_lanes {
            lanes.insert(
                name,
                Lane {
                    cap: r.try_get("max_parallelism")?,
                    load: 0,
                },
            );
        }
    }
    if with_lanes {
        let load_sql = format!(
            "select harness, count(*) as n from jobs where status in ({}) group by harness",
            status_list(&JobStatus::IN_FLIGHT)
        );
        for r in sqlx::query(&load_sql).fetch_all(tx.conn()).await? {
            let h: String = r.try_get("harness")?;
            if let Some(l) = lanes.get_mut(&h) {
                l.load = r.try_get("n")?;
            }
        }
    }
    for r in sqlx::query("select id, context_window, input_per_mtok_usd, output_per_mtok_usd from models")
        .fetch_all(tx.conn())
        .await?
    {
        let input: Option<f64> = r.try_get("input_per_mtok_usd")?;
        let output: Option<f64> = r.try_get("output_per_mtok_usd")?;
        launch.models.insert(
            r.try_get("id")?,
            ModelFacts {
                context_window: r.try_get("context_window")?,
                list_price: match (input, output) {
                    (Some(i), Some(o)) => Some(belay_domain::catalogue::ListPrice {
                        input_per_mtok_usd: i,
                        output_per_mtok_usd: o,
                    }),
                    _ => None,
                },
            },
        );
    }
    for r in
        sqlx::query("select id, name, launch_slots, capabilities, deleted_at from gg_configs where account_id = $1")
            .bind(account_id.as_str())
            .fetch_all(tx.conn())
            .await?
    {
        let entry = if r.try_get::<Option<i64>, _>("deleted_at")?.is_some() {
            GgConfigEntry::Deleted
        } else {
            GgConfigEntry::Live(GgConfigFacts {
                name: r.try_get("name")?,
                launch_slots: json(&r.try_get::<String, _>("launch_slots")?, "launch_slots")?,
                capabilities: json(&r.try_get::<String, _>("capabilities")?, "capabilities")?,
            })
        };
        launch.gg_configs.insert(r.try_get("id")?, entry);
    }
    Ok((launch, lanes))
}

/// The columns of [`jobs_by_cell_sql`], in the order a packed read gives them.
pub(crate) const JOBS_BY_CELL_COLUMNS: &[&str] = &["cell_key", "status", "n"];

/// The grouped run counts of the cells `keys` names (every cell: `None`): each cell's completed
/// runs and those of them `account_id` has not reviewed (auto-graded ones never count), as
/// `(cell key, completed, unreviewed)`.
///
/// PostgreSQL joins the runs to the account's reviews ([`runs_by_cell_sql`]). SQLite counts the
/// runs by cell ([`runs_counted_sql`]) and the account's reviews by cell ([`reviews_by_cell_sql`])
/// apart, each from an index already in cell order, and subtracts: its join looked every run up
/// in the reviews, twice the time of the two counts (decision 0035). A review exists only for a
/// run that takes one (never an auto-graded one), once per run and account, so the two agree.
async fn run_counts(
    tx: &mut Tx,
    account_id: &AccountId,
    keys: Option<&[&str]>,
) -> Result<Vec<(String, i64, i64)>, StoreError> {
    match tx.backend() {
        Backend::Postgres => {
            let filter = keys
                .map(|k| format!(" where r.cell_key in ({})", placeholders(2, k.len())))
                .unwrap_or_default();
            let sql = runs_by_cell_sql(&filter);
            let mut q = sqlx::query(&sql).bind(account_id.as_str());
            for k in keys.into_iter().flatten() {
                q = q.bind(*k);
            }
            type Row = (String, i64, Option<i64>);
            let rows = dialect::grouped::<Row>(q, tx, "runs by cell").await?;
            Ok(rows.into_iter().map(|(k, c, u)| (k, c, u.unwrap_or(0))).collect())
        }
        Backend::Sqlite => {
            let filter = keys
                .map(|k| format!(" where cell_key in ({})", placeholders(1, k.len())))
                .unwrap_or_default();
            let sql = dialect::grouped_sql(Backend::Sqlite, &runs_counted_sql(&filter), RUNS_COUNTED_COLUMNS);
            let mut q = sqlx::query(&sql);
            for k in keys.into_iter().flatten() {
                q = q.bind(*k);
            }
            let runs = dialect::grouped::<(String, i64, i64)>(q, tx, "runs by cell").await?;
            let filter = keys
                .map(|k| format!(" and cell_key in ({})", placeholders(2, k.len())))
                .unwrap_or_default();
            let sql = dialect::grouped_sql(Backend::Sqlite, &reviews_by_cell_sql(&filter), REVIEWS_BY_CELL_COLUMNS);
            let mut q = sqlx::query(&sql).bind(account_id.as_str());
            for k in keys.into_iter().flatten() {
                q = q.bind(*k);
            }
            let reviewed: BTreeMap<String, i64> = dialect::grouped::<(String, i64)>(q, tx, "reviews by cell")
                .await?
                .into_iter()
                .collect();
            Ok(runs
                .into_iter()
                .map(|(k, completed, reviewable)| {
                    let unreviewed = (reviewable - reviewed.get(&k).copied().unwrap_or(0)).max(0);
                    (k, completed, unreviewed)
                })
                .collect())
        }
    }
}

/// PostgreSQL's grouped run counts: completed runs by cell key, with those the account bound as
/// `$1` has not reviewed (auto-graded ones never count). `filter` narrows the cells
/// (` where r.cell_key in (…)`) or is empty.
fn runs_by_cell_sql(filter: &str) -> String {
    format!(
        r#"select r.cell_key, count(*) as completed,
               sum(case when v.run_id is null and r.test_type <> 'performance' then 1 else 0 end) as unreviewed
           from runs r left join reviews v on v.run_id = r.id and v.account_id = $1{filter}
           group by r.cell_key"#
    )
}

/// SQLite's grouped run counts: completed runs by cell key, with those of them a reviewer could
/// review (auto-graded ones never). `filter` narrows the cells (` where cell_key in (…)`, bound
/// from `$1`) or is empty.
fn runs_counted_sql(filter: &str) -> String {
    format!(
        r#"select cell_key, count(*) as completed,
               sum(case when test_type <> 'performance' then 1 else 0 end) as reviewable
           from runs{filter} group by cell_key"#
    )
}

/// The columns of [`runs_counted_sql`], in the order a packed read gives them.
const RUNS_COUNTED_COLUMNS: &[&str] = &["cell_key", "completed", "reviewable"];

/// SQLite's grouped review counts: the reviews of the account bound as `$1` by cell key. `filter`
/// narrows the cells (` and cell_key in (…)`) or is empty.
fn reviews_by_cell_sql(filter: &str) -> String {
    format!("select cell_key, count(*) as reviewed from reviews where account_id = $1{filter} group by cell_key")
}

/// The columns of [`reviews_by_cell_sql`], in the order a packed read gives them.
const REVIEWS_BY_CELL_COLUMNS: &[&str] = &["cell_key", "reviewed"];

/// The grouped in-flight job counts by cell key and status. `filter` narrows the cells
/// (` and cell_key in (…)`) or is empty.
pub(crate) fn jobs_by_cell_sql(filter: &str) -> String {
    format!(
        "select cell_key, status, count(*) as n from jobs where status in ({}){filter} group by cell_key, status",
        status_list(&JobStatus::IN_FLIGHT)
    )
}

/// Every ingested case version with its test type (what a ladder's rungs are checked against).
pub async fn case_facts(tx: &mut Tx) -> Result<CaseFacts, StoreError> {
    let version_rows = sqlx::query("select slug, version, test_type from test_case_versions")
        .fetch_all(tx.conn())
        .await?;
    let mut versions = Vec::with_capacity(version_rows.len());
    for r in &version_rows {
        versions.push((
            r.try_get::<String, _>("slug")?,
            r.try_get::<String, _>("version")?,
            rows::test_type(&r.try_get::<String, _>("test_type")?)?,
        ));
    }
    Ok(CaseFacts::from_versions(
        versions.iter().map(|(s, v, t)| (s.as_str(), v.as_str(), *t)),
    ))
}

/// The matrix of `cells` at `desired` runs each, as `account_id` sees it.
pub async fn cells_matrix(
    tx: &mut Tx,
    account_id: &AccountId,
    cells: &[Cell],
    desired: i64,
) -> Result<Matrix, StoreError> {
    let f = matrix_facts(tx, account_id, cells).await?;
    Ok(matrix(cells, desired, &f.counts, &f.cases, &f.launch))
}

/// What a top-up of these cells would do now: the one walk, over what the database holds, under
/// the budget of `origin` (its plan), reserving nothing.
pub async fn plan_walk(
    tx: &mut Tx,
    account_id: &AccountId,
    cells: &[Cell],
    desired: i64,
    target: BufferTarget,
    origin: &Origin,
) -> Result<(TopUpPlan, CoverageFacts), StoreError> {
    let f = coverage_facts(tx, account_id, cells).await?;
    let m = matrix(cells, desired, &f.counts, &f.cases, &f.launch);
    let budget = crate::budget::cell_budget(tx, origin, &m.cells, &f.launch.models).await?;
    let plan = plan_top_up_within(&m.cells, target, outstanding(&m.cells), &f.lanes, Some(budget));
    Ok((plan, f))
}

// ---- top-up ----------------------------------------------------------------------------------

/// Takes the top-up claim on a plan for `holder` (a top-up's id) at `now`: a conditional update
/// that succeeds when nobody holds it, the holder's lease (`lease_ms` from its claim) ended, or
/// `holder` holds it already (a retried claim). A paused plan is not claimed.
pub async fn claim_top_up(
    tx: &mut Tx,
    account_id: &AccountId,
    plan_id: &PlanId,
    holder: &str,
    now: i64,
    lease_ms: i64,
) -> Result<Claim, StoreError> {
    let Some(plan) = get_plan(tx, account_id, plan_id).await? else {
        return Ok(Claim::Missing);
    };
    if plan.paused {
        return Ok(Claim::Paused);
    }
    Ok(
        if take_claim(tx, Feed::Plan, account_id, plan_id, holder, now, lease_ms).await? {
            Claim::Claimed
        } else {
            Claim::Busy
        },
    )
}

/// The claim's conditional update on a plan's or a ladder's row, while it is open (not paused,
/// enabled): true when `holder` now holds it.
pub(crate) async fn take_claim(
    tx: &mut Tx,
    of: Feed,
    account_id: &AccountId,
    id: &str,
    holder: &str,
    now: i64,
    lease_ms: i64,
) -> Result<bool, StoreError> {
    let (table, open) = (of.table(), of.open());
    let sql = format!(
        r#"update {table} set topping_up_at = $3, topping_up_by = $4
           where id = $1 and account_id = $2 and {open}
             and (topping_up_at is null or topping_up_at <= $5 or topping_up_by = $4)"#
    );
    let done = sqlx::query(&sql)
        .bind(id)
        .bind(account_id.as_str())
        .bind(now)
        .bind(holder)
        .bind(now - lease_ms)
        .execute(tx.conn())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Who holds the top-up claim on a plan (`coverage_plans`) or a ladder (`ladders`) row, and since
/// when: `None` when nobody does. A holder whose lease has ended is still shown; the next claim
/// takes it over.
pub async fn claim_holder(tx: &mut Tx, of: Feed, id: &str) -> Result<Option<(String, i64)>, StoreError> {
    let sql = format!(
        "select topping_up_by, topping_up_at from {} where id = $1 and topping_up_by is not null",
        of.table()
    );
    let row = sqlx::query(&sql).bind(id).fetch_optional(tx.conn()).await?;
    row.map(|r| Ok((r.try_get("topping_up_by")?, r.try_get("topping_up_at")?)))
        .transpose()
}

/// Releases `holder`'s claim on a plan's or a ladder's row (nothing when another holds it now).
pub(crate) async fn drop_claim(tx: &mut Tx, of: Feed, id: &str, holder: &str) -> Result<bool, StoreError> {
    let sql = format!(
        "update {} set topping_up_at = null, topping_up_by = null where id = $1 and topping_up_by = $2",
        of.table()
    );
    let done = sqlx::query(&sql).bind(id).bind(holder).execute(tx.conn()).await?;
    Ok(done.rows_affected() == 1)
}

/// Releases `holder`'s claim (nothing when another holds it now).
pub async fn release_top_up(tx: &mut Tx, plan_id: &PlanId, holder: &str) -> Result<bool, StoreError> {
    drop_claim(tx, Feed::Plan, plan_id, holder).await
}

/// The recorded answer of top-up `topup_id`, if it ran.
pub async fn top_up_answer(tx: &mut Tx, topup_id: &str) -> Result<Option<TopUpAnswer>, StoreError> {
    let row = sqlx::query("select answer from coverage_topups where id = $1")
        .bind(topup_id)
        .fetch_optional(tx.conn())
        .await?;
    row.map(|r| json(&r.try_get::<String, _>("answer")?, "answer"))
        .transpose()
}

/// Records that a top-up did not run because the plan is paused.
pub async fn record_skipped(
    tx: &mut Tx,
    account_id: &AccountId,
    plan_id: &PlanId,
    answer: &TopUpAnswer,
) -> Result<(), StoreError> {
    events::append(
        tx.conn(),
        plan_id,
        "coverage_plan.top_up_skipped",
        &serde_json::json!({ "accountId": account_id, "skipped": answer.skipped }),
    )
    .await
}

/// Enqueues what one top-up emits for `cells` (whose jobs carry `origin`, launched by
/// `account_id`), in emission order, in this transaction, and records its answer under
/// `topup_id`. Called again with the same `topup_id` it returns the recorded answer and inserts
/// nothing. The caller holds the claim; the transaction takes the dispatch lock first, so the
/// occupancy it reads is the one its jobs join.
pub async fn enqueue_top_up(
    tx: &mut Tx,
    account_id: &AccountId,
    origin: &Origin,
    cells: &[Cell],
    desired: i64,
    target: BufferTarget,
    topup_id: &str,
) -> Result<TopUpAnswer, StoreError> {
    take_dispatch_lock(tx).await?;
    if let Some(answer) = top_up_answer(tx, topup_id).await? {
        return Ok(answer);
    }
    let facts = coverage_facts(tx, account_id, cells).await?;
    let m = matrix(cells, desired, &facts.counts, &facts.cases, &facts.launch);
    let plan = crate::budget::walk_and_reserve(tx, origin, &m.cells, target, outstanding(&m.cells), &facts).await?;
    let job_ids = insert_launches(tx, account_id, origin, &plan, &facts, topup_id).await?;
    crate::budget::mark_reserved(tx, &plan, &job_ids).await?;
    let answer = TopUpAnswer::ran(plan, job_ids);
    record_answer(tx, account_id, origin, topup_id, &answer).await?;
    events::append(
        tx.conn(),
        &origin.to_string(),
        "coverage_plan.topped_up",
        &serde_json::json!({
            "topUpId": topup_id, "accountId": account_id, "bufferTarget": answer.buffer_target,
            "occupancy": answer.occupancy, "enqueued": answer.enqueued, "cells": answer.launched.len(),
            "held": answer.held.len(), "skipped": answer.skipped,
        }),
    )
    .await?;
    Ok(answer)
}

/// Inserts the jobs of `plan`'s launches, in emission order, each repeat under its natural key
/// (`topup_id`, cell, repeat); returns each launch's job ids.
pub(crate) async fn insert_launches(
    tx: &mut Tx,
    account_id: &AccountId,
    origin: &Origin,
    plan: &TopUpPlan,
    facts: &CoverageFacts,
    topup_id: &str,
) -> Result<Vec<Vec<JobId>>, StoreError> {
    let now = now_ms();
    let account = AccountId::from(account_id);
    let mut job_ids = Vec::with_capacity(plan.launch.len());
    for l in &plan.launch {
        let jobs = belay_domain::top_up::launch_jobs(l, &facts.launch, &facts.cases, &account, origin);
        let mut ids = Vec::with_capacity(jobs.len());
        for (new, repeat) in jobs.iter().zip(1..) {
            let key = topup_job_key(topup_id, &l.cell_key, repeat);
            let id = match insert_keyed_job(tx, new, now, Some(&key)).await? {
                Some(id) => id,
                None => sqlx::query("select id from jobs where topup_key = $1")
                    .bind(&key)
                    .fetch_one(tx.conn())
                    .await?
                    .try_get::<String, _>("id")?
                    .into(),
            };
            ids.push(id);
        }
        job_ids.push(ids);
    }
    Ok(job_ids)
}

/// Records a top-up's answer under `topup_id`.
pub(crate) async fn record_answer<A: serde::Serialize>(
    tx: &mut Tx,
    account_id: &str,
    origin: &Origin,
    topup_id: &str,
    answer: &A,
) -> Result<(), StoreError> {
    let now = now_ms();
    sqlx::query("insert into coverage_topups (id, plan_id, account_id, answer, at) values ($1, $2, $3, $4, $5)")
        .bind(topup_id)
        .bind(origin.to_string())
        .bind(account_id)
        .bind(to_json(answer))
        .bind(now)
        .execute(tx.conn())
        .await?;
    Ok(())
}

// ---- the scoped queue and halts --------------------------------------------------------------

/// `account_id`'s completed runs of `cells` it has not reviewed, auto-graded ones left out, each
/// with the queue position of the job that produced it.
pub async fn unreviewed_runs(tx: &mut Tx, account_id: &AccountId, cells: &[Cell]) -> Result<Vec<QueueRun>, StoreError> {
    let wanted: BTreeSet<&CellKey> = cells.iter().map(|c| &c.cell_key).collect();
    let keys = key_list(cells);
    let filter = keys
        .as_ref()
        .map(|k| format!(" and r.cell_key in ({})", placeholders(2, k.len())))
        .unwrap_or_default();
    let sql = format!(
        r#"select r.id, r.cell_key, j.queue_seq, r.test_type, r.loaded
           from runs r join jobs j on j.id = r.job_id
           left join reviews v on v.run_id = r.id and v.account_id = $1
           where v.run_id is null and r.test_type <> 'performance'{filter}"#
    );
    let mut q = sqlx::query(&sql).bind(account_id.as_str());
    for k in keys.iter().flatten() {
        q = q.bind(*k);
    }
    let mut out = Vec::new();
    for r in q.fetch_all(tx.conn()).await? {
        let key = CellKey(r.try_get("cell_key")?);
        if !wanted.contains(&key) {
            continue;
        }
        out.push(QueueRun {
            run_id: r.try_get::<String, _>("id")?.into(),
            cell_key: key,
            queue_seq: r.try_get("queue_seq")?,
            test_type: rows::test_type(&r.try_get::<String, _>("test_type")?)?,
            loaded: r.try_get::<i64, _>("loaded")? != 0,
        });
    }
    Ok(out)
}

/// The account's plans whose cells include `cell` (for the review trigger).
pub async fn plans_with_cell(
    tx: &mut Tx,
    account_id: &AccountId,
    cell: &CellKey,
) -> Result<Vec<CoveragePlan>, StoreError> {
    let groups = group_members(tx, account_id).await?;
    Ok(list_plans(tx, account_id)
        .await?
        .into_iter()
        .filter(|p| p.cells(&groups).iter().any(|c| &c.cell_key == cell))
        .collect())
}

/// Cancels the jobs of `origin` in `statuses` through the one cancel transition; returns each
/// with the status it was cancelled from. A job launched by hand has no origin and is never met.
pub async fn cancel_origin(
    tx: &mut Tx,
    origin: &Origin,
    statuses: &[JobStatus],
) -> Result<Vec<(Job, JobStatus)>, StoreError> {
    take_dispatch_lock(tx).await?;
    let sql = format!(
        "select id from jobs where origin = $1 and status in ({}) order by queue_seq",
        status_list(statuses)
    );
    let ids: Vec<String> = sqlx::query(&sql)
        .bind(origin.to_string())
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<_, _>>()?;
    let now = now_ms();
    let mut out = Vec::new();
    for id in ids.into_iter().map(JobId) {
        let Some(job) = job_in(tx, &id).await? else {
            continue;
        };
        if crate::jobs::cancel_in(tx, &job, now).await?
            && let Some(current) = job_in(tx, &id).await?
        {
            out.push((current, job.status));
        }
    }
    Ok(out)
}

// ---- benchmarks ------------------------------------------------------------------------------

/// For `belay bench coverage` only: gives each cell `runs_per_cell` completed runs and
/// `jobs_per_cell` running jobs (launched by hand), and `reviewer` a review of every
/// `review_every`-th run, in multi-row statements.
pub async fn bench_seed_cells(
    tx: &mut Tx,
    cells: &[Cell],
    runs_per_cell: usize,
    jobs_per_cell: usize,
    reviewer: &str,
    review_every: usize,
) -> Result<(), StoreError> {
    let now = now_ms();
    let mut runs = Vec::new();
    let mut jobs = Vec::new();
    for (ci, c) in cells.iter().enumerate() {
        for r in 0..runs_per_cell {
            runs.push((format!("run_b{ci}x{r}"), c));
        }
        for j in 0..jobs_per_cell {
            jobs.push((format!("job_b{ci}x{j}"), c));
        }
    }
    let split = |c: &Combination| match c {
        Combination::Harness { model, provider, .. } => ("harness", Some(model.clone()), provider.clone()),
        Combination::Gg { .. } => ("gg", None, None),
    };
    for chunk in runs.chunks(500) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| format!("({}, 'standard', 1, '[]')", placeholders(i * 12 + 1, 12)))
            .collect();
        let sql = format!(
            r#"insert into runs (id, job_id, case_slug, case_version, case_variant, engine, combo_kind, harness, model,
                   provider, cell_key, completed_at, test_type, loaded, artifacts)
               values {}"#,
            rows.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for (id, c) in chunk {
            let (kind, model, provider) = split(&c.combination);
            q = q
                .bind(id.clone())
                .bind(format!("job_{id}"))
                .bind(c.case.slug.clone())
                .bind(c.case.version.clone())
                .bind(c.case.variant.clone())
                .bind(c.case.engine.clone())
                .bind(kind)
                .bind(c.combination.harness().to_string())
                .bind(model)
                .bind(provider)
                .bind(c.cell_key.0.clone())
                .bind(now);
        }
        q.execute(tx.conn()).await?;
    }
    for chunk in jobs.chunks(500) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| format!("({}, 'running', '[]', 1)", placeholders(i * 11 + 1, 11)))
            .collect();
        let sql = format!(
            r#"insert into jobs (id, case_slug, case_version, case_variant, engine, combo_kind, harness, model, provider,
                   cell_key, created_at, status, jam_models, attempt)
               values {}"#,
            rows.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for (id, c) in chunk {
            let (kind, model, provider) = split(&c.combination);
            q = q
                .bind(id.clone())
                .bind(c.case.slug.clone())
                .bind(c.case.version.clone())
                .bind(c.case.variant.clone())
                .bind(c.case.engine.clone())
                .bind(kind)
                .bind(c.combination.harness().to_string())
                .bind(model)
                .bind(provider)
                .bind(c.cell_key.0.clone())
                .bind(now);
        }
        q.execute(tx.conn()).await?;
    }
    let reviewed: Vec<&(String, &Cell)> = runs.iter().step_by(review_every.max(1)).collect();
    for chunk in reviewed.chunks(1000) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| {
                format!(
                    "(${}, $1, '{{\"code\":\"great\"}}', '\"great\"', $2, $2, ${})",
                    2 * i + 3,
                    2 * i + 4
                )
            })
            .collect();
        let sql = format!(
            "insert into reviews (run_id, account_id, ratings, worst, created_at, updated_at, cell_key) values {}",
            rows.join(", ")
        );
        let mut q = sqlx::query(&sql).bind(reviewer).bind(now);
        for (id, c) in chunk {
            q = q.bind(id.clone()).bind(c.cell_key.0.clone());
        }
        q.execute(tx.conn()).await?;
    }
    Ok(())
}

/// For `belay bench coverage` only: the matrix's grouped counts as raw queries (the runs by
/// cell with the reviewer's reviews: on PostgreSQL one join, on SQLite the runs and the
/// reviewer's reviews counted by cell apart; in-flight jobs by cell and status), nothing else:
/// the same SQL the matrix runs for a plan of more than 500 cells, in a read transaction on
/// the same pool, as the matrix reads them. Returns the cells counted and the job rows read.
pub async fn bench_raw_grouped_counts(tx: &mut Tx, account_id: &AccountId) -> Result<usize, StoreError> {
    let runs = match tx.backend() {
        Backend::Postgres => sqlx::query(&runs_by_cell_sql(""))
            .bind(account_id.as_str())
            .fetch_all(tx.conn())
            .await?
            .len(),
        Backend::Sqlite => {
            let runs = sqlx::query(&runs_counted_sql("")).fetch_all(tx.conn()).await?;
            let reviews = sqlx::query(&reviews_by_cell_sql(""))
                .bind(account_id.as_str())
                .fetch_all(tx.conn())
                .await?;
            // Every reviewed cell is a counted cell: the runs' rows are the cells.
            debug_assert!(reviews.len() <= runs.len());
            runs.len()
        }
    };
    let jobs = sqlx::query(&jobs_by_cell_sql("")).fetch_all(tx.conn()).await?;
    Ok(runs + jobs.len())
}

/// For `belay bench coverage` only: the same grouped counts as the matrix reads them (on
/// SQLite packed into one row each, decision 0033), in a read transaction on the same pool.
/// Returns the cells counted and the job rows.
pub async fn bench_raw_grouped_counts_packed(tx: &mut Tx, account_id: &AccountId) -> Result<usize, StoreError> {
    let runs = run_counts(tx, account_id, None).await?;
    let sql = dialect::grouped_sql(tx.backend(), &jobs_by_cell_sql(""), JOBS_BY_CELL_COLUMNS);
    let q = sqlx::query(&sql);
    let jobs = dialect::grouped::<(String, String, i64)>(q, tx, "jobs by cell").await?;
    Ok(runs.len() + jobs.len())
}

crate::one_step! {
    write bench_seed_cells(cells: &[Cell], runs_per_cell: usize, jobs_per_cell: usize, reviewer: &str, review_every: usize) -> ();
    read bench_raw_grouped_counts(account_id: &AccountId) -> usize;
    read bench_raw_grouped_counts_packed(account_id: &AccountId) -> usize;
}
