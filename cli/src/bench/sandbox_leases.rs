//! `belay bench sandbox-leases`: what making a Sandbox's life a shared fact costs a command. A
//! trivial command in a warm Sandbox with the deployment's lease book in the database (SQLite,
//! and PostgreSQL with --postgres-url: the ensure, the in-flight mark and its end are three
//! serialized writes) against the same with the in-process book.

use super::support::{fresh_store, median, ratio};
use anyhow::bail;
use belay_activities::sandbox_leases::StoreLeases;
use belay_sandbox::lease::{Leases, LocalLeases};
use belay_sandbox::{SandboxConfig, SandboxUser, Sandboxes, WORKSPACE};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The median of `runs` ensure-then-exec of `true` in one warm Sandbox, with `leases`.
async fn warm_exec(leases: Arc<dyn Leases>, runs: usize, tag: &str, name: &str) -> anyhow::Result<Duration> {
    let config = SandboxConfig {
        network: tag.to_owned(),
        extra_labels: [("belay.bench".to_owned(), tag.to_owned())].into(),
        deployment: Some(format!("{tag}-{name}")),
        ..crate::settings::from_environment::<crate::settings::SandboxSettings>().config()?
    };
    let sandboxes = Sandboxes::connect_with_leases(config, leases).await?;
    let project = format!("proj_bench-{name}-{}", std::process::id());
    let result = async {
        sandboxes.ensure(&project).await?;
        let mut times = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            sandboxes.ensure(&project).await?;
            let out = sandboxes
                .exec(
                    &project,
                    WORKSPACE,
                    &["true".to_owned()],
                    SandboxUser::Root,
                    Duration::from_secs(10),
                )
                .await?;
            times.push(started.elapsed());
            if !out.success() {
                bail!("`true` failed in the Sandbox: {out:?}");
            }
        }
        Ok(median(times))
    }
    .await;
    let _ = sandboxes.remove(&project).await;
    result
}

pub(super) async fn sandbox_leases(runs: usize, postgres_url: Option<String>) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let tag = format!("belay-bench-leases-{}", std::process::id());
    let dir = tempfile::tempdir()?;
    let result = async {
        let local = warm_exec(Arc::new(LocalLeases::default()), runs, &tag, "local").await?;
        let sqlite = fresh_store(dir.path(), None, "leases").await?;
        let shared = warm_exec(Arc::new(StoreLeases::new(sqlite)), runs, &tag, "sqlite").await?;
        println!(
            "warm Sandbox ensure + exec of `true` ({runs} runs, median): lease book in SQLite {:.1} ms; in-process {:.1} ms; ratio {:.2}",
            shared.as_secs_f64() * 1000.0,
            local.as_secs_f64() * 1000.0,
            ratio(shared, local)
        );
        match &postgres_url {
            Some(url) => {
                let pg = fresh_store(dir.path(), Some(url), "leases").await?;
                let shared = warm_exec(Arc::new(StoreLeases::new(pg)), runs, &tag, "postgres").await?;
                println!(
                    "lease book in PostgreSQL {:.1} ms; in-process {:.1} ms; ratio {:.2}",
                    shared.as_secs_f64() * 1000.0,
                    local.as_secs_f64() * 1000.0,
                    ratio(shared, local)
                );
            }
            None => println!("postgres: skipped (no --postgres-url)"),
        }
        Ok(())
    }
    .await;
    let _ = Command::new("docker").args(["network", "rm", &tag]).output();
    result
}
