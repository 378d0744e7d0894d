//! Runs and reviews. One review per (run, account), replaceable; a run's displayed rating is the
//! worst domain across every reviewer (its displayed category, for a game-jam run, the worst
//! category), computed on read and never used for a decision.

use crate::Tx;
use crate::rows::{self, json, to_json};
use crate::{StoreError, events, now_ms};
use belay_domain::ids::{AccountId, JobId, RunId};
use belay_domain::review::{
    JamCategory, OfferedDomains, Rating, ReviewInput, displayed_category, displayed_rating, domains_to_remember,
    offered_domains,
};
use belay_domain::run::{Artifact, Review, Run};
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::BTreeMap;

const RUN_COLUMNS: &str = "id, job_id, case_slug, case_version, case_variant, engine, combo_kind, harness, model, provider, \
     gg_config_id, gg_config_name, gg_bindings, cell_key, test_type, loaded, artifacts, completed_at, \
     failure_class, failure";

/// Which runs a listing returns.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub cell_key: Option<String>,
    pub job_id: Option<String>,
    pub limit: i64,
}

fn review_row(r: &AnyRow) -> Result<Review, StoreError> {
    let ratings: Option<String> = r.try_get("ratings")?;
    let category: Option<String> = r.try_get("category")?;
    Ok(Review {
        run_id: r.try_get::<String, _>("run_id")?.into(),
        account_id: r.try_get::<String, _>("account_id")?.into(),
        ratings: ratings
            .as_deref()
            .map(|t| json::<BTreeMap<String, Rating>>(t, "ratings"))
            .transpose()?,
        category: category
            .as_deref()
            .map(|t| json::<JamCategory>(t, "category"))
            .transpose()?,
        note: r.try_get("note")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

pub(crate) async fn run_from_row(tx: &mut Tx, r: &AnyRow) -> Result<Run, StoreError> {
    let id = RunId(r.try_get("id")?);
    let reviews = reviews_of(tx, &id).await?;
    let rating = displayed_rating(reviews.iter().filter_map(|rv| rv.ratings.as_ref()));
    let category = displayed_category(reviews.iter().filter_map(|rv| rv.category));
    Ok(Run {
        job_id: r.try_get::<String, _>("job_id")?.into(),
        case: rows::pin(r)?,
        combination: rows::combination(r)?,
        gg_config_name: r.try_get("gg_config_name")?,
        cell_key: r.try_get("cell_key")?,
        test_type: rows::test_type(&r.try_get::<String, _>("test_type")?)?,
        loaded: r.try_get::<i64, _>("loaded")? != 0,
        artifacts: json::<Vec<Artifact>>(&r.try_get::<String, _>("artifacts")?, "artifacts")?,
        completed_at: r.try_get("completed_at")?,
        rating,
        category,
        review_count: reviews.len() as i64,
        task_failure: match r.try_get::<Option<String>, _>("failure_class")? {
            Some(_) => Some(r.try_get::<Option<String>, _>("failure")?.unwrap_or_default()),
            None => None,
        },
        id,
    })
}

pub async fn get_run(tx: &mut Tx, id: &RunId) -> Result<Option<Run>, StoreError> {
    let sql = format!("select {RUN_COLUMNS} from runs where id = $1");
    match sqlx::query(&sql).bind(id.as_str()).fetch_optional(tx.conn()).await? {
        Some(r) => Ok(Some(run_from_row(tx, &r).await?)),
        None => Ok(None),
    }
}

pub async fn run_of_job(tx: &mut Tx, job_id: &JobId) -> Result<Option<Run>, StoreError> {
    let sql = format!("select {RUN_COLUMNS} from runs where job_id = $1");
    match sqlx::query(&sql)
        .bind(job_id.as_str())
        .fetch_optional(tx.conn())
        .await?
    {
        Some(r) => Ok(Some(run_from_row(tx, &r).await?)),
        None => Ok(None),
    }
}

/// Runs, newest first.
pub async fn list_runs(tx: &mut Tx, filter: &RunFilter) -> Result<Vec<Run>, StoreError> {
    let mut sql = format!("select {RUN_COLUMNS} from runs where 1 = 1");
    let mut n = 1;
    if filter.cell_key.is_some() {
        n += 1;
        sql.push_str(&format!(" and cell_key = ${n}"));
    }
    if filter.job_id.is_some() {
        n += 1;
        sql.push_str(&format!(" and job_id = ${n}"));
    }
    sql.push_str(" order by completed_at desc, id desc limit $1");
    let mut q = sqlx::query(&sql).bind(filter.limit.clamp(1, 1000));
    if let Some(c) = &filter.cell_key {
        q = q.bind(c);
    }
    if let Some(j) = &filter.job_id {
        q = q.bind(j);
    }
    let rows = q.fetch_all(tx.conn()).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        out.push(run_from_row(tx, r).await?);
    }
    Ok(out)
}

/// Every review of a run.
pub async fn reviews_of(tx: &mut Tx, run_id: &RunId) -> Result<Vec<Review>, StoreError> {
    let rows = sqlx::query(
        "select run_id, account_id, ratings, category, note, created_at, updated_at from reviews where run_id = $1 order by created_at, account_id",
    )
    .bind(run_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(review_row).collect()
}

/// Submits (or replaces) `account_id`'s review of a run. The input must already have been
/// checked against the run's test type.
pub async fn submit_review(
    tx: &mut Tx,
    run_id: &RunId,
    account_id: &AccountId,
    input: &ReviewInput,
) -> Result<Review, StoreError> {
    let run = get_run(tx, run_id)
        .await?
        .ok_or_else(|| StoreError::not_found("run", run_id.as_str()))?;
    input.validate_for(run.test_type)?;
    let now = now_ms();
    let worst = input.ratings.as_ref().and_then(belay_domain::review::worst_domain);
    sqlx::query(
        r#"insert into reviews (run_id, account_id, ratings, category, worst, note, created_at, updated_at, cell_key)
           values ($1, $2, $3, $4, $5, $6, $7, $7, $8)
           on conflict (run_id, account_id) do update set ratings = excluded.ratings, category = excluded.category,
               worst = excluded.worst, note = excluded.note, updated_at = excluded.updated_at"#,
    )
    .bind(run_id.as_str())
    .bind(account_id.as_str())
    .bind(input.ratings.as_ref().map(to_json))
    .bind(input.category.as_ref().map(to_json))
    .bind(worst.map(|w| to_json(&w)))
    .bind(&input.note)
    .bind(now)
    .bind(&run.cell_key)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        run_id,
        "review.submitted",
        &serde_json::json!({ "accountId": account_id }),
    )
    .await?;
    let declared = declared_domains(tx, &run).await?;
    if let Some(domains) = domains_to_remember(declared.as_deref(), input) {
        sqlx::query(
            r#"insert into account_review_domains (account_id, domains, updated_at) values ($1, $2, $3)
               on conflict (account_id) do update set domains = excluded.domains, updated_at = excluded.updated_at"#,
        )
        .bind(account_id.as_str())
        .bind(to_json(&domains))
        .bind(now)
        .execute(tx.conn())
        .await?;
    }
    let row = sqlx::query(
        "select run_id, account_id, ratings, category, note, created_at, updated_at from reviews where run_id = $1 and account_id = $2",
    )
    .bind(run_id.as_str())
    .bind(account_id.as_str())
    .fetch_one(tx.conn())
    .await?;
    let review = review_row(&row)?;
    Ok(review)
}

/// The review domains the run's case version declares, if it declares them (and is ingested).
async fn declared_domains(tx: &mut Tx, run: &Run) -> Result<Option<Vec<String>>, StoreError> {
    let declared: Option<Option<String>> =
        sqlx::query_scalar("select review_domains from test_case_versions where slug = $1 and version = $2")
            .bind(run.case.slug.as_str())
            .bind(run.case.version.as_str())
            .fetch_optional(tx.conn())
            .await?;
    declared
        .flatten()
        .as_deref()
        .map(|t| json::<Vec<String>>(t, "review_domains"))
        .transpose()
}

/// The domains `account_id`'s review of a run is offered: its version's declared domains, else the
/// account's remembered ones, else `overall` ([`offered_domains`]). None when there is no such run.
pub async fn offered_review_domains(
    tx: &mut Tx,
    run_id: &RunId,
    account_id: &AccountId,
) -> Result<Option<OfferedDomains>, StoreError> {
    let Some(run) = get_run(tx, run_id).await? else {
        return Ok(None);
    };
    let declared = declared_domains(tx, &run).await?;
    let remembered: Option<String> =
        sqlx::query_scalar("select domains from account_review_domains where account_id = $1")
            .bind(account_id.as_str())
            .fetch_optional(tx.conn())
            .await?;
    let remembered = remembered
        .as_deref()
        .map(|t| json::<Vec<String>>(t, "domains"))
        .transpose()?;
    Ok(Some(offered_domains(
        run.test_type,
        declared.as_deref(),
        remembered.as_deref(),
    )))
}

crate::one_step! {
    read offered_review_domains(run_id: &RunId, account_id: &AccountId) -> Option<OfferedDomains>;
    read get_run(id: &RunId) -> Option<Run>;
    read run_of_job(job_id: &JobId) -> Option<Run>;
    read list_runs(filter: &RunFilter) -> Vec<Run>;
    read reviews_of(run_id: &RunId) -> Vec<Review>;
    write submit_review(run_id: &RunId, account_id: &AccountId, input: &ReviewInput) -> Review;
}
