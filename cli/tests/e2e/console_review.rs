//! Reviewing in the console as a reviewer does, in the real Chromium against a real `belay`: the
//! queue shows a cell's repeats side by side and is rated from the keyboard alone (the key
//! presses are the test's only input for rating), the next cell follows, and Back returns to a
//! cell already rated to revise it; a run's own page shows its pin, combination, attempts,
//! manifest and every account's review, and revising there recomputes the worst domain; a case
//! version's declared review domains are the ones offered, and bad ones are refused by name.

use crate::common::{Belay, create_account, wait_until, wait_until_every};
use crate::console::Console;
use serde_json::{Value, json};
use std::time::Duration;

/// A harness whose runs each keep a small HTML build.
const BUILD: &str = "printf '<h1>Build</h1><p>a small game</p>' > index.html\n\
     printf '{\"status\":\"completed\",\"loaded\":true,\"artifacts\":[\"index.html\"]}' > manifest.json";

fn pin(slug: &str) -> Value {
    json!({"slug": slug, "version": "1.0.0", "variant": "default"})
}

/// Tops the plan up and waits until its queue holds `runs` runs; returns the queue.
async fn filled_queue(b: &Belay, plan: &str, runs: usize) -> Value {
    let (s, v) = b.post(&format!("/v1/coverage-plans/{plan}/topup"), json!({})).await;
    assert_eq!(s, 200, "{v}");
    wait_until_every(
        "the plan's runs to complete",
        Duration::from_secs(120),
        Duration::from_millis(250),
        async || {
            let q = b.get(&format!("/v1/coverage-plans/{plan}/queue")).await;
            if q["runs"].as_array().map(Vec::len) == Some(runs) {
                Ok(q)
            } else {
                Err(q)
            }
        },
    )
    .await
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// My review of `run`, once there is one.
async fn my_review(b: &Belay, run: &str, me: &str) -> Value {
    wait_until(&format!("my review of {run}"), Duration::from_secs(30), async || {
        let reviews = b.get(&format!("/v1/runs/{run}/reviews")).await;
        match reviews
            .as_array()
            .and_then(|r| r.iter().find(|rv| rv["accountId"] == me))
        {
            Some(rv) => Ok(rv.clone()),
            None => Err(reviews),
        }
    })
    .await
}

/// The run the focused element belongs to.
const FOCUSED_RUN: &str = "(() => { const s = document.activeElement && document.activeElement.closest('section.repeat'); return s ? s.dataset.run : ''; })()";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cells_three_repeats_are_rated_side_by_side_from_the_keyboard_and_the_next_cell_follows() {
    // Builds play from an artifact origin (console_play.rs).
    let (b, artifacts) = crate::console_play::belay_with_artifacts(900).await;
    b.catalogue().await;
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    b.harness("h", 6, BUILD).await;
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({
                "name": "side by side",
                "cases": [pin("c"), pin("d")],
                "combinations": [{"kind": "harness", "harness": "h", "model": "m"}],
                "runsPerCell": 3,
                "bufferTarget": {"kind": "bounded", "runs": 6},
                "autoTopUp": false
            }),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_string();
    let q = filled_queue(&b, &plan, 6).await;
    // The queue groups each cell's repeats, in emission order.
    let cells = q["cells"].as_array().unwrap().clone();
    assert_eq!(cells.len(), 2, "{q}");
    let first = strings(&cells[0]["runs"]);
    let second = strings(&cells[1]["runs"]);
    assert_eq!((first.len(), second.len()), (3, 3), "{q}");
    assert_eq!([first.clone(), second.clone()].concat(), strings(&q["runs"]));
    let me = b.get("/v1/account").await["id"].as_str().unwrap().to_string();

    let c = Console::open_allowing(&b.url, std::slice::from_ref(&artifacts)).await;
    c.sign_in(&b.token).await;
    c.visit(&format!("/plans/{plan}/queue")).await;
    assert!(
        c.text("#queue-count").await.starts_with("6 runs"),
        "{}",
        c.text("#queue-count").await
    );
    // The first cell's three repeats at once, side by side, each with its build.
    let shown: Vec<String> = c
        .eval("[...document.querySelectorAll('section.repeat')].map((s) => s.dataset.run)")
        .await;
    assert_eq!(shown, first, "the first cell's repeats, in the order they ran");
    let tops: Vec<f64> = c
        .eval("[...document.querySelectorAll('section.repeat')].map((s) => s.getBoundingClientRect().top)")
        .await;
    assert!(
        tops.iter().all(|t| *t == tops[0]),
        "side by side, not stacked: {tops:?}"
    );
    // Each repeat shows its facts, its verdict and its build (the artifact view after them).
    let parts: Vec<usize> = c
        .eval("[...document.querySelectorAll('section.repeat')].map((s) => s.children.length)")
        .await;
    assert!(parts.iter().all(|n| *n >= 4), "{parts:?}");
    // Every control of the review shows its key.
    let unkeyed: Vec<String> = c
        .eval(
            "[...document.querySelectorAll('#cell-nav button, section.repeat form button')]\
             .filter((b) => !b.querySelector('kbd')).map((b) => b.textContent)",
        )
        .await;
    assert!(unkeyed.is_empty(), "controls without a key: {unkeyed:?}");
    assert!(c.text("#keys").await.contains("Enter submit and move on"));
    c.screenshot("review-cell-side-by-side").await;

    // Keyboard alone: focus starts on the first repeat's rating; a number chooses, Enter submits
    // and moves to the next repeat; after the third, the next cell.
    for (run, key, want) in [
        (&first[0], "5", "flawless"),
        (&first[1], "2", "scuffed"),
        (&first[2], "3", "passable"),
    ] {
        c.until(
            "focus on the repeat to rate",
            &format!("{FOCUSED_RUN} === {}", json!(run)),
        )
        .await;
        assert_eq!(c.eval::<String>("document.activeElement.className").await, "choice");
        c.key(key).await;
        c.key("Enter").await;
        let rv = my_review(&b, run, &me).await;
        assert_eq!(rv["ratings"], json!({"overall": want}), "{rv}");
    }
    c.until(
        "the next cell",
        &format!(
            "!!document.querySelector('#cell') && document.querySelector('#cell').dataset.cell === {}",
            cells[1]["cellKey"]
        ),
    )
    .await;
    let shown: Vec<String> = c
        .eval("[...document.querySelectorAll('section.repeat')].map((s) => s.dataset.run)")
        .await;
    assert_eq!(shown, second, "the second cell's repeats");
    assert_eq!(
        &c.eval::<String>(FOCUSED_RUN).await,
        &second[0],
        "focus starts on its rating"
    );
    assert!(
        c.text("#queue-count").await.starts_with("3 runs"),
        "{}",
        c.text("#queue-count").await
    );
    let q = b.get(&format!("/v1/coverage-plans/{plan}/queue")).await;
    assert_eq!(strings(&q["runs"]), second, "the first cell left the queue: {q}");

    // Back (B) shows the first cell with the reviews given; R revises one, from the keyboard.
    c.key("b").await;
    c.until(
        "the first cell again",
        &format!(
            "document.querySelector('#cell').dataset.cell === {}",
            cells[0]["cellKey"]
        ),
    )
    .await;
    assert_eq!(c.count("section.repeat[data-reviewed=true] .mine").await, 3);
    assert!(
        c.text(&format!("section.repeat[data-run='{}'] .mine", first[1]))
            .await
            .contains("overall: scuffed")
    );
    c.key("r").await;
    assert_eq!(
        &c.eval::<String>(FOCUSED_RUN).await,
        &first[0],
        "revising the focused repeat"
    );
    c.key("1").await;
    c.key("Enter").await;
    wait_until("the revised review", Duration::from_secs(30), async || {
        let rv = my_review(&b, &first[0], &me).await;
        if rv["ratings"] == json!({"overall": "broken"}) {
            Ok(())
        } else {
            Err(rv)
        }
    })
    .await;
    c.until(
        "the revision shown",
        &format!(
            "document.querySelector(\"section.repeat[data-run='{}'] .mine\") && document.querySelector(\"section.repeat[data-run='{}'] .mine\").dataset.worst === 'broken'",
            first[0], first[0]
        ),
    )
    .await;
    // Skip (S) from a cell walked before goes forward again, to the second cell.
    c.key("s").await;
    c.until(
        "the second cell again",
        &format!(
            "document.querySelector('#cell').dataset.cell === {}",
            cells[1]["cellKey"]
        ),
    )
    .await;
    assert_eq!(c.count("section.repeat[data-reviewed=false]").await, 3);
    c.assert_clean("after the keyboard walk");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_review_revised_from_the_run_page_recomputes_the_worst_domain_the_versions_domains_offered() {
    // Builds play from an artifact origin (console_play.rs).
    let (b, artifacts) = crate::console_play::belay_with_artifacts(900).await;
    b.catalogue().await;
    // Declared review domains are checked by name, and a refusal changes nothing.
    for (domains, field) in [
        (json!([]), "reviewDomains"),
        (json!(["gameplay", "Visuals"]), "reviewDomains[1]"),
        (json!(["gameplay", "gameplay"]), "reviewDomains[1]"),
        (json!("gameplay"), "reviewDomains"),
    ] {
        let (s, v) = b
            .post(
                "/v1/test-cases",
                json!({"slug": "maze", "version": "1.0.0", "testType": "standard", "variants": ["default"], "reviewDomains": domains}),
            )
            .await;
        assert!((400..500).contains(&s), "{domains}: {s} {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{domains}: the error names {field}: {v}");
    }
    let (s, v) = b.request("GET", "/v1/test-cases/maze", Some(&b.token), None).await;
    assert_eq!(s, 404, "nothing was ingested: {v}");
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "maze", "version": "1.0.0", "testType": "standard", "variants": ["default"],
                   "reviewDomains": ["gameplay", "visuals"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["reviewDomains"], json!(["gameplay", "visuals"]), "{v}");
    let version = b.get("/v1/test-cases/maze").await;
    assert_eq!(
        version["versions"][0]["reviewDomains"],
        json!(["gameplay", "visuals"]),
        "{version}"
    );

    // A game-jam case too, even declaring domains: its runs take a category, never ratings.
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "jam", "version": "1.0.0", "testType": "game_jam", "variants": ["default"],
                   "reviewDomains": ["fun"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    b.harness("h", 4, BUILD).await;
    let (s, plan) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "maze", "cases": [pin("maze"), pin("c"), pin("jam")],
                   "combinations": [{"kind": "harness", "harness": "h", "model": "m"}],
                   "runsPerCell": 1, "bufferTarget": {"kind": "bounded", "runs": 3}, "autoTopUp": false}),
        )
        .await;
    assert_eq!(s, 201, "{plan}");
    let plan = plan["id"].as_str().unwrap().to_string();
    let q = filled_queue(&b, &plan, 3).await;
    // The two cells' runs: the declared version's, and the other's.
    let cells = q["cells"].as_array().unwrap();
    let mut maze = String::new();
    let mut other_run = String::new();
    let mut jam = String::new();
    for cell in cells {
        let run = cell["runs"][0].as_str().unwrap().to_string();
        match b.get(&format!("/v1/runs/{run}")).await["case"]["slug"].as_str() {
            Some("maze") => maze = run,
            Some("jam") => jam = run,
            _ => other_run = run,
        }
    }
    assert!(!maze.is_empty() && !other_run.is_empty() && !jam.is_empty(), "{q}");
    let me = b.get("/v1/account").await["id"].as_str().unwrap().to_string();

    // The API offers the version's domains; a version declaring none offers the reviewer's own.
    let offered = b.get(&format!("/v1/runs/{maze}/review-domains")).await;
    assert_eq!(
        offered,
        json!({"domains": ["gameplay", "visuals"], "source": "case_version"})
    );

    // Two reviewers: the run's rating is the worst domain across both.
    let other = create_account(&b.database_url, "second");
    let (s, v) = b
        .request(
            "POST",
            &format!("/v1/runs/{maze}/review"),
            Some(&other),
            Some(&json!({"ratings": {"gameplay": "great", "visuals": "passable"}}).to_string()),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = b
        .post(
            &format!("/v1/runs/{maze}/review"),
            json!({"ratings": {"gameplay": "flawless", "visuals": "great"}, "note": "smooth"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(b.get(&format!("/v1/runs/{maze}")).await["rating"], "passable");

    let c = Console::open_allowing(&b.url, std::slice::from_ref(&artifacts)).await;
    c.sign_in(&b.token).await;
    c.visit(&format!("/runs/{maze}")).await;
    assert_eq!(c.text("#run-pin").await, "maze@1.0.0/default (none)");
    assert_eq!(c.text("#run-combination").await, "h · m");
    assert_eq!(c.count("#attempts tbody tr").await, 1);
    let attempts = c.text("#attempts").await;
    assert!(
        attempts.contains("completed") && attempts.contains("exit 0"),
        "{attempts}"
    );
    assert!(c.text("#manifest").await.contains("index.html"));
    assert_eq!(c.count("#reviews tbody tr").await, 2);
    assert_eq!(
        c.eval::<String>(&format!(
            "document.querySelector(\"#reviews tr[data-account='{me}'] .worst\").textContent"
        ))
        .await,
        "great (visuals)",
        "my review's worst domain"
    );
    assert_eq!(
        c.eval::<String>("document.querySelector('#run-rating').dataset.rating")
            .await,
        "passable",
        "the worst domain across every reviewer"
    );
    let main: String = c.eval("document.querySelector('#main').innerText").await;
    assert!(
        !main.contains("{\"") && !main.contains("\":"),
        "raw JSON on the run page: {main}"
    );
    c.screenshot("run-page").await;

    // Revise from the keyboard: R opens my review with the version's domains, 1 rates gameplay
    // broken and moves to visuals, Enter submits.
    c.key("r").await;
    c.until("the review form", "!!document.querySelector('#run-review-form')")
        .await;
    let domains: Vec<String> = c
        .eval("[...document.querySelectorAll('#run-review-form .domain-name')].map((d) => d.textContent)")
        .await;
    assert_eq!(domains, ["gameplay", "visuals"], "the case version's domains");
    assert_eq!(
        c.eval::<String>("document.activeElement.dataset.name").await,
        "gameplay"
    );
    c.key("1").await;
    assert_eq!(c.eval::<String>("document.activeElement.dataset.name").await, "visuals");
    c.key("Enter").await;
    c.until(
        "the page recomputed",
        "document.querySelector('#run-rating') && document.querySelector('#run-rating').dataset.rating === 'broken'",
    )
    .await;
    let rv = my_review(&b, &maze, &me).await;
    assert_eq!(rv["ratings"], json!({"gameplay": "broken", "visuals": "great"}), "{rv}");
    assert_eq!(rv["note"], "smooth", "the note is kept");
    assert_eq!(b.get(&format!("/v1/runs/{maze}")).await["rating"], "broken");
    assert_eq!(
        c.eval::<String>(&format!(
            "document.querySelector(\"#reviews tr[data-account='{me}'] .worst\").textContent"
        ))
        .await,
        "broken (gameplay)"
    );
    c.screenshot("run-page-revised").await;

    // A version that declares none: the queue offers the reviewer's remembered domains, kept
    // server-side from their last review of such a version.
    let offered = b.get(&format!("/v1/runs/{other_run}/review-domains")).await;
    assert_eq!(offered, json!({"domains": ["overall"], "source": "default"}));
    let (s, v) = b
        .post(
            &format!("/v1/runs/{other_run}/review"),
            json!({"ratings": {"feel": "great", "sound": "passable"}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let offered = b.get(&format!("/v1/runs/{other_run}/review-domains")).await;
    assert_eq!(offered, json!({"domains": ["feel", "sound"], "source": "remembered"}));
    c.visit(&format!("/runs/{other_run}")).await;
    c.key("r").await;
    c.until("the review form", "!!document.querySelector('#run-review-form')")
        .await;
    let domains: Vec<String> = c
        .eval("[...document.querySelectorAll('#run-review-form .domain-name')].map((d) => d.textContent)")
        .await;
    assert_eq!(domains, ["feel", "sound"], "the reviewer's remembered domains");

    // A game-jam run: the number keys choose its category, 1 = 💩 … 5 = 💎.
    let offered = b.get(&format!("/v1/runs/{jam}/review-domains")).await;
    assert_eq!(offered, json!({"domains": [], "source": "none"}));
    c.visit(&format!("/runs/{jam}")).await;
    c.key("r").await;
    c.until("the review form", "!!document.querySelector('#run-review-form')")
        .await;
    assert_eq!(c.count("#run-review-form .domain-name").await, 0, "no domains");
    assert_eq!(
        c.eval::<String>("document.activeElement.dataset.name").await,
        "category"
    );
    c.key("4").await;
    c.key("Enter").await;
    c.until(
        "the category shown",
        "document.querySelector('#run-rating') && document.querySelector('#run-rating').dataset.rating === 'gold'",
    )
    .await;
    let rv = my_review(&b, &jam, &me).await;
    assert_eq!(
        (rv["category"].clone(), rv["ratings"].clone()),
        (json!("gold"), Value::Null),
        "{rv}"
    );
    assert!(
        c.text("#reviews").await.contains("🥇 gold"),
        "{}",
        c.text("#reviews").await
    );
    c.assert_clean("after the run pages");
    c.close().await;
}
