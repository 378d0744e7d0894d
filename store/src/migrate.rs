//! Forward-only migrations, embedded in the binary, one folder per backend.

use crate::{Backend, Store, StoreError, now_ms};
use sqlx::Executor;

struct Migration {
    version: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 20261130000000,
        name: "create_foundation",
        sqlite: include_str!("../../migrations/sqlite/20261130000000_create_foundation.sql"),
        postgres: include_str!("../../migrations/postgres/20261130000000_create_foundation.sql"),
    },
    Migration {
        version: 20261130120000,
        name: "create_projects",
        sqlite: include_str!("../../migrations/sqlite/20261130120000_create_projects.sql"),
        postgres: include_str!("../../migrations/postgres/20261130120000_create_projects.sql"),
    },
    Migration {
        version: 20261130130000,
        name: "create_changes",
        sqlite: include_str!("../../migrations/sqlite/20261130130000_create_changes.sql"),
        postgres: include_str!("../../migrations/postgres/20261130130000_create_changes.sql"),
    },
    Migration {
        version: 20261130140000,
        name: "create_sandbox_meter",
        sqlite: include_str!("../../migrations/sqlite/20261130140000_create_sandbox_meter.sql"),
        postgres: include_str!("../../migrations/postgres/20261130140000_create_sandbox_meter.sql"),
    },
    Migration {
        version: 20261130150000,
        name: "create_workspaces",
        sqlite: include_str!("../../migrations/sqlite/20261130150000_create_workspaces.sql"),
        postgres: include_str!("../../migrations/postgres/20261130150000_create_workspaces.sql"),
    },
    Migration {
        version: 20261130160000,
        name: "create_edit_sessions",
        sqlite: include_str!("../../migrations/sqlite/20261130160000_create_edit_sessions.sql"),
        postgres: include_str!("../../migrations/postgres/20261130160000_create_edit_sessions.sql"),
    },
    Migration {
        version: 20261130170000,
        name: "create_swept_forks",
        sqlite: include_str!("../../migrations/sqlite/20261130170000_create_swept_forks.sql"),
        postgres: include_str!("../../migrations/postgres/20261130170000_create_swept_forks.sql"),
    },
];

pub(crate) async fn run(store: &Store) -> Result<usize, StoreError> {
    let pool = store.pool();
    pool.execute(
        "create table if not exists schema_migrations (version bigint primary key, name text not null, applied_at bigint not null)",
    )
    .await?;
    let mut applied = 0;
    for m in MIGRATIONS {
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
