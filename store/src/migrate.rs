//! Forward-only migrations, applied in version order: the files and their list are
//! `belay-migrations`'; this module records which the database has applied.

use crate::{Backend, Store, StoreError, now_ms};
use sqlx::Executor;

use belay_migrations::MIGRATIONS;

pub(crate) async fn run(store: &Store) -> Result<usize, StoreError> {
    run_before(store, i64::MAX).await
}

/// How many of the embedded migrations the database has not applied.
pub(crate) async fn pending(store: &Store) -> Result<usize, StoreError> {
    let exists: Option<(i64,)> = match store.backend() {
        Backend::Sqlite => {
            sqlx::query_as("select 1 from sqlite_master where type = 'table' and name = 'schema_migrations'")
                .fetch_optional(store.pool())
                .await?
        }
        Backend::Postgres => {
            sqlx::query_as("select 1::bigint where to_regclass('schema_migrations') is not null")
                .fetch_optional(store.pool())
                .await?
        }
    };
    if exists.is_none() {
        return Ok(MIGRATIONS.len());
    }
    let applied: Vec<(i64,)> = sqlx::query_as("select version from schema_migrations")
        .fetch_all(store.pool())
        .await?;
    Ok(MIGRATIONS
        .iter()
        .filter(|m| !applied.iter().any(|(v,)| *v == m.version))
        .count())
}

/// Applies every migration not yet applied whose version is below `before`.
pub(crate) async fn run_before(store: &Store, before: i64) -> Result<usize, StoreError> {
    run_where(store, |version| version < before).await
}

/// Applies, in order, every migration not yet applied whose version `take` accepts.
pub(crate) async fn run_where(store: &Store, take: impl Fn(i64) -> bool) -> Result<usize, StoreError> {
    let pool = store.pool();
    pool.execute(
        "create table if not exists schema_migrations (version bigint primary key, name text not null, applied_at bigint not null)",
    )
    .await?;
    let mut applied = 0;
    for m in MIGRATIONS.iter().filter(|m| take(m.version)) {
        let mut tx = pool.begin().await?;
        if store.backend() == Backend::Postgres {
            // Two processes migrating at once take turns instead of failing halfway.
            tx.execute("lock table schema_migrations in exclusive mode").await?;
        }
        let done: Option<(i64,)> = sqlx::query_as("select version from schema_migrations where version = $1")
            .bind(m.version)
            .fetch_optional(&mut *tx)
            .await?;
        if done.is_some() {
            tx.rollback().await?;
            continue;
        }
        let sql = match store.backend() {
            Backend::Sqlite => m.sqlite,
            Backend::Postgres => m.postgres,
        };
        tx.execute(sqlx::raw_sql(sql)).await?;
        sqlx::query("insert into schema_migrations (version, name, applied_at) values ($1, $2, $3)")
            .bind(m.version)
            .bind(m.name)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracing::info!(
            migration.version = m.version,
            migration.name = m.name,
            "applied migration"
        );
        applied += 1;
    }
    Ok(applied)
}
