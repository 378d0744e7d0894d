//! `belay bench selection`:
//! 1. selection among 3 gated siblings (the claim on the anchor, the ranking and the one apply
//!    transaction, as the selection activities run them), median and p95, against a bare
//!    one-activity workflow on a Temporal dev server of its own;
//! 2. the acceptance check's input assembly for a 24-file Candidate (the patch, then the composed
//!    files in `composedFileOrder` read from the fork, under the cap) against reading those files
//!    from the fork directly (`git cat-file --batch`).

use super::support::{bare_workflow_ms, fresh_store, git, grow, low_risk_change, published_task, stats, with_pools};
use crate::objects::dir_store;
use anyhow::{Context, bail, ensure};
use belay_domain::candidate::CandidateStatus;
use belay_domain::conflict::{ConflictInput, ConflictSide, ConflictStatus};
use belay_domain::ids::{AccountId, CandidateId, ProjectId};
use belay_domain::project::{Project, ProjectInput};
use belay_domain::selection_steps::SelectionStep;
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use belay_store::Store;
use belay_worker::Pool;
use belay_workflows::selection::AcceptanceSourceRequest;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const C1: &str = "1111111111111111111111111111111111111111";

/// A project of `account` whose canonical `main` is at `commit` (tree `tree`).
async fn ready_project(store: &Store, account: &str, name: &str, commit: &str, tree: &str) -> anyhow::Result<Project> {
    let p = store
        .create_project(
            &AccountId::from(account),
            &ProjectInput {
                name: name.into(),
                workspace_policy: None,
            },
        )
        .await?;
    store
        .mark_project_provisioned(&ProjectId::from(p.id.as_str()), commit, tree)
        .await?;
    Ok(p)
}

/// A Change with a `fork_required` conflict and its round of three gated siblings.
async fn gated_round(store: &Store, account: &str, i: usize) -> anyhow::Result<Vec<String>> {
    let p = ready_project(store, account, &format!("p{i}"), C1, C1).await?;
    let c = low_risk_change(store, account, p.id.as_str()).await?;
    let mut sides = Vec::new();
    let mut paths = BTreeMap::new();
    for key in ["a", "b"] {
        let (t, cs) = published_task(store, account, c.id.as_str(), key, C1).await?;
        let path = format!("src/{key}.ts");
        paths.insert(cs.id.to_string(), vec![path.clone()]);
        sides.push(ConflictSide {
            task_id: t.id.clone(),
            change_set_ids: vec![cs.id.clone()],
            paths: vec![path],
            contract_lines: vec![],
        });
    }
    store
        .record_conflict(
            &AccountId::from(account),
            &c.id,
            &ConflictInput {
                status: ConflictStatus::ForkRequired,
                sides,
                summary: None,
            },
            &paths,
        )
        .await?;
    let round = store.start_verification_round(&AccountId::from(account), &c.id).await?;
    ensure!(round.len() == 3, "the round has {} Candidates", round.len());
    for k in &round {
        store
            .set_candidate_status(
                &CandidateId::from(k.id.as_str()),
                &[CandidateStatus::Composing],
                CandidateStatus::Verified,
                None,
            )
            .await?;
    }
    Ok(round.iter().map(|k| k.id.to_string()).collect())
}

pub(super) async fn selection(samples: usize) -> anyhow::Result<()> {
    let samples = samples.max(3);
    let dir = tempfile::tempdir()?;
    let store = fresh_store(dir.path(), None, "selection").await?;
    let result = with_pools(dir.path(), &store, &[Pool::Workflows, Pool::Db], async |client| {
        selection_on(client, &store, samples).await
    })
    .await;
    store.close().await;
    result?;
    assembly(dir.path(), samples).await
}

async fn selection_on(client: &temporalio_client::Client, store: &Store, samples: usize) -> anyhow::Result<()> {
    let (account, _) = store.create_account("bench").await?;
    let (mut sel, mut floor) = (Vec::new(), Vec::new());
    for i in 0..samples + 3 {
        let ids = gated_round(store, &account.id, i).await?;
        let claimant = format!("verify-{}", ids[2]);
        let t = Instant::now();
        match store
            .claim_selection(&CandidateId::from(ids[2].as_str()), &claimant)
            .await?
        {
            SelectionStep::Claimed { .. } => {}
            other => bail!("the claim answered {other:?}"),
        }
        store
            .apply_selection(&CandidateId::from(ids[2].as_str()), &claimant, None)
            .await?;
        let a = t.elapsed().as_secs_f64() * 1000.0;
        let b = bare_workflow_ms(client, format!("probe-sel-{}-{i}", std::process::id())).await?;
        if i >= 3 {
            sel.push(a);
            floor.push(b);
        }
    }
    let n = sel.len();
    let (s50, s95) = stats(sel);
    let (f50, f95) = stats(floor);
    println!(
        "selection among 3 gated siblings (claim, rank, apply; sqlite): median {s50:.1} ms, p95 {s95:.1} ms; \
         bare one-activity workflow median {f50:.1} ms, p95 {f95:.1} ms; ratio median {:.2}, p95 {:.2} ({n} samples)",
        s50 / f50,
        s95 / f95
    );
    Ok(())
}

/// The input assembly of a Candidate changing 24 files of a 2,000-file app.
async fn assembly(dir: &Path, samples: usize) -> anyhow::Result<()> {
    const PROJECT: &str = "proj_benchselection";
    const CANDIDATE: &str = "cand_0123456789abcdef0123456789abcdef";
    let svc = GitService::new(dir.join("git-assembly"));
    std::fs::create_dir_all(svc.root())?;
    svc.provision(PROJECT).await?;
    let canonical = svc.repo_path(PROJECT)?;
    let base = grow(&canonical, 2000)?;
    let fork = belay_domain::repo::candidate_fork(CANDIDATE)?;
    svc.fork(PROJECT, &fork).await?;
    let files: Vec<(String, Option<Vec<u8>>)> = (0..24)
        .map(|i| {
            // 20 lines each: the patch and the 24 files fit under the 60,000-character cap (at
            // 80 lines the patch alone passes it, is cut, and no file is given).
            let body: String = (0..20)
                .map(|l| format!("export const v{i}_{l} = {l}; // line {l}\n"))
                .collect();
            (format!("src/feature/f{i}.ts"), Some(body.into_bytes()))
        })
        .collect();
    let paths: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    let composed = svc.commit_files(&fork, &base, files, "24 files").await?;
    let sources = SourceObjects::new(dir_store(&dir.join("objects-assembly"))?);
    let diff = svc.unified_diff(&fork, &base, &composed).await?;
    sources.put_candidate_patch(PROJECT, CANDIDATE, &diff).await?;
    let req = AcceptanceSourceRequest {
        project_id: PROJECT.to_string().into(),
        candidate_id: CANDIDATE.to_string().into(),
        base: base.clone(),
        composed: composed.clone(),
    };
    let fork_path = svc.repo_path(&fork)?;
    let (mut ours, mut direct, mut index) = (Vec::new(), Vec::new(), Vec::new());
    let mut chars = 0;
    for i in 0..samples + 2 {
        let t = Instant::now();
        let input = belay_activities::selection::acceptance_source(&svc, &sources, &req)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let a = t.elapsed().as_secs_f64() * 1000.0;
        ensure!(
            input.parts.len() == 25 && input.skipped.is_empty() && input.parts.iter().all(|p| !p.truncated),
            "the input has {} parts ({} characters, truncated: {:?}), skipped {:?}; not the patch and 24 whole files",
            input.parts.len(),
            input.chars(),
            input
                .parts
                .iter()
                .filter(|p| p.truncated)
                .map(|p| &p.path)
                .collect::<Vec<_>>(),
            input.skipped
        );
        chars = input.chars();
        // The largest piece of the assembly: the composed tree's file index.
        let t = Instant::now();
        svc.file_index(&fork, &composed).await?;
        let ix = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        let mut child = Command::new("git")
            .arg("-C")
            .arg(&fork_path)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut stdin = child.stdin.take().context("stdin")?;
        for p in &paths {
            writeln!(stdin, "{composed}:{p}")?;
        }
        drop(stdin);
        let out = child.wait_with_output()?;
        ensure!(out.status.success(), "git cat-file failed");
        let b = t.elapsed().as_secs_f64() * 1000.0;
        if i >= 2 {
            ours.push(a);
            direct.push(b);
            index.push(ix);
        }
    }
    let _ = git(&fork_path, &["rev-parse", &composed])?;
    let n = ours.len();
    let (o50, o95) = stats(ours);
    let (d50, d95) = stats(direct);
    let (i50, _) = stats(index);
    println!(
        "acceptance input assembly for a 24-file Candidate of a 2,000-file tree (patch + composedFileOrder from the fork): \
         median {o50:.1} ms (the file index of the composed tree alone {i50:.1} ms), p95 {o95:.1} ms; reading the 24 files from the fork directly (git cat-file --batch): median {d50:.1} ms, \
         p95 {d95:.1} ms; ratio median {:.2}, p95 {:.2} ({n} samples; the input {chars} characters in 25 parts)",
        o50 / d50,
        o95 / d95
    );
    Ok(())
}
