//! Promotion end to end: real `belay api` and `belay worker` processes, a real Temporal server,
//! real git (gix on bare repositories, smart HTTP for the clone), a real Docker Sandbox with Bun
//! verifying the sample app, and canonical `main` moved only by fast-forwards.

use crate::common::sample::{
    assert_only_fast_forwards, change, git, repo, sample_project, start_verification, task, wait_candidate, write,
};
use crate::common::{Belay, replays, wait_for};
use belay_domain::ids::{CandidateId, ChangeId};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

const HIGH_RISK_REASON: &str =
    "Policy policy-1 requires a person to approve high-risk changes. Approve to ship it or cancel the change.";

/// A Change of `tier` with one Task writing `src/<name>.ts` and its test.
async fn one_task_change(b: &Belay, project: &str, name: &str, tier: &str) -> String {
    let c = change(
        b,
        project,
        json!({"goal": format!("Add {name}"), "acceptanceCriteria": [], "invariants": [], "riskTier": tier}),
    )
    .await;
    task(
        b,
        &c,
        "t1",
        &[
            write(&format!("src/{name}.ts"), &format!("export const {name} = \"{name}\";\n")),
            write(
                &format!("test/{name}.test.ts"),
                &format!(
                    "import {{ expect, test }} from \"bun:test\";\nimport {{ {name} }} from \"../src/{name}\";\n\ntest(\"{name} is itself\", () => {{\n  expect({name}).toBe(\"{name}\");\n}});\n"
                ),
            ),
        ],
    )
    .await;
    c
}

async fn project_row(b: &Belay, project: &str) -> Value {
    b.get(&format!("/v1/projects/{project}")).await
}

fn events_of<'a>(events: &'a Value, kind: &str) -> Vec<&'a Value> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

fn source_object(b: &Belay, project: &str, tree: &str, file: &str) -> std::path::PathBuf {
    b.dir
        .path()
        .join("data")
        .join("objects")
        .join("source")
        .join(project)
        .join(tree)
        .join(file)
}

async fn promote(b: &Belay, candidate: &str) -> (u16, Value) {
    b.request(
        "POST",
        &format!("/v1/candidates/{candidate}/promote"),
        Some(&b.token),
        None,
    )
    .await
}

async fn decide(b: &Belay, candidate: &str, body: Value) -> (u16, Value) {
    b.post(&format!("/v1/candidates/{candidate}/approvals"), body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_reach_canonical_main_through_verification_approval_and_a_fast_forward() {
    let b = Belay::start_with_sandbox().await;
    let project = sample_project(&b).await;
    let seeded = git(&repo(&b, &project), &["rev-parse", "main"]);

    // A low-risk Change: verified, then promoted automatically (policy-1 promotes low and medium).
    let c1 = one_task_change(&b, &project, "alpha", "low").await;
    let k1 = start_verification(&b, &c1).await;
    let k = wait_candidate(&b, &k1, &["promoted", "rejected", "stale"]).await;
    assert_eq!(k["status"], "promoted", "{k:#}");
    let composed = k["composedCommit"].as_str().unwrap().to_owned();
    let tree = k["composedTree"].as_str().unwrap().to_owned();
    let p = project_row(&b, &project).await;
    assert_eq!(p["generation"], 1, "{p}");
    assert_eq!(p["canonicalCommit"], composed.as_str(), "{p}");
    assert_eq!(b.get(&format!("/v1/changes/{c1}")).await["status"], "promoted");
    // The fast-forward and the release sync follow the swap; wait for the sync's last record.
    wait_for("release.started", Duration::from_secs(60), || async {
        let ev = b.get(&format!("/v1/events?entity={project}")).await;
        !events_of(&ev, "release.started").is_empty()
    })
    .await;
    assert_eq!(git(&repo(&b, &project), &["rev-parse", "main"]), composed);
    let ev = b.get(&format!("/v1/events?entity={project}")).await;
    let advanced = events_of(&ev, "canonical.advanced");
    assert_eq!(advanced.len(), 1, "{ev:#}");
    assert_eq!(advanced[0]["payload"]["generation"], 1);
    assert!(source_object(&b, &project, &tree, "index.json").is_file());
    assert!(source_object(&b, &project, &tree, "code.json").is_file());
    let index: Value =
        serde_json::from_slice(&std::fs::read(source_object(&b, &project, &tree, "index.json")).unwrap()).unwrap();
    assert!(
        index["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == "src/alpha.ts"),
        "the index of S1 lists the new file"
    );

    // `git clone` over HTTP shows the composed tree.
    let (s, t) = b
        .post(&format!("/v1/projects/{project}/repo-tokens"), json!({"scope": "read"}))
        .await;
    assert_eq!(s, 201, "{t}");
    let url = format!(
        "http://belay:{}@{}{}",
        t["token"].as_str().unwrap(),
        b.url.trim_start_matches("http://"),
        t["path"].as_str().unwrap()
    );
    let work = b.dir.path().join("clone-s1");
    let out = Command::new("git")
        .args(["clone", "--quiet", &url])
        .arg(&work)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "clone: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(git(&work, &["rev-parse", "HEAD^{tree}"]), tree);
    assert!(work.join("src/alpha.ts").is_file());

    // A retry after success answers alreadyPromoted and moves nothing.
    let (s, v) = promote(&b, &k1).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("alreadyPromoted")), "{v}");
    assert_eq!(project_row(&b, &project).await["generation"], 1);
    // The release ran as one git activity and the store steps as local activities (markers, no
    // `db.` task-queue activity), behind the patch marker.
    let h = crate::common::completed_history(&b, &format!("promote-{k1}-g0")).await;
    let patches = belay_client::replay::patches(&h).unwrap();
    assert!(
        patches
            .iter()
            .any(|p| p == belay_workflows::promotion::ONE_STEP_RELEASE),
        "{patches:?}"
    );
    let text = String::from_utf8_lossy(&h);
    assert!(text.contains("git.promotion_release"), "no release activity");
    assert!(
        !text.contains("git.promotion_sources") && !text.contains("\"db.promotion_"),
        "a release step ran as a task-queue activity"
    );
    assert!(
        text.matches("MarkerRecordedEventAttributes").count() >= 4,
        "the patch marker and three local store steps"
    );
    crate::common::replays_json("promotion-promoted-v2", h).await;
    replays(&b, "verification-winner-ready", &format!("verify-{k1}")).await;

    // Two high-risk Changes on one base: both wait for a person, with the spec's reason.
    let ca = one_task_change(&b, &project, "bravo", "high").await;
    let cb = one_task_change(&b, &project, "charlie", "high").await;
    let ka = start_verification(&b, &ca).await;
    let kb = start_verification(&b, &cb).await;
    let a = wait_candidate(&b, &ka, &["verified", "rejected", "stale"]).await;
    let bv = wait_candidate(&b, &kb, &["verified", "rejected", "stale"]).await;
    assert_eq!(
        (a["status"].as_str(), bv["status"].as_str()),
        (Some("verified"), Some("verified")),
        "{a:#} {bv:#}"
    );
    wait_for("both approvals requested", Duration::from_secs(60), || async {
        b.get("/v1/approvals?status=requested").await.as_array().unwrap().len() == 2
    })
    .await;
    let waiting = b.get("/v1/approvals?status=requested").await;
    for w in waiting.as_array().unwrap() {
        assert_eq!(w["reason"], HIGH_RISK_REASON, "{w}");
        assert_eq!(w["trigger"], "policy");
    }
    let a = b.get(&format!("/v1/candidates/{ka}")).await;
    let tree_a = a["composedTree"].as_str().unwrap().to_owned();
    assert_eq!(a["statusReason"], HIGH_RISK_REASON);
    assert_eq!(b.get(&format!("/v1/changes/{ca}")).await["status"], "awaiting_approval");
    let entry = waiting
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["candidateId"] == ka.as_str())
        .unwrap();
    assert_eq!(entry["tree"], tree_a.as_str());
    assert_eq!(entry["composedCommit"], a["composedCommit"]);

    // Promotability names every precondition; the approval is what holds it.
    let pr = b.get(&format!("/v1/candidates/{ka}/promotability")).await;
    assert_eq!(pr["preconditions"].as_array().unwrap().len(), 7, "{pr:#}");
    let unmet: Vec<&str> = pr["preconditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["satisfied"] == false)
        .map(|p| p["precondition"].as_str().unwrap())
        .collect();
    assert_eq!(unmet, ["approval_granted_or_not_required"], "{pr:#}");
    let (s, v) = promote(&b, &ka).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("blocked")), "{v}");
    assert_eq!(v["blocks"][0]["code"], "approval_pending", "{v}");

    // Bad input names the field and writes nothing; a grant for another tree is refused.
    for (body, field) in [
        (json!({"decision": "maybe", "tree": tree_a}), "decision"),
        (json!({"decision": "grant", "tree": "abc"}), "tree"),
        (json!({"decision": "grant", "tree": tree_a, "extra": 1}), "extra"),
        (json!({"decision": "grant"}), "tree"),
    ] {
        let (s, v) = decide(&b, &ka, body.clone()).await;
        assert_eq!(s, 422, "{body} answered {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{body}: {v}");
    }
    let other_tree = "0".repeat(40);
    let (s, v) = decide(&b, &ka, json!({"decision": "grant", "tree": other_tree})).await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("tree:"), "{v}");
    let (s, v) = b
        .request("GET", "/v1/approvals?status=bogus", Some(&b.token), None)
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("status"), "{v}");
    for path in ["promote", "promotability", "approvals"] {
        let method = if path == "promotability" { "GET" } else { "POST" };
        let body = (path == "approvals").then(|| json!({"decision": "grant", "tree": tree_a}).to_string());
        let (s, v) = b
            .request(
                method,
                &format!("/v1/candidates/cand_nope/{path}"),
                Some(&b.token),
                body.as_deref(),
            )
            .await;
        assert_eq!(s, 404, "{path}: {v}");
    }
    assert_eq!(
        b.get("/v1/approvals?status=requested").await.as_array().unwrap().len(),
        2
    );
    assert_eq!(project_row(&b, &project).await["generation"], 1);

    // The grant on the exact tree ships the Candidate: generation 2.
    let (s, v) = decide(&b, &ka, json!({"decision": "grant", "tree": tree_a})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["approval"]["status"], "granted");
    assert_eq!(v["promotion"], json!({"outcome": "promoted", "generation": 2}), "{v}");
    let (s, v) = decide(&b, &ka, json!({"decision": "reject", "tree": tree_a, "reason": "no"})).await;
    assert_eq!(s, 409, "the first decision is final: {v}");

    // The other Candidate on the old base is stale, and its Change gets one on the new base.
    let old = wait_candidate(&b, &kb, &["stale"]).await;
    assert_eq!(
        old["statusReason"], "Base generation 1 is behind canonical generation 2.",
        "{old:#}"
    );
    let kb2 = old["recomposedAs"].as_str().expect("recomposed").to_owned();
    let new = wait_candidate(&b, &kb2, &["verified", "rejected", "stale"]).await;
    assert_eq!(
        (new["status"].as_str(), new["baseGeneration"].as_i64()),
        (Some("verified"), Some(2)),
        "{new:#}"
    );
    assert_eq!(new["changeSetIds"], old["changeSetIds"]);
    let (s, v) = promote(&b, &kb).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("blocked")), "{v}");
    let codes: Vec<&str> = v["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"not_verified") && codes.contains(&"stale"),
        "every failed precondition at once: {v}"
    );

    // A rejection with a reason rejects the Candidate and starts its repair.
    wait_for("the new Candidate's approval", Duration::from_secs(60), || async {
        b.get("/v1/approvals?status=requested")
            .await
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["candidateId"] == kb2.as_str())
    })
    .await;
    let waiting = b.get("/v1/approvals?status=requested").await;
    assert_eq!(
        waiting.as_array().unwrap().len(),
        1,
        "the stale one no longer waits: {waiting:#}"
    );
    let (s, v) = decide(
        &b,
        &kb2,
        json!({"decision": "reject", "tree": new["composedTree"], "reason": "charlie must be upper case"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["promotion"], Value::Null);
    let rejected = b.get(&format!("/v1/candidates/{kb2}")).await;
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        rejected["statusReason"],
        "Rejected by a person: charlie must be upper case"
    );
    let ev = b.get(&format!("/v1/events?entity={cb}")).await;
    let repair = events_of(&ev, "repair.requested");
    assert_eq!(repair.len(), 1, "{ev:#}");
    assert_eq!(repair[0]["payload"]["reason"], "charlie must be upper case");
    assert!(
        b.get("/v1/approvals?status=requested")
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        b.get("/v1/approvals?status=rejected").await.as_array().unwrap().len(),
        1
    );

    // 20 concurrent promotes of one granted Candidate: one advance, every other alreadyPromoted.
    let cd = one_task_change(&b, &project, "delta", "high").await;
    let kd = start_verification(&b, &cd).await;
    wait_for("delta's approval", Duration::from_secs(400), || async {
        b.get("/v1/approvals?status=requested")
            .await
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["candidateId"] == kd.as_str())
    })
    .await;
    let d = b.get(&format!("/v1/candidates/{kd}")).await;
    let store = b.store().await;
    let account = store.authenticate(&b.token).await.unwrap().unwrap();
    store
        .decide_approval(
            &account.id,
            &CandidateId::from(kd.as_str()),
            &belay_domain::approval::ApprovalInput {
                decision: belay_domain::approval::ApprovalDecision::Grant,
                tree: d["composedTree"].as_str().unwrap().to_owned(),
                reason: None,
            },
        )
        .await
        .unwrap();
    let answers = futures::future::join_all((0..20).map(|_| promote(&b, &kd))).await;
    let mut outcomes: Vec<String> = answers
        .iter()
        .map(|(s, v)| {
            assert_eq!(*s, 200, "{v}");
            v["outcome"].as_str().unwrap().to_owned()
        })
        .collect();
    outcomes.sort();
    assert_eq!(outcomes.iter().filter(|o| *o == "promoted").count(), 1, "{outcomes:?}");
    assert_eq!(
        outcomes.iter().filter(|o| *o == "alreadyPromoted").count(),
        19,
        "{outcomes:?}"
    );
    assert_eq!(project_row(&b, &project).await["generation"], 3);
    let ev = b.get(&format!("/v1/events?entity={project}")).await;
    assert_eq!(events_of(&ev, "canonical.advanced").len(), 3, "{ev:#}");

    // A member account sees none of it: the project's, the Changes' and the Candidates' events
    // are the owner's (an operator reads every account's, decision 0042).
    let mine = b.get("/v1/events?limit=1000").await;
    let source_lane = [
        "candidate.",
        "approval.",
        "canonical.",
        "release.",
        "repair.",
        "verification.",
    ];
    let of_lane = |events: &Value| {
        events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| source_lane.iter().any(|p| e["kind"].as_str().unwrap().starts_with(p)))
            .count()
    };
    assert!(of_lane(&mine) >= 8, "the owner sees its own: {mine:#}");
    let other = crate::common::create_account(&b.database_url, "other");
    let (s, theirs) = b.request("GET", "/v1/events?limit=1000", Some(&other), None).await;
    assert_eq!(s, 200);
    assert_eq!(of_lane(&theirs), 0, "a member saw the owner's events: {theirs:#}");
    for entity in [&project, &kb2] {
        let (_, one) = b
            .request("GET", &format!("/v1/events?entity={entity}"), Some(&other), None)
            .await;
        assert_eq!(one, json!([]), "{entity}");
    }

    // Canonical main moved only by fast-forwards: the seed push and three promotions.
    let moves = assert_only_fast_forwards(&b, &project);
    let promotions: Vec<_> = moves.iter().filter(|m| m.2 == "belay: fast-forward main").collect();
    assert_eq!(promotions.len(), 3, "{moves:?}");
    assert!(moves.iter().any(|m| m.1 == seeded));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_lost_between_the_swap_and_the_fast_forward_is_repaired_by_the_retry() {
    // The workflow worker (which runs promotion's store steps as local activities) on a process
    // of its own, which exits right after the swap commits.
    let mut b = Belay::start_with_sandbox_env(&[], Some("db,git,sandbox")).await;
    let crashing = b.start_extra_worker("workflows", &[("BELAY_FAILPOINT", "promotion-after-cas")]);
    let project = sample_project(&b).await;
    let seeded = git(&repo(&b, &project), &["rev-parse", "main"]);
    let c = one_task_change(&b, &project, "echo", "low").await;
    let k = start_verification(&b, &c).await;

    // The swap landed; canonical main did not move and no index exists for the new tree.
    wait_for("the swap", Duration::from_secs(400), || async {
        project_row(&b, &project).await["generation"] == 1
    })
    .await;
    let cand = b.get(&format!("/v1/candidates/{k}")).await;
    assert_eq!(cand["status"], "promoted", "{cand:#}");
    let composed = cand["composedCommit"].as_str().unwrap().to_owned();
    let tree = cand["composedTree"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        git(&repo(&b, &project), &["rev-parse", "main"]),
        seeded,
        "main moved before the push"
    );
    assert!(!source_object(&b, &project, &tree, "index.json").exists());
    b.kill_extra_worker(crashing);

    // A workflow worker again: the promotion's retried swap answers alreadyPromoted, and it
    // pushes and repairs the sync; a caller joins it and is answered alreadyPromoted.
    b.start_extra_worker("workflows", &[]);
    let (s, v) = promote(&b, &k).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("alreadyPromoted")), "{v}");
    assert_eq!(git(&repo(&b, &project), &["rev-parse", "main"]), composed);
    assert!(source_object(&b, &project, &tree, "index.json").is_file());
    assert!(source_object(&b, &project, &tree, "code.json").is_file());
    let store = b.store().await;
    let rec = store
        .promotion_for_worker(&CandidateId::from(k.as_str()))
        .await
        .unwrap()
        .unwrap();
    assert!(rec.pushed_at.is_some() && rec.synced_at.is_some(), "{rec:?}");
    let p = project_row(&b, &project).await;
    assert_eq!(
        (p["generation"].as_i64(), p["canonicalCommit"].as_str()),
        (Some(1), Some(composed.as_str()))
    );
    let ev = b.get(&format!("/v1/events?entity={project}")).await;
    assert_eq!(events_of(&ev, "canonical.advanced").len(), 1);
    assert_eq!(events_of(&ev, "release.started").len(), 1);
    let moves = assert_only_fast_forwards(&b, &project);
    assert_eq!(moves.iter().filter(|m| m.2 == "belay: fast-forward main").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daily_sweep_deletes_candidate_forks_by_how_and_when_their_candidates_ended() {
    let b = Belay::start().await;
    let project = crate::common::ready_project(&b, "sweep").await;
    let canonical = b.get(&format!("/v1/projects/{project}")).await["canonicalCommit"]
        .as_str()
        .unwrap()
        .to_owned();
    let c = change(
        &b,
        &project,
        json!({"goal": "g", "acceptanceCriteria": [], "invariants": [], "riskTier": "low"}),
    )
    .await;
    let (s, t) = b
        .post(
            &format!("/v1/changes/{c}/tasks"),
            json!({"key": "a", "kind": "implement", "title": "a", "semanticResources": [], "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{}/change-set", r["id"].as_str().unwrap()),
            json!({ "commit": canonical }),
        )
        .await;
    assert_eq!(s, 201, "{cs}");

    // Six Candidates, each with its fork, ended as the sweep's rules need.
    let store = b.store().await;
    let account = store.authenticate(&b.token).await.unwrap().unwrap();
    let git = belay_git::GitService::new(b.dir.path().join("data/git/belay"));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let day = 86_400_000i64;
    let mut forks = Vec::new();
    for _ in 0..6 {
        let k = store
            .start_verification(&account.id, &ChangeId::from(c.as_str()))
            .await
            .unwrap();
        let fork = format!("cand-{}", k.id.as_str().strip_prefix("cand_").unwrap());
        git.fork(&project, &fork).await.unwrap();
        forks.push((k.id.as_str().to_owned(), fork));
    }
    let unpromoted = git
        .commit_files(&forks[4].1, &canonical, vec![("x".into(), Some(b"x\n".to_vec()))], "x")
        .await
        .unwrap();
    for (i, (status, ended, composed)) in [
        ("rejected", now_ms - 31 * day, None),              // due
        ("stale", now_ms - 31 * day, None),                 // due
        ("rejected", now_ms - 5 * day, None),               // within retention: kept
        ("promoted", now_ms - 31 * day, Some(&canonical)),  // canonical holds it: due
        ("promoted", now_ms - 31 * day, Some(&unpromoted)), // canonical lacks it: kept
        ("verified", now_ms - 31 * day, None),              // still open: kept
    ]
    .into_iter()
    .enumerate()
    {
        store
            .execute_admin(&format!(
                "update candidates set status = '{status}', updated_at = {ended}, composed_commit = {} where id = '{}'",
                composed.map_or_else(|| "null".to_owned(), |c| format!("'{c}'")),
                forks[i].0
            ))
            .await
            .unwrap();
    }

    let temporal = |args: &[&str]| {
        let out = Command::new(crate::common::temporal_bin())
            .args(args)
            .args(["--address", &b.temporal.address])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "temporal {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    temporal(&["schedule", "trigger", "--schedule-id", "forks-sweep"]);
    let due = [0usize, 1, 3];
    wait_for(
        "the sweep to delete the due Candidate forks",
        Duration::from_secs(60),
        || async { due.iter().all(|i| !repo(&b, &forks[*i].1).exists()) },
    )
    .await;
    for kept in [2usize, 4, 5] {
        assert!(repo(&b, &forks[kept].1).is_dir(), "{}'s fork was kept", forks[kept].0);
    }
    assert!(repo(&b, &project).is_dir(), "canonical is never swept");
    let listed: Value = serde_json::from_str(&temporal(&[
        "workflow",
        "list",
        "--query",
        "WorkflowType='ForksSweepWorkflow'",
        "-o",
        "json",
    ]))
    .unwrap();
    let sweep_id = listed[0]["execution"]["workflowId"].as_str().unwrap().to_owned();
    replays(&b, "forks-sweep-v4", &sweep_id).await;
}
