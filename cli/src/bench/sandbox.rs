//! `belay bench sandbox`: a trivial command in a warm Sandbox against the floor of the same
//! command in the same container (a bare `docker exec`) and against `docker run --rm`, and the
//! cold start of a Sandbox.

use super::support::{median, ms, ratio};
use anyhow::bail;
use belay_sandbox::{SandboxConfig, SandboxUser, Sandboxes, WORKSPACE, container_name};
use std::process::Command;
use std::time::{Duration, Instant};

/// A trivial command in a warm project Sandbox against a bare `docker exec` of it in the same
/// container (the floor: what any exec costs), the two interleaved in one loop, and against
/// `docker run --rm` of the same command; and the cold start of a Sandbox. Uses its own network
/// and labels, removed at the end.
pub(super) async fn sandbox(runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let tag = format!("belay-bench-{}", std::process::id());
    let config = SandboxConfig {
        network: tag.clone(),
        extra_labels: [("belay.bench".to_owned(), tag.clone())].into(),
        ..crate::settings::from_environment::<crate::settings::SandboxSettings>().config()?
    };
    let image = config.image.clone();
    let sandboxes = Sandboxes::connect(config).await?;
    let project = format!("proj_bench-{}", std::process::id());
    let container = container_name(&project)?;
    let result = async {
        let started = Instant::now();
        sandboxes.ensure(&project).await?;
        let cold = started.elapsed();
        let (mut warm, mut bare) = (Vec::new(), Vec::new());
        // One of each first: the first exec of a container pays for what the next ones reuse.
        for i in 0..=runs {
            let started = Instant::now();
            let out = sandboxes
                .exec(&project, WORKSPACE, &["true".to_owned()], SandboxUser::Root, Duration::from_secs(10))
                .await?;
            let took = started.elapsed();
            if !out.success() {
                bail!("`true` failed in the Sandbox: {out:?}");
            }
            let started = Instant::now();
            let status = tokio::process::Command::new("docker")
                .args(["exec", "-w", WORKSPACE, &container, "true"])
                .status()
                .await?;
            if !status.success() {
                bail!("docker exec failed");
            }
            if i > 0 {
                warm.push(took);
                bare.push(started.elapsed());
            }
        }
        let (warm, bare) = (median(warm), median(bare));
        println!(
            "warm Sandbox exec of `true`: {:.0} ms; bare docker exec of `true` in the same container: {:.0} ms; ratio {:.2}",
            ms(warm),
            ms(bare),
            ratio(warm, bare),
        );
        let mut run = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            let status = tokio::process::Command::new("docker")
                .args(["run", "--rm", "--label", &format!("belay.bench={tag}"), "--network", "none", &image, "true"])
                .status()
                .await?;
            run.push(started.elapsed());
            if !status.success() {
                bail!("docker run failed");
            }
        }
        let run = median(run);
        println!(
            "warm Sandbox exec of `true`: {:.0} ms; docker run --rm {image} true: {:.0} ms; ratio {:.2}; cold Sandbox start {:.2} s",
            ms(warm),
            ms(run),
            ratio(warm, run),
            cold.as_secs_f64()
        );
        Ok(())
    }
    .await;
    let _ = sandboxes.remove(&project).await;
    let _ = Command::new("docker").args(["network", "rm", &tag]).output();
    result
}
