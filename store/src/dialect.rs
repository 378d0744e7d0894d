//! Where SQLite and PostgreSQL differ beyond the migrations: every statement or plan one backend
//! runs and the other does not is chosen here, so the rest of the store writes one SQL.
//!
//! - A read of many small rows is packed into one JSON row on SQLite ([`grouped_sql`],
//!   [`grouped`]; decision 0033).
//! - A transaction that reads and then writes holds SQLite's write lock from its first statement
//!   ([`hold_write_lock`]); PostgreSQL locks the rows it must serialize on
//!   ([`lock_rows`]).
//!
//! - The server a `belay doctor` names ([`server`]).
//!
//! The connection (URL, pool, pragmas) is `Store::connect`'s, the migration folder `migrate`'s,
//! and the two grouped counts whose fastest plan differs by backend stay beside their queries in
//! `coverage` (decision 0035).

use crate::rows::json;
use crate::{Backend, StoreError};
use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::any::AnyRow;

/// `inner`, a read of many small rows, as [`grouped`] runs it: on SQLite with its rows packed
/// into one, a JSON array holding one array of `columns` (in that order) per row of `inner`, in
/// the column `packed`; on PostgreSQL as it is. The order of the rows is not kept.
///
/// On SQLite sqlx runs each connection on a thread of its own and hands every row to the caller
/// through a bounded channel, so a read of 10,000 rows is hundreds of hand-offs between two
/// threads, each a wake-up the scheduler can delay on a busy machine; the packed read is one
/// row. PostgreSQL streams rows over its socket, and its `json_agg` of the same rows measured
/// slower than the rows themselves (decision 0033).
pub(crate) fn grouped_sql(backend: Backend, inner: &str, columns: &[&str]) -> String {
    match backend {
        Backend::Sqlite => {
            let cols = columns.iter().map(|c| format!("t.{c}")).collect::<Vec<_>>().join(", ");
            format!("select json_group_array(json_array({cols})) as packed from ({inner}) as t")
        }
        Backend::Postgres => inner.to_string(),
    }
}

/// A row of a grouped read: a tuple of its columns (integers, text, either of them nullable),
/// decoded from a packed read's JSON on SQLite and column by column, by type, on PostgreSQL.
pub(crate) trait GroupedRow: DeserializeOwned + Sized {
    fn decode(row: &AnyRow) -> Result<Self, sqlx::Error>;
}

macro_rules! grouped_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t),+> GroupedRow for ($($t,)+)
        where
            $($t: DeserializeOwned + for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>),+
        {
            fn decode(row: &AnyRow) -> Result<Self, sqlx::Error> {
                Ok(($(row.try_get::<$t, _>($i)?,)+))
            }
        }
    };
}
grouped_row!(A 0, B 1);
grouped_row!(A 0, B 1, C 2);
grouped_row!(A 0, B 1, C 2, D 3);
grouped_row!(A 0, B 1, C 2, D 3, E 4);

/// Runs `q`, a query over [`grouped_sql`], on `tx`, and decodes each of its rows as `T`; `what`
/// names the read in an error.
pub(crate) async fn grouped<'q, T: GroupedRow>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    tx: &mut crate::Tx,
    what: &str,
) -> Result<Vec<T>, StoreError> {
    match tx.backend() {
        Backend::Sqlite => json(&q.fetch_one(tx.conn()).await?.try_get::<String, _>("packed")?, what),
        Backend::Postgres => {
            let rows = q.fetch_all(tx.conn()).await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                out.push(T::decode(row).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))?);
            }
            Ok(out)
        }
    }
}

/// Makes a transaction that reads and then writes hold SQLite's write lock from its first
/// statement: a deferred transaction that read first could not upgrade once another writer
/// committed, and would fail at once instead of waiting its turn. Nothing on PostgreSQL.
pub(crate) async fn hold_write_lock(backend: Backend, conn: &mut sqlx::AnyConnection) -> Result<(), StoreError> {
    if backend == Backend::Sqlite {
        sqlx::query("update dispatcher_lock set claims = claims where id = 1")
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// Locks the rows `select_for_update` (a `select … for update`) reads, on PostgreSQL; on SQLite
/// the transaction's write lock already serializes it ([`hold_write_lock`]), and the statement
/// is not run.
pub(crate) async fn lock_rows(
    backend: Backend,
    conn: &mut sqlx::AnyConnection,
    select_for_update: &str,
) -> Result<(), StoreError> {
    if backend == Backend::Postgres {
        sqlx::query(select_for_update).fetch_all(conn).await?;
    }
    Ok(())
}

/// The database server as `belay doctor` names it: SQLite's version, or PostgreSQL's and whether
/// this connection is encrypted.
pub(crate) async fn server(backend: Backend, pool: &sqlx::AnyPool) -> Result<String, StoreError> {
    Ok(match backend {
        Backend::Sqlite => {
            let v: String = sqlx::query("select sqlite_version()")
                .fetch_one(pool)
                .await?
                .try_get(0)?;
            format!("SQLite {v}")
        }
        Backend::Postgres => {
            let row = sqlx::query(
                "select current_setting('server_version'), coalesce((select ssl from pg_stat_ssl where pid = pg_backend_pid()), false), coalesce((select version from pg_stat_ssl where pid = pg_backend_pid()), '')",
            )
            .fetch_one(pool)
            .await?;
            let version: String = row.try_get(0)?;
            let ssl: bool = row.try_get(1)?;
            let tls: String = row.try_get(2)?;
            if ssl {
                format!("PostgreSQL {version} over TLS ({tls})")
            } else {
                format!("PostgreSQL {version} in plain text")
            }
        }
    })
}
