//! `belay bench selection`:
//! 1. selection among 3 gated siblings (the claim on the anchor, the ranking and the one apply
//!    transaction, as the selection activities run them), median and p95, against a bare
//!    one-activity workflow on a Temporal dev server of its own;
//! 2. the acceptance check's input assembly for a 24-file Candidate (the patch, then the composed
//!    files in `composedFileOrder` read from the fork, under the cap) against reading those files
//!    from the fork directly (`git cat-file --batch`).

use crate::bench_source::{git, grow};
use crate::serve::object_store_at;
use anyhow::{Context, bail, ensure};
use belay_domain::candidate::CandidateStatus;
use belay_domain::change::{ChangeInput, ChangeSetInput, RiskTier, TaskInput, TaskKind};
use belay_domain::conflict::{ConflictInput, ConflictSide, ConflictStatus};
use belay_domain::project::ProjectInput;
use belay_domain::selection_steps::SelectionStep;
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use belay_store::Store;
use belay_worker::{Pool, WorkerDeps};
use belay_workflows::selection::AcceptanceSourceRequest;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let at = |p: f64| v[(((v.len() - 1) as f64) * p).round() as usize];
    (at(0.5), at(0.95))
}

const C1: &str = "1111111111111111111111111111111111111111";

/// A Change with a `fork_required` conflict and its round of three gated siblings.
async fn gated_round(store: &Store, account: &str, i: usize) -> anyhow::Result<Vec<String>> {
    let p = store
        .create_project(
            account,
            &ProjectInput {
                name: format!("p{i}"),
                workspace_policy: None,
            },
        )
        .await?;
    store.mark_project_provisioned(p.id.as_str(), C1, C1).await?;
    let c = store
        .create_change(
            account,
            p.id.as_str(),
            &ChangeInput {
                goal: "g".into(),
                acceptance_criteria: vec![],
                invariants: vec![],
                risk_tier: Some(RiskTier::Low),
            },
        )
        .await?;
    let mut sides = Vec::new();
    let mut paths = BTreeMap::new();
    for key in ["a", "b"] {
        let t = store
            .add_task(
                account,
                c.id.as_str(),
                &TaskInput {
                    key: key.into(),
                    kind: TaskKind::Implement,
                    title: key.into(),
                    semantic_resources: vec![],
                    dependencies: vec![],
                },
            )
            .await?;
        let run = store.start_task_run(account, t.id.as_str()).await?;
        let cs = store
            .record_change_set(
                account,
                run.id.as_str(),
                &ChangeSetInput {
                    commit: C1.into(),
                    contract_changes: vec![],
                    data_changes: vec![],
                },
            )
            .await?;
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
            account,
            c.id.as_str(),
            &ConflictInput {
                status: ConflictStatus::ForkRequired,
                sides,
                summary: None,
            },
            &paths,
        )
        .await?;
    let round = store.start_verification_round(account, c.id.as_str()).await?;
    ensure!(round.len() == 3, "the round has {} Candidates", round.len());
    for k in &round {
        store
            .set_candidate_status(
                k.id.as_str(),
                &[CandidateStatus::Composing],
                CandidateStatus::Verified,
                None,
            )
            .await?;
    }
    Ok(round.iter().map(|k| k.id.to_string()).collect())
}

pub async fn selection(samples: usize) -> anyhow::Result<()> {
    let samples = samples.max(3);
    let dir = tempfile::tempdir()?;
    let bin = crate::temporal::find_or_install(&dir.path().join("tools")).await?;
    let port = crate::bench::free_port()?;
    let server = crate::temporal::DevServer::start(&bin, dir.path(), port, crate::bench::free_port()?).await?;
    let address = format!("127.0.0.1:{port}");
    let result = selection_on(dir.path(), &address, samples).await;
    server.stop().await;
    result?;
    assembly(dir.path(), samples).await
}

async fn selection_on(dir: &Path, address: &str, samples: usize) -> anyhow::Result<()> {
    let store = crate::bench::fresh_store(dir, None, "selection").await?;
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let (account, _) = store.create_account("bench").await?;
    let deps = WorkerDeps {
        client: client.clone(),
        store: store.clone(),
        objects: object_store_at(&dir.join("objects"))?,
        work_root: dir.join("work"),
        dispatcher: Default::default(),
        sandbox: None,
        git_root: dir.join("git").join("belay"),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut worker_stop = stop_rx.clone();
    let measure = async {
        let r = async {
            let (mut sel, mut floor) = (Vec::new(), Vec::new());
            for i in 0..samples + 3 {
                let ids = gated_round(&store, &account.id, i).await?;
                let claimant = format!("verify-{}", ids[2]);
                let t = Instant::now();
                match store.claim_selection(&ids[2], &claimant).await? {
                    SelectionStep::Claimed { .. } => {}
                    other => bail!("the claim answered {other:?}"),
                }
                store.apply_selection(&ids[2], &claimant, None).await?;
                let a = t.elapsed().as_secs_f64() * 1000.0;
                let t = Instant::now();
                let h = client
                    .start_workflow(
                        belay_workflows::probe::ProbeWorkflow::run,
                        format!("p{i}"),
                        temporalio_client::WorkflowStartOptions::new(
                            belay_workflows::queues::WORKFLOWS,
                            format!("probe-sel-{}-{i}", std::process::id()),
                        )
                        .build(),
                    )
                    .await?;
                let _: String = h
                    .get_result(temporalio_client::WorkflowGetResultOptions::default())
                    .await?;
                let b = t.elapsed().as_secs_f64() * 1000.0;
                if i >= 3 {
                    sel.push(a);
                    floor.push(b);
                }
            }
            let (s50, s95) = stats(sel);
            let (f50, f95) = stats(floor);
            println!(
                "selection among 3 gated siblings (claim, rank, apply; sqlite): median {s50:.1} ms, p95 {s95:.1} ms; \
                 bare one-activity workflow median {f50:.1} ms, p95 {f95:.1} ms; ratio {:.2}",
                s50 / f50
            );
            Ok(())
        }
        .await;
        let _ = stop_tx.send(true);
        r
    };
    let (pools, figures) = tokio::join!(
        belay_worker::run_pools(&[Pool::Workflows, Pool::Db], deps, async move {
            let _ = worker_stop.wait_for(|s| *s).await;
        }),
        measure
    );
    store.close().await;
    pools?;
    figures
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
            let body: String = (0..80)
                .map(|l| format!("export const v{i}_{l} = {l}; // line {l}\n"))
                .collect();
            (format!("src/feature/f{i}.ts"), Some(body.into_bytes()))
        })
        .collect();
    let paths: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    let composed = svc.commit_files(&fork, &base, files, "24 files").await?;
    let sources = SourceObjects::new(object_store_at(&dir.join("objects-assembly"))?);
    let diff = svc.unified_diff(&fork, &base, &composed).await?;
    sources.put_candidate_patch(PROJECT, CANDIDATE, &diff).await?;
    let req = AcceptanceSourceRequest {
        project_id: PROJECT.to_string().into(),
        candidate_id: CANDIDATE.to_string().into(),
        base: base.clone(),
        composed: composed.clone(),
    };
    let fork_path = svc.repo_path(&fork)?;
    let (mut ours, mut direct) = (Vec::new(), Vec::new());
    for i in 0..samples + 2 {
        let t = Instant::now();
        let input = belay_activities::selection::acceptance_source(&svc, &sources, &req)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let a = t.elapsed().as_secs_f64() * 1000.0;
        ensure!(
            input.parts.len() == 25,
            "the input has {} parts, not the patch and 24 files",
            input.parts.len()
        );
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
        }
    }
    let _ = git(&fork_path, &["rev-parse", &composed])?;
    let (o50, o95) = stats(ours);
    let (d50, d95) = stats(direct);
    println!(
        "acceptance input assembly for a 24-file Candidate (patch + composedFileOrder from the fork): median {o50:.1} ms, \
         p95 {o95:.1} ms; reading the 24 files from the fork directly (git cat-file --batch): median {d50:.1} ms, \
         p95 {d95:.1} ms; ratio {:.2}",
        o50 / d50
    );
    Ok(())
}
