//! All of belay's SQL, behind one repository API that serves SQLite and PostgreSQL alike.
//!
//! Both backends go through sqlx's `Any` driver with one SQL text each: lowercase SQL, `$n`
//! placeholders, times as integer milliseconds, booleans as 0/1 integers and JSON as text, so the
//! same statement runs on both. Where the dialects differ, the difference is named in
//! [`Backend`] and nowhere else.

pub mod access;
pub mod accounts;
pub mod approvals;
pub mod attempts;
pub mod browser_meter;
pub mod candidates;
pub mod catalogue;
pub mod changes;
pub mod coverage;
mod dialect;
pub mod edit_sessions;
pub mod events;
pub mod jobs;
pub mod ladders;
pub mod meter;
pub mod metrics;
mod migrate;
pub mod model_meter;
pub mod plans;
pub mod projects;
pub mod promotion;
pub mod providers;
pub mod receipts;
mod rows;
pub mod runs;
pub mod sandbox_leases;
pub mod selection;
pub mod sweep;
#[cfg(feature = "testing")]
pub mod testing;
mod tx;
mod usage_counters;
pub mod workspaces;

pub use tx::Tx;
pub(crate) use tx::one_step;

use belay_domain::ValidationError;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};
use std::sync::Once;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Which database a [`Store`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::Config(format!(
                "DATABASE_URL must start with sqlite: or postgres://, got {:?}",
                url.split(':').next().unwrap_or_default()
            )))
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Failures of the store. Expected outcomes (a claim that found nothing, a cancel of a finished
/// job) are values in the return types, not errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("stored data is not readable: {0}")]
    Corrupt(String),
    #[error("configuration: {0}")]
    Config(String),
}

impl StoreError {
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        StoreError::NotFound { what, id: id.into() }
    }

    /// Whether an activity should retry the call: the database was unreachable, busy or
    /// answered with an error a retry may not see again. A broken constraint, unreadable data and
    /// the expected refusals (not found, conflict, invalid input) are answers no retry changes.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => {
                self.is_transient()
                    || !matches!(
                        e.kind(),
                        sqlx::error::ErrorKind::UniqueViolation
                            | sqlx::error::ErrorKind::ForeignKeyViolation
                            | sqlx::error::ErrorKind::NotNullViolation
                            | sqlx::error::ErrorKind::CheckViolation
                    )
            }
            StoreError::Database(
                sqlx::Error::ColumnDecode { .. }
                | sqlx::Error::ColumnNotFound(_)
                | sqlx::Error::ColumnIndexOutOfBounds { .. }
                | sqlx::Error::TypeNotFound { .. }
                | sqlx::Error::Decode(_)
                | sqlx::Error::Encode(_)
                | sqlx::Error::RowNotFound
                | sqlx::Error::Configuration(_),
            ) => false,
            StoreError::Database(_) => true,
            _ => false,
        }
    }

    /// Whether retrying the same call later may succeed (the database was unreachable or busy).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Database(
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed
            )
        ) || matches!(self, StoreError::Database(sqlx::Error::Database(e)) if {
            let m = e.message();
            m.contains("database is locked") || m.contains("deadlock") || m.contains("could not serialize")
        })
    }
}

/// How much of a SQLite database file each connection reads through a memory map (SQLite's own
/// ceiling, 2 GiB): the map's pages are the operating system's page cache, shared by every
/// connection, not copied into each one's.
const SQLITE_MMAP_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Each SQLite connection's page cache, in KiB, for what the map does not serve (the write-ahead
/// log's pages, pages being written).
const SQLITE_CACHE_KIB: u64 = 16 * 1024;

/// The repository handle: cheap to clone, shared by every caller.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

static DRIVERS: Once = Once::new();

impl Store {
    /// Connects to `sqlite:…` (the file is created if missing) or `postgres://…`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, 16).await
    }

    pub async fn connect_with(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        DRIVERS.call_once(install_default_drivers);
        let backend = Backend::from_url(url)?;
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' })
            }
            _ => url.to_string(),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(30))
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        conn.execute("pragma journal_mode = wal").await?;
                        conn.execute("pragma synchronous = normal").await?;
                        conn.execute("pragma foreign_keys = on").await?;
                        conn.execute("pragma busy_timeout = 10000").await?;
                        // Reads of the database file through a memory map, and a larger page
                        // cache for the rest (decision 0033): with SQLite's default 2 MiB cache
                        // a connection scanning more than that recycles its pages for every read,
                        // and a grouped read of 100,000 runs ran four times slower.
                        conn.execute(format!("pragma mmap_size = {SQLITE_MMAP_BYTES}").as_str())
                            .await?;
                        conn.execute(format!("pragma cache_size = -{SQLITE_CACHE_KIB}").as_str())
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        Ok(Store { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Applies every migration not yet applied; returns how many ran.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        migrate::run(self).await
    }

    /// A round trip to the database, for readiness checks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("select 1").execute(&self.pool).await?;
        Ok(())
    }

    /// What `belay doctor` reports of the database: its server, whether this connection is
    /// encrypted (PostgreSQL), and whether its migrations are all applied.
    pub async fn describe(&self) -> Result<String, StoreError> {
        let server = dialect::server(self.backend, &self.pool).await?;
        let pending = migrate::pending(self).await?;
        Ok(if pending == 0 {
            format!("{server}, every migration applied")
        } else {
            format!("{server}, {pending} migration(s) not applied (run belay migrate)")
        })
    }

    /// Runs one administrative statement (`create database …`) on this connection's server.
    pub async fn execute_admin(&self, sql: &str) -> Result<(), StoreError> {
        self.pool.execute(sql).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Milliseconds since the epoch, UTC.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A fresh random id body: 32 lowercase hex digits.
pub(crate) fn new_id_body() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
