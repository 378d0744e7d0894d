//! Fresh, migrated databases for tests: a SQLite file in a temporary directory, or a new
//! database in the PostgreSQL server named by `BELAY_TEST_POSTGRES_URL` (which
//! `scripts/test.sh` starts). Every store test runs against both.

use crate::{Backend, Store};

/// A migrated store that lives as long as this value (SQLite) or until the test server is reset
/// (PostgreSQL databases are named `belay_t_<hex>`; `scripts/test.sh` drops them).
pub struct TestDb {
    pub store: Store,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

/// The PostgreSQL server tests use. Its absence is an error, not a skip: a store suite that ran
/// on one backend only would pass while proving half of what it claims.
pub fn postgres_admin_url() -> String {
    belay_testkit::postgres_admin_url()
}

/// A test module `$name` running `$body` (an async closure over a [`Store`]) on a fresh SQLite
/// database and on a fresh PostgreSQL one: `sqlite()` and `postgres()`, each on a runtime of two
/// worker threads, or of `threads = N` for a test of concurrent writers.
#[macro_export]
macro_rules! on_both {
    ($name:ident, $body:expr) => {
        $crate::on_both!($name, threads = 2, $body);
    };
    ($name:ident, threads = $threads:literal, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
            async fn sqlite() {
                let db = $crate::testing::fresh($crate::Backend::Sqlite).await;
                ($body)(db.store.clone()).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
            async fn postgres() {
                let db = $crate::testing::fresh($crate::Backend::Postgres).await;
                ($body)(db.store.clone()).await;
            }
        }
    };
}

pub async fn fresh(backend: Backend) -> TestDb {
    fresh_where(backend, |_| true).await
}

/// A fresh database with every migration but `skipped` applied, for a test of what that
/// migration does to the rows written before it: the store's code of today writes them (the
/// later migrations give it the columns it writes), and [`Store::migrate`] then applies the one
/// skipped, as it would on a database that had missed it.
pub async fn fresh_without(backend: Backend, skipped: i64) -> TestDb {
    fresh_where(backend, move |version| version != skipped).await
}

/// A fresh database migrated only up to (not including) migration `before`, for a test that
/// writes the rows before it by hand. [`Store::migrate`] applies the rest.
pub async fn fresh_before(backend: Backend, before: i64) -> TestDb {
    fresh_where(backend, move |version| version < before).await
}

async fn fresh_where(backend: Backend, take: impl Fn(i64) -> bool) -> TestDb {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!("sqlite:{}", dir.path().join("belay.db").display());
            let store = Store::connect(&url).await.expect("connect sqlite");
            crate::migrate::run_where(&store, &take).await.expect("migrate sqlite");
            TestDb {
                store,
                url,
                _dir: Some(dir),
            }
        }
        Backend::Postgres => {
            let admin_url = postgres_admin_url();
            let name = format!("belay_t_{}", crate::new_id_body());
            let admin = Store::connect_with(&admin_url, 1)
                .await
                .expect("connect postgres admin");
            sqlx::query(&format!("create database {name}"))
                .execute(admin.pool())
                .await
                .expect("create database");
            admin.close().await;
            let base = admin_url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin_url);
            let url = format!("{base}/{name}");
            let store = Store::connect(&url).await.expect("connect postgres");
            crate::migrate::run_where(&store, &take)
                .await
                .expect("migrate postgres");
            TestDb { store, url, _dir: None }
        }
    }
}

impl Store {
    /// For test fixtures that push a commit straight into a project's canonical repository (a
    /// sample app instead of a promoted Change): points the project's canonical commit and tree
    /// at it, at the same generation.
    pub async fn seed_canonical(&self, project_id: &str, commit: &str, tree: &str) -> Result<(), crate::StoreError> {
        sqlx::query("update projects set canonical_commit = $2, canonical_tree = $3 where id = $1")
            .bind(project_id)
            .bind(commit)
            .bind(tree)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// For tests of staleness: moves a project's canonical generation on, as a promotion would.
    pub async fn bump_generation(&self, project_id: &str) -> Result<(), crate::StoreError> {
        sqlx::query("update projects set generation = generation + 1 where id = $1")
            .bind(project_id)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

impl Store {
    /// For tests of the meter cap: charges the project's whole monthly Sandbox allowance for the
    /// month of `now_secs`.
    pub async fn exhaust_sandbox_meter(&self, project_id: &str, now_secs: i64) -> Result<(), crate::StoreError> {
        let month = belay_domain::meter::month_of(now_secs);
        sqlx::query(
            r#"insert into sandbox_usage (project_id, month, charged_seconds) values ($1, $2, $3)
               on conflict (project_id, month) do update set charged_seconds = $3"#,
        )
        .bind(project_id)
        .bind(&month)
        .bind(belay_domain::meter::SANDBOX_MONTHLY_SECONDS as i64)
        .execute(self.pool())
        .await?;
        Ok(())
    }
}
