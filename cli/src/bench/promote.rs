//! `belay bench promote`: the promotion of a verified Candidate as PromotionWorkflow runs it (the
//! preconditions from the rows and the fork, the compare-and-swap transaction, the fast-forward of
//! canonical `main`, the file index and code manifest of the new tree, `release.started` and the
//! settle of older-base Candidates), started and awaited through Temporal on worker pools of its
//! own, against the floor of the same work without belay: `git push` of the same fast-forward
//! from the Candidate fork to a bare repository at the base, plus a bare one-activity workflow.
//!
//! Each sample promotes a new one-file Change of the same project, so canonical grows one
//! generation per sample and every promotion runs on a tree of `files` files. The first
//! promotion also stores every blob of the tree (canonical's objects were never mirrored before):
//! it is reported on its own and left out of the figures.

use super::support::{
    bare_workflow_ms, clone_bare, fresh_store, git, grow, low_risk_change, published_task, stats, with_pools,
};
use crate::objects::dir_store;
use anyhow::{Context, ensure};
use belay_domain::candidate::CandidateStatus;
use belay_domain::evidence::{CheckResult, Coverage, EvidenceStatus};
use belay_domain::ids::{AccountId, CandidateId, ProjectId};
use belay_domain::plan::{PlanInput, build_verification_plan};
use belay_domain::project::ProjectInput;
use belay_domain::promotion::{PromotionOutcome, promotion_workflow_id};
use belay_domain::repo::{candidate_fork, canonical_repo};
use belay_git::GitService;
use belay_git::source_objects::SourceObjects;
use belay_store::Store;
use belay_store::candidates::NewEvidence;
use belay_worker::Pool;
use belay_workflows::promotion::{PromoteInput, PromotionWorkflow};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};

/// A verified Candidate of a new one-file Change on canonical's current `main`: composed in its
/// fork `cand-<id>` (the fork's `main` at the composed commit), the plan the policy makes for it,
/// and a passing, supported record for every required check.
struct Verified {
    candidate: CandidateId,
    generation: i64,
    composed: String,
    tree: String,
}

async fn verified_candidate(
    store: &Store,
    svc: &GitService,
    account: &str,
    project: &str,
    i: usize,
) -> anyhow::Result<Verified> {
    let canonical = canonical_repo(project)?;
    let base = svc.head(&canonical).await?.context("canonical has no main")?;
    let change = low_risk_change(store, account, project).await?;
    published_task(store, account, change.id.as_str(), "a", &base).await?;
    let k = store.start_verification(&AccountId::from(account), &change.id).await?;
    ensure!(k.base_commit == base, "the Candidate's base is not canonical main");
    let fork = candidate_fork(k.id.as_str())?;
    svc.fork(&canonical, &fork).await?;
    let path = format!("src/promoted/p{i}.rs");
    let composed = svc
        .commit_files(
            &fork,
            &base,
            vec![(path.clone(), Some(format!("pub fn p{i}() {{}}\n").into_bytes()))],
            "one file",
        )
        .await?;
    svc.cas_main(&fork, &base, &composed).await?;
    let tree = svc.tree_of(&fork, &composed).await?;
    let policy = store.active_policy_for_worker(&ProjectId::from(project)).await?;
    let plan = build_verification_plan(&PlanInput {
        change: &change,
        policy: &policy,
        tasks: &[],
        changed_paths: &[path],
        has_build_script: false,
        criteria_to_judge: &[],
    });
    ensure!(
        store
            .record_composition(&CandidateId::from(k.id.as_str()), &composed, &tree, &plan)
            .await?,
        "the Candidate was not composing"
    );
    let now = belay_store::now_ms();
    for check in plan.required() {
        store
            .record_evidence(&NewEvidence {
                candidate_id: k.id.to_string(),
                check_id: check.check_id.clone(),
                attempt: 1,
                result: CheckResult::new(
                    EvidenceStatus::Pass,
                    Coverage::CheckedSupported,
                    "passed (runner: sandbox)",
                ),
                object_key: None,
                started_at: now,
                completed_at: now,
            })
            .await?;
    }
    ensure!(
        store
            .set_candidate_status(
                &CandidateId::from(k.id.as_str()),
                &[CandidateStatus::Verifying],
                CandidateStatus::Verified,
                None
            )
            .await?,
        "the Candidate was not verifying"
    );
    Ok(Verified {
        candidate: k.id.clone(),
        generation: k.base_generation,
        composed,
        tree,
    })
}

/// PromotionWorkflow for `v`, start to result, in milliseconds; checks that it promoted and that
/// canonical `main`, the file index and the generation say so.
async fn promote_ms(
    client: &temporalio_client::Client,
    store: &Store,
    svc: &GitService,
    sources: &SourceObjects,
    project: &str,
    v: &Verified,
) -> anyhow::Result<(f64, String)> {
    let id = promotion_workflow_id(&v.candidate, v.generation);
    let t = Instant::now();
    let h = client
        .start_workflow(
            PromotionWorkflow::run,
            PromoteInput {
                candidate_id: v.candidate.clone(),
                expected_generation: v.generation,
            },
            WorkflowStartOptions::new(belay_workflows::queues::WORKFLOWS, id.clone()).build(),
        )
        .await?;
    let out: PromotionOutcome = h.get_result(WorkflowGetResultOptions::default()).await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    ensure!(
        out == PromotionOutcome::Promoted {
            generation: v.generation + 1
        },
        "the promotion answered {out:?}"
    );
    let head = svc.head(&canonical_repo(project)?).await?;
    ensure!(
        head.as_deref() == Some(v.composed.as_str()),
        "canonical main is at {head:?}"
    );
    let index = sources.read_index(project, &v.tree).await?.context("no file index")?;
    let rows = store
        .promotion_rows(&CandidateId::from(v.candidate.as_str()))
        .await?
        .context("no rows")?;
    ensure!(
        rows.canonical_generation == v.generation + 1 && rows.candidate.status == CandidateStatus::Promoted,
        "generation {} and the Candidate {:?}",
        rows.canonical_generation,
        rows.candidate.status
    );
    ensure!(index.files.len() > 1, "a file index of {} files", index.files.len());
    Ok((ms, id))
}

/// Seconds into the UTC day of a history event's `event_time` (`2026-11-30T03:37:32.315861878Z`):
/// the events of one promotion are seconds apart, so a difference wraps at most once.
fn day_seconds(t: &str) -> Option<f64> {
    let (_, clock) = t.split_once('T')?;
    let mut parts = clock.trim_end_matches('Z').split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

/// Each activity's own time (started → completed) in the closed workflow `id`, in milliseconds,
/// summed by activity type, in the order they first ran.
async fn activity_times(client: &temporalio_client::Client, id: &str) -> anyhow::Result<Vec<(String, f64)>> {
    let json = belay_client::closed_history_json(client, id, std::time::Duration::from_secs(10)).await?;
    let history: serde_json::Value = serde_json::from_slice(&json)?;
    let events = history["events"].as_array().context("a history without events")?;
    let at = |e: &serde_json::Value| e["event_time"].as_str().and_then(day_seconds);
    let (mut names, mut started) = (BTreeMap::new(), BTreeMap::new());
    let mut out: Vec<(String, f64)> = Vec::new();
    for e in events {
        let a = &e["attributes"];
        if let Some(s) = a.get("ActivityTaskScheduledEventAttributes") {
            names.insert(
                e["event_id"].as_i64(),
                s["activity_type"]["name"].as_str().unwrap_or_default().to_owned(),
            );
        } else if a.get("ActivityTaskStartedEventAttributes").is_some() {
            started.insert(e["event_id"].as_i64(), at(e));
        } else if let Some(c) = a.get("ActivityTaskCompletedEventAttributes") {
            let name = names
                .get(&c["scheduled_event_id"].as_i64())
                .cloned()
                .unwrap_or_default();
            let (Some(Some(from)), Some(to)) = (started.get(&c["started_event_id"].as_i64()), at(e)) else {
                continue;
            };
            let ms = (to - from).rem_euclid(86_400.0) * 1000.0;
            match out.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += ms,
                None => out.push((name, ms)),
            }
        }
    }
    Ok(out)
}

/// `git push` of the composed commit from the Candidate fork to `bare`, whose `main` is at the
/// Candidate's base: the same fast-forward, by git alone.
fn push_ms(svc: &GitService, v: &Verified, bare: &Path) -> anyhow::Result<f64> {
    let fork = svc.repo_path(&candidate_fork(v.candidate.as_str())?)?;
    let t = Instant::now();
    git(
        &fork,
        &[
            "push",
            "--quiet",
            bare.to_str().context("path")?,
            &format!("{}:refs/heads/main", v.composed),
        ],
    )?;
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

pub(super) async fn promote(files: usize, samples: usize) -> anyhow::Result<()> {
    let samples = samples.max(3);
    let dir = tempfile::tempdir()?;
    let store = fresh_store(dir.path(), None, "promote").await?;
    // The pools' git root and object store (see `with_pools`).
    let svc = GitService::new(dir.path().join("git").join("belay"));
    let sources = SourceObjects::new(dir_store(&dir.path().join("objects"))?);
    let (account, _) = store.create_account("bench").await?;
    let project = store
        .create_project(
            &account.id,
            &ProjectInput {
                name: "bench".into(),
                workspace_policy: None,
            },
        )
        .await?
        .id
        .to_string();
    std::fs::create_dir_all(svc.root())?;
    svc.provision(&project).await?;
    let canonical = svc.repo_path(&canonical_repo(&project)?)?;
    let started = Instant::now();
    let base = grow(&canonical, files)?;
    let base_tree = svc.tree_of(&canonical_repo(&project)?, &base).await?;
    store
        .mark_project_provisioned(&ProjectId::from(project.as_str()), &base, &base_tree)
        .await?;
    let grown = started.elapsed().as_secs_f64();
    let bare = dir.path().join("floor.git");
    clone_bare(&canonical, &bare)?;
    println!("canonical: {files} files, grown in {grown:.1} s");

    let result = with_pools(dir.path(), &store, &[Pool::Workflows, Pool::Db, Pool::Git], async |client| {
        let (mut ours, mut floor, mut pushes, mut bares) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut parts: Vec<(String, Vec<f64>)> = Vec::new();
        let pid = std::process::id();
        // Two warm-up promotions: the first stores every blob of the tree.
        for i in 0..samples + 2 {
            let v = verified_candidate(&store, &svc, &account.id, &project, i).await?;
            let (a, workflow) = promote_ms(client, &store, &svc, &sources, &project, &v).await?;
            let p = push_ms(&svc, &v, &bare)?;
            let b = bare_workflow_ms(client, format!("probe-promote-{pid}-{i}")).await?;
            if i == 0 {
                println!(
                    "first promotion (stores all {files} blobs): {a:.0} ms; git push {p:.1} ms + bare workflow {b:.1} ms"
                );
            }
            if i >= 2 {
                let steps = activity_times(client, &workflow).await?;
                let own: f64 = steps.iter().map(|(_, t)| t).sum();
                for (name, t) in steps.into_iter().chain([("between the activities".to_owned(), a - own)]) {
                    match parts.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, v)) => v.push(t),
                        None => parts.push((name, vec![t])),
                    }
                }
                ours.push(a);
                pushes.push(p);
                bares.push(b);
                floor.push(p + b);
            }
        }
        let n = ours.len();
        let (o50, o95) = stats(ours);
        let (f50, f95) = stats(floor);
        let (p50, _) = stats(pushes);
        let (b50, _) = stats(bares);
        println!(
            "promotion of a verified Candidate on {files} files (preconditions, compare-and-swap, fast-forward, file index \
             and code manifest, settle; PromotionWorkflow through Temporal, sqlite): median {o50:.1} ms, p95 {o95:.1} ms; \
             git push of the same fast-forward to a bare repository + bare one-activity workflow: median {f50:.1} ms \
             (push {p50:.1} + workflow {b50:.1}), p95 {f95:.1} ms; ratio median {:.2}, p95 {:.2} ({n} samples)",
            o50 / f50,
            o95 / f95
        );
        let parts: Vec<String> = parts
            .into_iter()
            .map(|(name, v)| format!("{name} {:.1}", stats(v).0))
            .collect();
        println!("  where it went (median ms per sample): {}", parts.join(", "));
        Ok(())
    })
    .await;
    store.close().await;
    result
}
