//! Sibling Candidates and selection end to end: real `belay` processes, a real Temporal server,
//! real git and the real Sandbox on the sample app, and the fake Anthropic Messages API served
//! over loopback by this test (the production client speaks to it).

use crate::common::fake_anthropic::{FakeAnthropic, Reply, Seen, acceptance, verdict};
use crate::common::{Belay, poll_until, replays, wait_until_every};
use belay_domain::ids::ChangeId;
use serde_json::{Value, json};
use std::time::Duration;

const HAIKU: &str = "claude-haiku-4-5";
const SONNET: &str = "claude-sonnet-4-5";

use crate::common::sample::sample_project;

/// A Task whose run writes `files` and publishes; answers (task, ChangeSet).
async fn task(b: &Belay, change: &str, key: &str, resources: &[&str], files: &[(&str, &str)]) -> (Value, Value) {
    let (s, t) = b
        .post(
            &format!("/v1/changes/{change}/tasks"),
            json!({"key": key, "kind": "implement", "title": format!("task {key}"), "semanticResources": resources, "dependencies": []}),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", t["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap().to_string();
    for (path, content) in files {
        let (s, v) = b
            .post(
                &format!("/v1/task-runs/{run}/workspace/tools"),
                json!({"tool": "write_file", "path": path, "content": content}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    }
    let (s, cs) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": format!("task {key}"), "contractChanges": []}),
        )
        .await;
    assert_eq!(s, 201, "{cs}");
    (t, cs)
}

/// Waits until every Candidate has settled (a selected low-risk winner goes on to be promoted,
/// the others are rejected or wait for a person) and sibling selection has left its receipt.
async fn wait_done(b: &Belay, ids: &[String], change: &str) -> Vec<Value> {
    let what = "every Candidate to settle and the selection's receipt";
    wait_until_every(what, Duration::from_secs(600), Duration::from_millis(300), async || {
        // The receipt first: the selection's rejections commit with it, so Candidates read after
        // it show them (read before it, all three may still be `verified`).
        let receipts = b.get(&format!("/v1/changes/{change}/receipts")).await;
        let selected = receipts
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x["kind"] == "CANDIDATE_SELECTION"));
        let all: Vec<Value> = {
            let mut v = Vec::new();
            for id in ids {
                v.push(b.get(&format!("/v1/candidates/{id}")).await);
            }
            v
        };
        let gated = all
            .iter()
            .all(|k| ["verified", "rejected", "promoted"].contains(&k["status"].as_str().unwrap_or_default()));
        if gated && selected {
            Ok(all)
        } else {
            Err(format!("selected {selected}: {all:#?}"))
        }
    })
    .await
}

/// The Change's sibling-selection receipt, and all its receipts.
async fn selection_receipt(b: &Belay, change: &str) -> (Value, Value) {
    let receipts = b.get(&format!("/v1/changes/{change}/receipts")).await;
    let sel = receipts
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "CANDIDATE_SELECTION")
        .cloned()
        .unwrap_or_else(|| panic!("no selection receipt: {receipts:#}"));
    (sel, receipts)
}

/// A low-risk Change "A todo helper" with one acceptance criterion; its id.
async fn todo_helper_change(b: &Belay, project: &str, criterion: &str) -> String {
    let (s, c) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": "A todo helper", "acceptanceCriteria": [criterion], "invariants": [], "riskTier": "low"}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    c["id"].as_str().unwrap().to_owned()
}

/// Waits until the Candidate has the status.
async fn wait_status(b: &Belay, id: &str, want: &str) -> Value {
    let what = format!("{id} to become {want}");
    wait_until_every(
        &what,
        Duration::from_secs(180),
        Duration::from_millis(300),
        async || {
            let k = b.get(&format!("/v1/candidates/{id}")).await;
            if k["status"] == want {
                Ok(k)
            } else {
                Err(format!("{k:#}"))
            }
        },
    )
    .await
}

const STATS: &str = "export function countTodos(titles: string[]): number {\n  return titles.length;\n}\n";
const EXPORT: &str =
    "export function todoTitles(todos: { title: string }[]): string[] {\n  return todos.map((t) => t.title);\n}\n";

/// The acceptance script: a criterion is met when its function is in what the model was shown,
/// cited from the file it is in.
fn judge_by_content(s: &Seen) -> Vec<Value> {
    let mut out = Vec::new();
    for (id, needle, path) in [
        ("c1", "export function countTodos", "src/stats.ts"),
        ("c2", "export function todoTitles", "src/export.ts"),
    ] {
        if !s.user.contains(&format!("- {id}:")) {
            continue;
        }
        if s.user.contains(needle) {
            out.push(json!({"id": id, "result": "met", "citation": {"path": path, "quote": needle}}));
        } else {
            out.push(json!({"id": id, "result": "not_met", "reason": "not in the source"}));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_siblings_of_a_fork_required_conflict_the_promotable_one_meeting_more_criteria_wins() {
    // The side holding only the stats helper first answers with a repeated criterion: invalid,
    // so Sonnet is asked once for it.
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.tool != "record_acceptance" {
            return Reply::Status(400);
        }
        let only_stats =
            s.user.contains("export function countTodos") && !s.user.contains("export function todoTitles");
        if only_stats && s.model == HAIKU {
            return acceptance(json!([{"id": "c1", "result": "met"}, {"id": "c1", "result": "met"}]));
        }
        acceptance(Value::Array(judge_by_content(s)))
    })
    .await;
    let env = fake.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = Belay::start_with_sandbox_env(&env, None).await;
    let project = sample_project(&b).await;
    let (s, c) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": "Helpers for the todos", "acceptanceCriteria": ["A helper counts the todos", "A helper lists the todo titles"], "invariants": [], "riskTier": "low"}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let c = c["id"].as_str().unwrap().to_string();
    let (t1, cs1) = task(&b, &c, "t1", &[], &[("src/stats.ts", STATS)]).await;
    let (t2, cs2) = task(&b, &c, "t2", &[], &[("src/export.ts", EXPORT)]).await;

    // Bad input: a path the cited ChangeSet does not change is unsupported, names the field and
    // writes nothing; so is a ChangeSet of the other Task.
    let side =
        |t: &Value, cs: &Value, path: &str| json!({"taskId": t["id"], "changeSetIds": [cs["id"]], "paths": [path]});
    // A citation of the wrong Task, ChangeSet or path makes the finding unsupported: 422 naming
    // it, as is what the body gets wrong by itself.
    for (body, status, field) in [
        (
            json!({"status": "fork_required", "sides": [side(&t1, &cs1, "src/stats.ts"), side(&t2, &cs2, "src/app.ts")]}),
            422,
            "sides[1].paths[0]",
        ),
        (
            json!({"status": "fork_required", "sides": [side(&t1, &cs2, "src/export.ts"), side(&t2, &cs2, "src/export.ts")]}),
            422,
            "sides[0].changeSetIds[0]",
        ),
        (
            json!({"status": "fork_required", "sides": [side(&t1, &cs1, "src/stats.ts"), side(&t1, &cs1, "src/stats.ts")]}),
            422,
            "sides[1].taskId",
        ),
        (
            json!({"status": "fork_required", "sides": [side(&t1, &cs1, "src/stats.ts")]}),
            422,
            "sides",
        ),
        (
            json!({"status": "fork_required", "sides": [
                {"taskId": t1["id"], "changeSetIds": [], "paths": ["src/stats.ts"]},
                side(&t2, &cs2, "src/export.ts")]}),
            422,
            "sides[0].changeSetIds",
        ),
        (json!({"status": "maybe", "sides": []}), 422, "status"),
    ] {
        let (s, v) = b.post(&format!("/v1/changes/{c}/conflicts"), body).await;
        assert_eq!(s, status, "{v}");
        assert!(v.to_string().contains(field), "{field}: {v}");
    }
    let (s, v) = b
        .post(
            "/v1/changes/chg_nope/conflicts",
            json!({"status": "confirmed", "sides": []}),
        )
        .await;
    assert_eq!(s, 404, "{v}");
    let (s, v) = b
        .request("GET", "/v1/changes/chg_nope/receipts", Some(&b.token), None)
        .await;
    assert_eq!(s, 404, "{v}");

    let (s, conflict) = b
        .post(
            &format!("/v1/changes/{c}/conflicts"),
            json!({"status": "fork_required", "sides": [side(&t1, &cs1, "src/stats.ts"), side(&t2, &cs2, "src/export.ts")], "summary": "two helpers for one need"}),
        )
        .await;
    assert_eq!(s, 201, "{conflict}");

    let (s, round) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
    assert_eq!(s, 201, "{round}");
    let ids: Vec<String> = round["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "both sides and the combined Candidate: {round:#}");
    let all = wait_done(&b, &ids, &c).await;
    let by_sets = |n: usize| {
        all.iter()
            .find(|k| k["changeSetIds"].as_array().unwrap().len() == n)
            .unwrap()
    };
    let winner = by_sets(2)["id"].as_str().unwrap();
    // The winner is low risk and met its criteria: it goes on through the same step as a lone
    // Candidate and is promoted by itself.
    let combined = wait_status(&b, winner, "promoted").await;
    assert_eq!(b.get(&format!("/v1/changes/{c}")).await["status"], "promoted");
    assert_eq!(combined["metrics"]["criteriaMet"], 2, "{combined:#}");
    let acc: Vec<&Value> = combined["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["checkId"] == "acceptance")
        .collect();
    assert_eq!(
        (acc[0]["status"].as_str(), acc[0]["coverage"].as_str()),
        (Some("pass"), Some("checked_supported")),
        "{combined:#}"
    );
    for k in all.iter().filter(|k| k["id"] != winner) {
        assert_eq!(k["status"], "rejected", "{k:#}");
        assert_eq!(
            k["statusReason"],
            format!("Lost to {winner}: met 2 of 2 criteria, this met 1 of 2."),
            "{k:#}"
        );
        let acc: Vec<&Value> = k["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["checkId"] == "acceptance")
            .collect();
        assert_eq!(acc[0]["status"], "fail", "{k:#}");
        assert!(
            acc[0]["summary"]
                .as_str()
                .unwrap()
                .starts_with("1 of 2 criteria met; not met: "),
            "{k:#}"
        );
    }
    // Every Candidate stores the same decided outcome.
    let decided: Vec<&Value> = all.iter().map(|k| &k["selection"]).collect();
    for d in &decided {
        assert_eq!(d["state"], "decided", "{d:#}");
        assert_eq!(d["winner"], winner, "{d:#}");
        assert_eq!(d["decidedBy"], "ranking");
        assert_eq!(*d, decided[0]);
    }
    // One receipt and one event: exactly one run selected.
    let receipts = b.get(&format!("/v1/changes/{c}/receipts")).await;
    let sel: Vec<&Value> = receipts
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "CANDIDATE_SELECTION")
        .collect();
    assert_eq!(sel.len(), 1, "{receipts:#}");
    assert_eq!(sel[0]["outcome"]["winner"], winner);
    assert_eq!(sel[0]["inputs"]["candidates"].as_array().unwrap().len(), 3);
    let events = b.get(&format!("/v1/events?entity={c}")).await;
    let selected: Vec<&Value> = events
        .as_array()
        .or_else(|| events["events"].as_array())
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "candidate.selected")
        .collect();
    assert_eq!(selected.len(), 1, "{events:#}");
    assert_eq!(selected[0]["payload"]["winner"], winner);

    // The models: one Haiku call per Candidate, one Sonnet call for the invalid answer.
    let seen = fake.seen();
    let acceptance_calls: Vec<&Seen> = seen.iter().filter(|s| s.tool == "record_acceptance").collect();
    assert_eq!(
        acceptance_calls.iter().filter(|s| s.model == HAIKU).count(),
        3,
        "{seen:#?}"
    );
    assert_eq!(
        acceptance_calls.iter().filter(|s| s.model == SONNET).count(),
        1,
        "{seen:#?}"
    );
    assert!(seen.iter().all(|s| s.api_key.as_deref() == Some("test-key")));
    let store = belay_store::Store::connect(&b.database_url).await.unwrap();
    let cost = store.change_model_cost(&ChangeId::from(c.as_str())).await.unwrap();
    // Haiku 1000 in / 200 out at $1/$5 per MTok ×3, Sonnet at $3/$15 ×1.
    assert!((cost - (3.0 * 0.002 + 0.006)).abs() < 1e-9, "{cost}");
    assert_eq!(store.model_calls_on(belay_store::now_ms()).await.unwrap(), 4);

    replays(&b, "verification-selected-v1", &format!("verify-{}", ids[0])).await;
    replays(&b, "verification-selected-v1-sibling", &format!("verify-{}", ids[1])).await;
    // The one workflow whose selection picked the winner handed it on behind the marker
    // `selected-winner-ready` (read the winner's facts, started its promotion); its history is
    // recorded for the replay suite.
    let mut handed_on = Vec::new();
    for id in &ids {
        let h = crate::common::completed_history(&b, &format!("verify-{id}")).await;
        let patches = belay_client::replay::patches(&h).unwrap();
        if patches
            .iter()
            .any(|p| p == belay_workflows::promotion::SELECTED_WINNER_READY_PATCH)
        {
            handed_on.push(h);
        }
    }
    assert_eq!(
        handed_on.len(),
        1,
        "exactly one workflow ran the selection that picked the winner"
    );
    let h = handed_on.pop().unwrap();
    assert!(String::from_utf8_lossy(&h).contains("db.winner_facts"));
    crate::common::replays_json("verification-selected-winner-ready", h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tie_goes_to_the_judge_and_only_a_valid_preference_picks_a_winner() {
    // Both sides meet the one criterion: a tie. The Judge prefers the first tied Candidate,
    // citing its first Evidence id; for the second Change (told apart by its criterion, which the
    // snapshot's acceptance results carry) it cites an Evidence id it was never shown.
    let fake = FakeAnthropic::start(|s: &Seen| match s.tool.as_str() {
        "record_acceptance" => {
            let quote = if s.user.contains("countTodos") { "export function countTodos" } else { "export function todoTitles" };
            let path = if s.user.contains("countTodos") { "src/stats.ts" } else { "src/export.ts" };
            acceptance(json!([{"id": "c1", "result": "met", "citation": {"path": path, "quote": quote}}]))
        }
        "record_verdict" => {
            let start = s.user.find('[').unwrap();
            let snapshot: Value = serde_json::from_str(&s.user[start..]).unwrap();
            let first = &snapshot[0];
            let cited = if s.user.contains("Some helper for the todos exists") {
                json!("ev_00000000000000000000000000000000")
            } else {
                first["evidence"][0]["id"].clone()
            };
            verdict(json!({"verdict": "prefer_candidate", "candidateId": first["candidateId"], "evidenceIds": [cited], "reason": "smaller"}))
        }
        _ => Reply::Status(400),
    })
    .await;
    let env = fake.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = Belay::start_with_sandbox_env(&env, None).await;
    let project = sample_project(&b).await;

    let mut outcomes = Vec::new();
    for (round, criterion) in ["A helper for the todos exists", "Some helper for the todos exists"]
        .into_iter()
        .enumerate()
    {
        let c = todo_helper_change(&b, &project, criterion).await;
        // The first round's winner is on canonical by the second: the second writes the files
        // anew, so each side still changes them.
        let (stats, export) = (
            format!("{STATS}// round {round}\n"),
            format!("{EXPORT}// round {round}\n"),
        );
        let (t1, cs1) = task(&b, &c, "t1", &[], &[("src/stats.ts", stats.as_str())]).await;
        let (t2, cs2) = task(&b, &c, "t2", &[], &[("src/export.ts", export.as_str())]).await;
        let side =
            |t: &Value, cs: &Value, path: &str| json!({"taskId": t["id"], "changeSetIds": [cs["id"]], "paths": [path]});
        let (s, v) = b
            .post(
                &format!("/v1/changes/{c}/conflicts"),
                json!({"status": "confirmed", "sides": [side(&t1, &cs1, "src/stats.ts"), side(&t2, &cs2, "src/export.ts")]}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        let (s, round) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
        assert_eq!(s, 201, "{round}");
        let ids: Vec<String> = round["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), 2, "one Candidate per side: {round:#}");
        let all = wait_done(&b, &ids, &c).await;
        // A picked winner is promoted before the next Change starts: canonical moving under the
        // next Change's Candidates would make them stale (and recomposed), which is not what this
        // test is about.
        let (sel, _) = selection_receipt(&b, &c).await;
        if let Some(w) = sel["outcome"]["winner"].as_str() {
            wait_status(&b, w, "promoted").await;
        }
        outcomes.push((c, ids, all));
    }
    let (c, _, all) = &outcomes[0];
    let (sel, receipts) = selection_receipt(&b, c).await;
    assert_eq!(sel["outcome"]["decidedBy"], "judge", "{receipts:#}");
    let winner = sel["outcome"]["winner"].as_str().unwrap();
    wait_status(&b, winner, "promoted").await;
    for k in all {
        if k["id"] == winner {
            assert!(
                ["verified", "promoted"].contains(&k["status"].as_str().unwrap()),
                "{k:#}"
            );
        } else {
            assert_eq!(k["status"], "rejected", "{k:#}");
            assert!(
                k["statusReason"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("Lost to {winner}: the Integration Judge preferred it")),
                "{k:#}"
            );
        }
    }
    // A Judge citing Evidence it was not shown picks nothing: a person picks.
    let (c, _, all) = &outcomes[1];
    let change = b.get(&format!("/v1/changes/{c}")).await;
    assert_eq!(change["status"], "awaiting_approval", "{change:#}");
    let (sel, receipts) = selection_receipt(&b, c).await;
    assert_eq!(sel["outcome"]["decidedBy"], "person", "{receipts:#}");
    assert!(sel["outcome"]["winner"].is_null());
    assert!(
        sel["outcome"]["reason"]
            .as_str()
            .unwrap()
            .contains("which it was not shown"),
        "{receipts:#}"
    );
    for k in all {
        assert_eq!(k["status"], "verified", "no loser without a winner: {k:#}");
    }
    let judge_calls = fake
        .seen()
        .iter()
        .filter(|s| s.tool == "record_verdict" && s.model == SONNET)
        .count();
    assert_eq!(judge_calls, 2, "one Sonnet call per tie");
}

/// The Candidate's acceptance Evidence, judged (`checked_supported`) with `status`.
fn acceptance_judged(k: &Value, status: &str) -> Value {
    let acc = k["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["checkId"] == "acceptance")
        .cloned()
        .unwrap_or_else(|| panic!("no acceptance Evidence: {k:#}"));
    assert_eq!(
        (acc["status"].as_str(), acc["coverage"].as_str()),
        (Some(status), Some("checked_supported")),
        "{k:#}"
    );
    acc
}

const SORT: &str = "export function sortTitles(titles: string[]): string[] {\n  return [...titles].sort();\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_criteria_of_a_change_promoted_meanwhile_are_kept_a_kept_not_met_gets_the_repair_and_a_kept_unclear_does_not()
 {
    // Without the mark the request is the promoted Change's own; with it, the one that went on
    // meeting its own criterion judges the kept one not met (titles) or unclear (sorting).
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.tool != "record_acceptance" {
            return Reply::Status(400);
        }
        let cite = |path: &str, quote: &str| json!({"path": path, "quote": quote});
        if !s.user.contains("Keep (from an earlier request)") {
            return acceptance(
                json!([{"id": "c1", "result": "met", "citation": cite("src/stats.ts", "export function countTodos")}]),
            );
        }
        let (own, kept) = if s.user.contains("export function sortTitles") {
            (
                json!({"id": "c1", "result": "met", "citation": cite("src/sort.ts", "export function sortTitles")}),
                json!({"id": "c2", "result": "unclear", "reason": "nothing shows the count either way"}),
            )
        } else {
            (
                json!({"id": "c1", "result": "met", "citation": cite("src/export.ts", "export function todoTitles")}),
                json!({"id": "c2", "result": "not_met", "reason": "the count is gone"}),
            )
        };
        acceptance(json!([own, kept]))
    })
    .await;
    let env = fake.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = Belay::start_with_sandbox_env(&env, None).await;
    let project = sample_project(&b).await;
    let change = |criterion: &'static str| todo_helper_change(&b, &project, criterion);
    let verify = |c: String| {
        let b = &b;
        async move {
            let (s, k) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
            assert_eq!(s, 201, "{k}");
            k["id"].as_str().unwrap().to_owned()
        }
    };
    // Two requests run while a third goes live.
    let titles = change("A helper lists the todo titles").await;
    task(&b, &titles, "t1", &[], &[("src/export.ts", EXPORT)]).await;
    let sorting = change("A helper sorts the todo titles").await;
    task(&b, &sorting, "t1", &[], &[("src/sort.ts", SORT)]).await;
    let counting = change("A helper counts the todos").await;
    task(&b, &counting, "t1", &[], &[("src/stats.ts", STATS)]).await;
    let first = verify(counting.clone()).await;
    wait_status(&b, &first, "promoted").await;

    // Its criterion is judged again, marked, in the next request's acceptance check; not met
    // there, the Candidate cannot ship by itself: the Change gets its one repair, whose
    // objective names the kept criterion.
    let held = verify(titles.clone()).await;
    let k = wait_status(&b, &held, "verified").await;
    let Some(repair) = wait_repair(&b, &titles, Duration::from_secs(60), Duration::from_millis(200)).await else {
        panic!("no repair receipt: {:#}", b.get(&format!("/v1/changes/{titles}")).await);
    };
    assert!(
        repair["outcome"]["objective"]
            .as_str()
            .unwrap()
            .contains("A helper counts the todos"),
        "{repair:#}"
    );
    assert_eq!(b.get(&format!("/v1/changes/{titles}")).await["status"], "running");
    let acc = acceptance_judged(&k, "fail");
    assert!(
        acc["summary"]
            .as_str()
            .unwrap()
            .contains("kept criteria not met: A helper counts the todos"),
        "{acc:#}"
    );
    let judged = k["acceptance"].as_array().unwrap();
    assert_eq!(judged.len(), 2, "{k:#}");
    assert_eq!(
        (
            judged[1]["text"].as_str(),
            judged[1]["kept"].as_bool(),
            judged[1]["result"].as_str()
        ),
        (
            Some("Keep (from an earlier request): A helper counts the todos"),
            Some(true),
            Some("not_met")
        ),
        "{k:#}"
    );
    let seen = fake.seen();
    let asked: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.user.contains("A helper lists the todo titles"))
        .collect();
    assert_eq!(asked.len(), 1, "{seen:#?}");
    assert!(
        asked[0]
            .user
            .contains("- c2: Keep (from an earlier request): A helper counts the todos"),
        "{}",
        asked[0].user
    );

    // A kept criterion left unclear found no regression: it does not block.
    let shipped = verify(sorting.clone()).await;
    let k = wait_status(&b, &shipped, "promoted").await;
    acceptance_judged(&k, "pass");
    assert_eq!(k["acceptance"][1]["result"], "unclear", "{k:#}");
    // One Haiku call each; a kept `unclear` gets no second opinion.
    let seen = fake.seen();
    assert_eq!(seen.iter().filter(|s| s.model == HAIKU).count(), 3, "{seen:#?}");
    assert_eq!(seen.iter().filter(|s| s.model == SONNET).count(), 0, "{seen:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_integrate_rule_puts_the_ui_task_on_the_api_task_and_the_same_pair_again_forks() {
    let b = Belay::start_with_sandbox_env(&[], None).await;
    let project = sample_project(&b).await;
    let (s, c) = b
        .post(
            &format!("/v1/projects/{project}/changes"),
            json!({"goal": "Count the todos", "acceptanceCriteria": ["A helper counts the todos"], "invariants": [], "riskTier": "low"}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let c = c["id"].as_str().unwrap().to_string();
    const BANNER: &str = "export const banner = (n: number) => `${n} todos`;\n";
    let (api, api_cs) = task(&b, &c, "api", &["todos:api"], &[("src/stats.ts", STATS)]).await;
    let (ui, ui_cs) = task(&b, &c, "ui", &["todos:ui"], &[("public/banner.ts", BANNER)]).await;
    let side =
        |t: &Value, cs: &Value, path: &str| json!({"taskId": t["id"], "changeSetIds": [cs["id"]], "paths": [path]});

    // A confirmed conflict between a UI Task and an API Task is integrated: the UI Task comes to
    // depend on the API Task, its ChangeSet is rejected and the Task is reset.
    let (s, found) = b
        .post(
            &format!("/v1/changes/{c}/conflicts"),
            json!({"status": "confirmed", "sides": [side(&api, &api_cs, "src/stats.ts"), side(&ui, &ui_cs, "public/banner.ts")]}),
        )
        .await;
    assert_eq!(s, 201, "{found}");
    assert_eq!(found["integrate"]["dependent"], "ui", "{found}");
    assert_eq!(found["integrate"]["dependsOn"], "api", "{found}");
    let tasks = b.get(&format!("/v1/changes/{c}/tasks")).await;
    let of = |key: &str| {
        tasks
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["key"] == key)
            .unwrap()
            .clone()
    };
    assert_eq!(of("ui")["dependencies"], json!(["api"]), "{tasks}");
    assert_eq!(of("api")["dependencies"], json!([]), "{tasks}");
    assert_eq!(b.get(&format!("/v1/changes/{c}")).await["status"], "running");
    let receipts = b.get(&format!("/v1/changes/{c}/receipts")).await;
    let receipts = receipts.as_array().unwrap();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["kind"], "CONFLICT_INTEGRATION");
    assert_eq!(receipts[0]["outcome"]["rejectedChangeSets"], json!([ui_cs["id"]]));
    let events = b.get(&format!("/v1/events?entity={c}")).await;
    let kinds: Vec<&Value> = events.as_array().unwrap().iter().map(|e| &e["kind"]).collect();
    assert!(kinds.contains(&&json!("conflict.integrated")), "{events}");
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "task.reset" && e["payload"]["key"] == "ui"),
        "{events}"
    );

    // The UI Task runs again on top of the API; the same pair conflicting again is not
    // integrated a second time: the fork rule gives each side a Candidate of its own.
    let (s, r) = b
        .post(&format!("/v1/tasks/{}/runs", ui["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap();
    let (s, v) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/tools"),
            json!({"tool": "write_file", "path": "public/banner.ts", "content": BANNER.replace("todos", "to-dos")}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, ui_again) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": "ui again", "contractChanges": []}),
        )
        .await;
    assert_eq!(s, 201, "{ui_again}");
    let (s, again) = b
        .post(
            &format!("/v1/changes/{c}/conflicts"),
            json!({"status": "confirmed", "sides": [side(&api, &api_cs, "src/stats.ts"), side(&ui, &ui_again, "public/banner.ts")]}),
        )
        .await;
    assert_eq!(s, 201, "{again}");
    assert_eq!(again["integrate"], Value::Null, "{again}");
    assert_eq!(
        b.get(&format!("/v1/changes/{c}/receipts"))
            .await
            .as_array()
            .unwrap()
            .len(),
        1,
        "no second integration"
    );
    let (s, round) = b.post(&format!("/v1/changes/{c}/verification"), json!({})).await;
    assert_eq!(s, 201, "{round}");
    let candidates = b.get(&format!("/v1/changes/{c}/candidates")).await;
    let sets: Vec<&Value> = candidates
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["changeSetIds"])
        .collect();
    assert_eq!(sets.len(), 2, "one Candidate per side: {candidates}");
    assert!(
        sets.contains(&&json!([api_cs["id"]])),
        "the API side alone: {candidates}"
    );
    assert!(
        sets.iter().any(|ids| ids.as_array().unwrap().contains(&ui_again["id"])),
        "the UI side's new ChangeSet: {candidates}"
    );
    assert!(
        sets.iter().all(|ids| !ids.as_array().unwrap().contains(&ui_cs["id"])),
        "the rejected UI ChangeSet in neither: {candidates}"
    );
}

/// The Change's receipts of `kind`.
async fn receipts_of(b: &Belay, change: &str, kind: &str) -> Vec<Value> {
    let receipts = b.get(&format!("/v1/changes/{change}/receipts")).await;
    receipts
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == kind)
        .cloned()
        .collect()
}

/// The Change's first acceptance-repair receipt, asked for every `every` until `timeout`; `None`
/// when none came (the caller says what it saw instead).
async fn wait_repair(b: &Belay, change: &str, timeout: Duration, every: Duration) -> Option<Value> {
    poll_until(timeout, every, async || {
        receipts_of(b, change, "ACCEPTANCE_REPAIR")
            .await
            .first()
            .cloned()
            .ok_or(())
    })
    .await
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_criterion_not_met_on_a_candidate_that_passed_every_required_check_gets_one_repair_and_the_next_goes_to_a_person()
 {
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.tool != "record_acceptance" {
            return Reply::Status(400);
        }
        acceptance(Value::Array(judge_by_content(s)))
    })
    .await;
    let env = fake.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = Belay::start_with_sandbox_env(&env, None).await;
    let project = sample_project(&b).await;
    // The criterion asks for a count; the work lists titles instead: judged not met.
    let change = todo_helper_change(&b, &project, "A helper counts the todos").await;
    task(&b, &change, "t1", &[], &[("src/export.ts", EXPORT)]).await;
    let (s, k) = b.post(&format!("/v1/changes/{change}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    let first = k["id"].as_str().unwrap().to_owned();
    let Some(repair) = wait_repair(&b, &change, Duration::from_secs(300), Duration::from_millis(300)).await else {
        panic!("no repair: {:#}", b.get(&format!("/v1/candidates/{first}")).await);
    };
    let k = b.get(&format!("/v1/candidates/{first}")).await;
    assert!(
        k["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["checkId"] == "acceptance"),
        "every required check passed: {k:#}"
    );
    assert_eq!(k["acceptance"][0]["result"], "not_met", "{k:#}");
    let objective = repair["outcome"]["objective"].as_str().unwrap();
    assert!(
        objective.contains(&format!(
            "Candidate {first} passed every required check but does not meet these acceptance criteria:\n- A helper counts the todos"
        )),
        "{objective}"
    );
    assert_eq!(b.get(&format!("/v1/changes/{change}")).await["status"], "running");
    let tasks = b.get(&format!("/v1/changes/{change}/tasks")).await;
    let repairs: Vec<&Value> = tasks
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == "repair")
        .collect();
    assert_eq!(repairs.len(), 1, "{tasks:#}");
    assert_eq!(repairs[0]["dependencies"], json!(["t1"]), "{tasks:#}");
    let events = b.get(&format!("/v1/events?entity={change}")).await;
    let asked: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "task.repair_requested")
        .collect();
    assert_eq!(asked.len(), 1, "{events:#}");
    assert_eq!(asked[0]["payload"]["objective"], objective);
    // The lone Candidate's repair is a step of its verification, behind its marker; the
    // histories before it (a lone winner held for a person at once) still replay.
    let history = replays(&b, "verification-lone-acceptance-repair-v1", &format!("verify-{first}")).await;
    let patches = belay_client::replay::patches(&history).unwrap();
    assert!(
        patches.contains(&belay_workflows::verification::LONE_ACCEPTANCE_REPAIR.to_owned()),
        "{patches:?}"
    );
    assert!(String::from_utf8_lossy(&history).contains("db.verify_acceptance_repair"));

    // The repair Task runs and publishes; the next Candidate holds it and falls short again: a
    // person decides, and there is no second repair.
    let (s, r) = b
        .post(
            &format!("/v1/tasks/{}/runs", repairs[0]["id"].as_str().unwrap()),
            json!({}),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    let run = r["id"].as_str().unwrap();
    let (s, v) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/tools"),
            json!({"tool": "write_file", "path": "src/titles.ts", "content": EXPORT}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, fixed) = b
        .post(
            &format!("/v1/task-runs/{run}/workspace/publish"),
            json!({"message": "repair", "contractChanges": []}),
        )
        .await;
    assert_eq!(s, 201, "{fixed}");
    let (s, k) = b.post(&format!("/v1/changes/{change}/verification"), json!({})).await;
    assert_eq!(s, 201, "{k}");
    let second = k["id"].as_str().unwrap().to_owned();
    assert_ne!(second, first);
    assert!(
        k["changeSetIds"].as_array().unwrap().contains(&fixed["id"]),
        "the next Candidate holds the repair: {k:#}"
    );
    let awaiting = poll_until(Duration::from_secs(300), Duration::from_millis(300), async || {
        let status = b.get(&format!("/v1/changes/{change}")).await["status"].clone();
        if status == "awaiting_approval" {
            Ok(())
        } else {
            Err(status)
        }
    })
    .await;
    if awaiting.is_err() {
        let k = b.get(&format!("/v1/candidates/{second}")).await;
        let checks: Vec<(Value, Value)> = k["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["checkId"].clone(), e["status"].clone()))
            .collect();
        panic!(
            "change {}; second {} ({}), gaps {}, checks {checks:?}; first {}; events {:#}",
            b.get(&format!("/v1/changes/{change}")).await["status"],
            k["status"],
            k["statusReason"],
            k["gaps"],
            b.get(&format!("/v1/candidates/{first}")).await["status"],
            b.get(&format!("/v1/events?entity={change}")).await
        );
    }
    let tasks = b.get(&format!("/v1/changes/{change}/tasks")).await;
    assert_eq!(
        tasks
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["key"] == "repair")
            .count(),
        1,
        "{tasks:#}"
    );
    assert_eq!(receipts_of(&b, &change, "ACCEPTANCE_REPAIR").await.len(), 1);
    let events = b.get(&format!("/v1/events?entity={second}")).await;
    let person: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "approval.requested")
        .collect();
    assert_eq!(person.len(), 1, "{events:#}");
    assert_eq!(person[0]["payload"]["changeId"], change.as_str());
    assert_eq!(person[0]["payload"]["trigger"], "acceptance", "{person:#?}");
    // holdForAcceptance: the human gate on its plan, the reason on the Candidate and the event.
    let k = b.get(&format!("/v1/candidates/{second}")).await;
    let reason = person[0]["payload"]["reason"].as_str().unwrap();
    assert!(!reason.is_empty(), "{person:#?}");
    assert_eq!(k["statusReason"].as_str(), Some(reason), "{k:#}");
}
