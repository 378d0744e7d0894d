//! Approving from a diff: the patch a person approves, read through the API file by file (status,
//! hunks, both sides' line numbers, the acceptance check's citations on the lines they quote), and
//! the Candidate page in the real Chromium showing it with the cited quotes marked and only the
//! gestures the Candidate's state allows: Approve and Reject while a person is asked, nothing once
//! the Candidate is rejected.

use crate::common::Belay;
use crate::common::fake_anthropic::{FakeAnthropic, Reply, Seen, acceptance};
use crate::common::sample;
use crate::console::Console;
use serde_json::{Value, json};

const LIST: &str = "    return [...this.todos.values()];\n";
const LIST_SORTED: &str = "    return [...this.todos.values()].sort((a, b) => a.id - b.id);\n";
const COUNT: &str = "  count(): number {\n    return this.todos.size;\n  }\n\n  remove(id: number): boolean {";
const STATS: &str = "export function countDone(todos: { done: boolean }[]): number {\n  return todos.filter((t) => t.done).length;\n}\n";
/// The model's quote of the store: two lines, with other indentation than the file's.
const STORE_QUOTE: &str = "count(): number {\n  return this.todos.size;";
const STATS_QUOTE: &str = "export function countDone";

/// Where the composition commits the client bundle it builds.
const BUILT: &str = "public/assets/";

/// The 1-based number of the line of `text` that starts with `line` (after its indentation).
fn line_of(text: &str, line: &str) -> u64 {
    text.lines()
        .position(|l| l.trim_start().starts_with(line.trim()))
        .unwrap_or_else(|| panic!("no line {line:?} in {text}")) as u64
        + 1
}

fn file<'a>(diff: &'a Value, path: &str) -> &'a Value {
    diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("no file {path} in {diff:#}"))
}

/// The lines of a file's hunks as (kind, old, new, text).
fn lines(f: &Value) -> Vec<(String, Option<u64>, Option<u64>, String)> {
    f["hunks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|h| h["lines"].as_array().unwrap().clone())
        .map(|l| {
            (
                l["kind"].as_str().unwrap().to_owned(),
                l["oldLine"].as_u64(),
                l["newLine"].as_u64(),
                l["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidates_diff_shows_its_cited_quotes_and_a_rejected_candidate_offers_no_approve() {
    // The model finds each criterion met and cites it: the store's new method across two lines,
    // the new helper's signature.
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.tool != "record_acceptance" {
            return Reply::Status(400);
        }
        acceptance(json!([
            {"id": "c1", "result": "met", "citation": {"path": "src/store.ts", "quote": STORE_QUOTE}},
            {"id": "c2", "result": "met", "citation": {"path": "src/stats.ts", "quote": STATS_QUOTE}},
        ]))
    })
    .await;
    let env = fake.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = Belay::start_with_sandbox_env(&env, None).await;
    let project = sample::sample_project(&b).await;
    let store_before = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sample-app/src/store.ts"),
    )
    .unwrap();
    let store_after = store_before
        .replace(LIST, LIST_SORTED)
        .replace("  remove(id: number): boolean {", COUNT);
    assert_ne!(store_before, store_after);
    // High risk: the Candidate waits on a person.
    let c = sample::change(
        &b,
        &project,
        json!({"goal": "Count the todos", "acceptanceCriteria": ["The store counts its todos", "A helper counts the done todos"],
               "invariants": [], "riskTier": "high"}),
    )
    .await;
    sample::task(
        &b,
        &c,
        "t1",
        &[
            json!({"tool": "edit_file", "path": "src/store.ts", "oldText": LIST, "newText": LIST_SORTED}),
            json!({"tool": "edit_file", "path": "src/store.ts", "oldText": "  remove(id: number): boolean {", "newText": COUNT}),
            sample::write("src/stats.ts", STATS),
        ],
    )
    .await;
    let k = sample::start_verification(&b, &c).await;
    let verified = sample::wait_candidate(&b, &k, &["verified", "rejected", "stale", "promoted"]).await;
    assert_eq!(verified["status"], "verified", "{verified:#}");
    let waiting = crate::common::wait_until_every(
        "the approval to be requested",
        std::time::Duration::from_secs(300),
        std::time::Duration::from_millis(300),
        async || {
            let k = b.get(&format!("/v1/candidates/{k}")).await;
            if k["gestures"] == json!(["approve", "reject"]) {
                Ok(k)
            } else {
                Err(k)
            }
        },
    )
    .await;
    let criteria: Vec<(&str, &str)> = waiting["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["result"].as_str().unwrap()))
        .collect();
    assert_eq!(criteria, vec![("c1", "met"), ("c2", "met")], "{waiting:#}");

    // The diff through the API: the two files, by path, with their statuses and line numbers.
    let diff = b.get(&format!("/v1/candidates/{k}/diff")).await;
    assert_eq!(diff["baseCommit"], waiting["baseCommit"]);
    assert_eq!(diff["composedCommit"], waiting["composedCommit"]);
    assert_eq!(diff["truncated"], false);
    let listed: Vec<(&str, &str)> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    // The Task's two files, and the client bundle the composition builds and commits with them.
    let (ours, built): (Vec<_>, Vec<_>) = listed.iter().copied().partition(|(p, _)| !p.starts_with(BUILT));
    assert_eq!(
        ours,
        vec![("src/stats.ts", "added"), ("src/store.ts", "modified")],
        "{diff:#}"
    );
    assert!(built.iter().all(|(_, s)| *s == "added"), "{built:?}");
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "files are ordered by path");

    let stats = file(&diff, "src/stats.ts");
    assert_eq!(
        (stats["additions"].as_u64(), stats["deletions"].as_u64()),
        (Some(3), Some(0))
    );
    let added = lines(stats);
    assert_eq!(
        added.iter().map(|l| (l.0.as_str(), l.1, l.2)).collect::<Vec<_>>(),
        vec![
            ("added", None, Some(1)),
            ("added", None, Some(2)),
            ("added", None, Some(3))
        ]
    );
    assert_eq!(added[0].3, STATS.lines().next().unwrap());

    let store = file(&diff, "src/store.ts");
    assert_eq!(
        (store["additions"].as_u64(), store["deletions"].as_u64()),
        (Some(5), Some(1)),
        "{store:#}"
    );
    let store_lines = lines(store);
    // The modified line: removed at its old number, added at its new one.
    let list_at = line_of(&store_before, LIST);
    assert!(
        store_lines.contains(&("removed".into(), Some(list_at), None, LIST.trim_end().into())),
        "{store_lines:#?}"
    );
    assert!(
        store_lines.contains(&("added".into(), None, Some(list_at), LIST_SORTED.trim_end().into())),
        "{store_lines:#?}"
    );
    // The inserted method at its place in the composed file; a context line keeps both numbers.
    let count_at = line_of(&store_after, "count(): number {");
    assert!(
        store_lines.contains(&("added".into(), None, Some(count_at), "  count(): number {".into())),
        "{store_lines:#?}"
    );
    let remove_old = line_of(&store_before, "remove(id: number): boolean {");
    let remove_new = line_of(&store_after, "remove(id: number): boolean {");
    assert_eq!(remove_new, remove_old + 4);
    assert!(
        store_lines.contains(&(
            "context".into(),
            Some(remove_old),
            Some(remove_new),
            "  remove(id: number): boolean {".into()
        )),
        "{store_lines:#?}"
    );
    // Every hunk's header agrees with its lines.
    for f in diff["files"].as_array().unwrap() {
        for h in f["hunks"].as_array().unwrap() {
            let n = |kinds: &[&str]| {
                h["lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|l| kinds.contains(&l["kind"].as_str().unwrap()))
                    .count() as u64
            };
            assert_eq!(h["oldLines"].as_u64(), Some(n(&["context", "removed"])), "{h:#}");
            assert_eq!(h["newLines"].as_u64(), Some(n(&["context", "added"])), "{h:#}");
        }
    }
    // The citations: on their files, found, and on exactly the lines they quote.
    let cited = |f: &Value| -> Vec<u64> {
        f["hunks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h["lines"].as_array().unwrap().clone())
            .filter(|l| l["citedBy"].as_array().is_some_and(|c| !c.is_empty()))
            .map(|l| l["newLine"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(cited(store), vec![count_at, count_at + 1], "{store:#}");
    assert_eq!(store["citations"][0]["criterionId"], "c1");
    assert_eq!(store["citations"][0]["found"], true);
    assert_eq!(cited(stats), vec![1]);

    // Not found: an unknown Candidate, another account's, no token; and the route is documented.
    let (s, v) = b
        .request("GET", "/v1/candidates/cand_000000000000/diff", Some(&b.token), None)
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
    let (s, v) = b
        .request("GET", "/v1/candidates/not-a-candidate/diff", Some(&b.token), None)
        .await;
    assert!((400..500).contains(&s) && v["error"]["message"].is_string(), "{s} {v}");
    let (_, bob) = b.store().await.create_account("bob").await.unwrap();
    let (s, v) = b
        .request("GET", &format!("/v1/candidates/{k}/diff"), Some(&bob), None)
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
    let (s, _) = b.request("GET", &format!("/v1/candidates/{k}/diff"), None, None).await;
    assert_eq!(s, 401);
    let doc = b.get("/v1/openapi.json").await;
    let op = &doc["paths"]["/v1/candidates/{id}/diff"]["get"];
    assert!(op["responses"]["404"].is_object(), "{op:#}");
    assert!(doc["components"]["schemas"]["CandidateDiff"].is_object());

    // The page: the patch file by file, the cited file and quotes marked, Approve and Reject
    // offered and Promote not (a person has to look first).
    let con = Console::open(&b.url).await;
    con.sign_in(&b.token).await;
    con.visit(&format!("/candidates/{k}")).await;
    assert_eq!(con.count("#diff section.file").await, listed.len());
    let sections: Vec<(String, String, bool)> = con
        .eval(&format!(
            "[...document.querySelectorAll('#diff section.file')].filter((s) => !s.dataset.path.startsWith({})).map((s) => \
               [s.dataset.path, s.dataset.status, s.classList.contains('cited')])",
            json!(BUILT)
        ))
        .await;
    assert_eq!(
        sections,
        vec![
            ("src/stats.ts".to_owned(), "added".to_owned(), true),
            ("src/store.ts".to_owned(), "modified".to_owned(), true)
        ]
    );
    let store_css = "#diff section.file[data-path='src/store.ts']";
    let cited_rows: Vec<(String, String, String)> = con
        .eval(&format!(
            "[...document.querySelectorAll(\"{store_css} tr.line.cited\")].map((r) => \
               [r.dataset.new, r.querySelector('td.code').textContent, r.querySelector('mark.quote').textContent])"
        ))
        .await;
    assert_eq!(
        cited_rows,
        vec![
            (
                count_at.to_string(),
                "  count(): number {".to_owned(),
                "count(): number {".to_owned()
            ),
            (
                (count_at + 1).to_string(),
                "    return this.todos.size;".to_owned(),
                "return this.todos.size;".to_owned()
            ),
        ]
    );
    // The highlight is visible: a cited row is not drawn like an ordinary added line.
    let (cited_bg, added_bg): (String, String) = con
        .eval(&format!(
            "[getComputedStyle(document.querySelector(\"{store_css} tr.line.cited td.code\")).backgroundColor, \
              getComputedStyle(document.querySelector(\"{store_css} tr.line.added:not(.cited) td.code\")).backgroundColor]"
        ))
        .await;
    assert_ne!(cited_bg, added_bg);
    // Removed and added lines with their numbers on each side.
    let removed: Vec<(String, String, String)> = con
        .eval(&format!(
            "[...document.querySelectorAll(\"{store_css} tr.line.removed\")].map((r) => \
               [r.children[0].textContent, r.children[1].textContent, r.children[3].textContent])"
        ))
        .await;
    assert_eq!(
        removed,
        vec![(list_at.to_string(), String::new(), LIST.trim_end().to_owned())]
    );
    // The acceptance table leads to the file its citation names.
    assert_eq!(
        con.count("#acceptance a.cite[href='#file-src_2Fstore.ts']").await,
        1,
        "{}",
        con.text("#acceptance").await
    );
    assert_eq!(con.count("#grant").await, 1);
    assert_eq!(con.count("#reject").await, 1);
    assert_eq!(con.count("#promote").await, 0);
    // No raw JSON or internal codes in what the page itself writes (a check's output and the
    // patch's own lines are quoted as they are).
    let words: String = con
        .eval(
            "(() => { const m = document.querySelector('main').cloneNode(true); \
               m.querySelectorAll('pre.tail, td.code, code, mark').forEach((e) => e.remove()); return m.textContent; })()",
        )
        .await;
    for raw in [
        "{\"",
        "\":",
        "checked_supported",
        "approval_granted_or_not_required",
        "awaiting_approval",
    ] {
        assert!(!words.contains(raw), "{raw} on the page: {words}");
    }
    con.screenshot("candidate-diff").await;

    // A person rejects: the page follows the Candidate's new state, and offers nothing more.
    con.type_into("#approval-reason", "Keep the store unsorted").await;
    con.click("#reject").await;
    con.until("the decision", "!!document.querySelector('#decision-answer')")
        .await;
    assert_eq!(con.text("#decision-answer").await, "Recorded: rejected.");
    con.until(
        "the rejected Candidate's gestures",
        "!!document.querySelector('#no-gestures')",
    )
    .await;
    assert_eq!(con.text("#candidate-status").await, "rejected");
    for gesture in ["#grant", "#reject", "#promote"] {
        assert_eq!(con.count(gesture).await, 0, "{gesture} offered on a rejected Candidate");
    }
    let rejected = b.get(&format!("/v1/candidates/{k}")).await;
    assert_eq!(
        (rejected["status"].as_str(), &rejected["gestures"]),
        (Some("rejected"), &json!([])),
        "{rejected:#}"
    );
    // Read again from the start: still no gesture, and the patch is still there to read.
    con.visit(&format!("/candidates/{k}")).await;
    for gesture in ["#grant", "#reject", "#promote"] {
        assert_eq!(con.count(gesture).await, 0, "{gesture} offered on a rejected Candidate");
    }
    assert!(con.text("#no-gestures").await.contains("rejected"));
    assert_eq!(con.count("#diff section.file").await, listed.len());
    con.screenshot("candidate-diff-rejected").await;
    con.assert_clean("after the rejection");
    con.close().await;
}
