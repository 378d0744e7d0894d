//! `belay bench verify`: the Candidate composition step as the verification workflow's compose
//! activity runs it (fork `cand-<id>` of canonical, copy the three ChangeSets' objects in from
//! their workspace forks, merge them in order), against `git merge-tree --write-tree` of the same
//! three tips with their objects already in one repository.

use crate::bench_source::{git, grow, median, ms};
use anyhow::{Context, bail};
use belay_git::{GitService, StackedFork, StackedTip};
use std::time::Instant;

const PROJECT: &str = "proj_benchverify";

pub async fn verify(files: usize, runs: usize) -> anyhow::Result<()> {
    let runs = runs.max(1);
    let dir = tempfile::tempdir()?;
    let svc = GitService::new(dir.path().join("git"));
    std::fs::create_dir_all(svc.root())?;
    svc.provision(PROJECT).await?;
    let canonical = svc.repo_path(PROJECT)?;
    let base = grow(&canonical, files)?;

    // Three ChangeSets, each in a workspace fork of its own, as agents publish them.
    let mut tips = Vec::new();
    for t in 0..3usize {
        let fork = format!("ws-bench{t}");
        svc.fork(PROJECT, &fork).await?;
        let changed = vec![
            (
                format!("src/m{}/f{}.rs", t * 10, (t * 5000) % files.max(1)),
                Some(format!("// changed by t{t}\n").into_bytes()),
            ),
            (format!("src/new/t{t}.rs"), Some(b"pub fn new() {}\n".to_vec())),
        ];
        let commit = svc.commit_files(&fork, &base, changed, "change").await?;
        tips.push(StackedTip {
            label: format!("t{t}"),
            fork,
            commit,
        });
    }
    // git's side: one repository holding every tip's objects.
    let scratch = dir.path().join("scratch.git");
    git(
        dir.path(),
        &[
            "clone",
            "--bare",
            "--quiet",
            canonical.to_str().context("path")?,
            scratch.to_str().context("path")?,
        ],
    )?;
    for tip in &tips {
        let from = svc.repo_path(&tip.fork)?;
        git(
            &scratch,
            &["fetch", "--quiet", from.to_str().context("path")?, &tip.commit],
        )?;
    }

    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let fork = format!("cand-bench{r}");
        let started = Instant::now();
        let composed = match svc.fork_stacked(PROJECT, &fork, &tips).await? {
            StackedFork::Ready { start, .. } => start,
            StackedFork::Conflict { label, paths } => bail!("the bench's ChangeSets conflict: {label} {paths:?}"),
        };
        let tree = svc.tree_of(&fork, &composed).await?;
        ours.push(started.elapsed());

        let started = Instant::now();
        let mut current = base.clone();
        for tip in &tips {
            let t = git(&scratch, &["merge-tree", "--write-tree", &current, &tip.commit])?
                .trim()
                .to_owned();
            current = git(
                &scratch,
                &["commit-tree", &t, "-p", &current, "-p", &tip.commit, "-m", "merge"],
            )?
            .trim()
            .to_owned();
        }
        theirs.push(started.elapsed());
        let theirs_tree = git(&scratch, &["rev-parse", &format!("{current}^{{tree}}")])?;
        if theirs_tree.trim() != tree {
            bail!("the compose step and git merge-tree disagree on the composed tree");
        }
    }
    let (ours, theirs) = (median(ours), median(theirs));
    println!(
        "compose 3 ChangeSets on {files} files (fork cand-<id>, copy objects, merge in order): {:.1} ms; \
         git merge-tree --write-tree x3: {:.1} ms; ratio {:.2}",
        ms(ours),
        ms(theirs),
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
    Ok(())
}
