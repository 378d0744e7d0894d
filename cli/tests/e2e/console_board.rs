//! The ladder board's controls and the silent failures they used to have, in a real Chromium
//! against real `belay` processes: every ladder control the API has (the gate, runs per rung,
//! auto top-up, the buffer target, the rung order, Halt all behind its confirmation), a filter by
//! state and tallies on demand; a bound left empty or refused, a clamped bound, a refused
//! priority, and a page whose entity is missing each say so.

use crate::common::Belay;
use crate::console::Console;
use serde_json::{Value, json};

const SLOW_SCRIPT: &str = r#"sleep 600; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

async fn ingest(b: &Belay, slug: &str) {
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": slug, "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
}

fn pin(slug: &str) -> Value {
    json!({"slug": slug, "version": "1.0.0", "variant": "default"})
}

async fn ladder(b: &Belay, id: &str) -> Value {
    b.get(&format!("/v1/ladders/{id}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_ladder_control_answers_with_what_was_stored_and_the_board_filters_by_state() {
    let b = Belay::start().await;
    b.catalogue().await;
    ingest(&b, "d").await;
    b.harness("x", 100, SLOW_SCRIPT).await;
    b.harness("y", 100, SLOW_SCRIPT).await;
    let (s, l) = b
        .post(
            "/v1/ladders",
            json!({"name": "controls", "rungs": [pin("c"), pin("d")],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"},
                                    {"kind": "harness", "harness": "y", "model": "m"}],
                   "runsPerCell": 1, "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
    assert_eq!(s, 201, "{l}");
    let id = l["id"].as_str().unwrap().to_owned();
    let page = format!("/ladders/{id}");
    let c = Console::open(&b.url).await;
    c.sign_in(&b.token).await;
    c.visit(&page).await;

    // The gate and runs per rung: checked before they are sent, confirmed with what was stored.
    c.eval::<bool>("(() => { document.querySelector('#gate-amount').value = ''; return true; })()")
        .await;
    c.click("#ladder-settings-save").await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#ladder-settings-note').dataset.outcome")
            .await,
        "refused"
    );
    assert!(c.text("#ladder-settings-note").await.contains("gate.threshold.runs"));
    assert_eq!(
        ladder(&b, &id).await["gate"]["threshold"],
        json!({"kind": "count", "runs": 1})
    );
    c.choose("#gate-floor", "passable").await;
    c.choose("#gate-amount", "2").await;
    c.choose("#runs-per-rung", "3").await;
    c.click("#ladder-settings-save").await;
    c.until(
        "the settings saved",
        "document.querySelector('#ladder-settings-note').dataset.outcome === 'saved'",
    )
    .await;
    assert_eq!(
        c.text("#ladder-settings-note").await,
        "saved: gate passable or better, 2 run(s); 3 runs per rung; auto top-up on"
    );
    let stored = ladder(&b, &id).await;
    assert_eq!(
        (stored["gate"].clone(), stored["runsPerCell"].clone()),
        (
            json!({"floor": "passable", "threshold": {"kind": "count", "runs": 2}}),
            json!(3)
        )
    );
    assert!(c.text("#gate-line").await.contains("3 runs per rung"));

    // The buffer target: an empty bound is caught; 600 is shown as the 500 the API stored.
    c.choose("#ladder-target-kind", "bounded").await;
    c.click("#ladder-target-save").await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#ladder-target-note').dataset.outcome")
            .await,
        "refused"
    );
    assert_eq!(ladder(&b, &id).await["bufferTarget"], json!({"kind": "unbounded"}));
    c.choose("#ladder-target-runs", "600").await;
    c.click("#ladder-target-save").await;
    c.until(
        "the clamped bound",
        "document.querySelector('#ladder-target-note').dataset.outcome === 'saved'",
    )
    .await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#ladder-target-runs').value")
            .await,
        "500"
    );
    assert!(
        c.text("#ladder-target-note")
            .await
            .contains("you asked for 600; the API stores 500")
    );
    assert_eq!(
        ladder(&b, &id).await["bufferTarget"],
        json!({"kind": "bounded", "runs": 500})
    );

    // The rung order: rung one down.
    c.click("#board tbody tr:first-child .rung-down").await;
    c.until(
        "the reordered board",
        "document.querySelector('#board tbody tr:first-child th').textContent.startsWith('1. d@1.0.0')",
    )
    .await;
    let rungs: Vec<String> = ladder(&b, &id).await["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["case"]["slug"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(rungs, ["d", "c"]);

    // Enabled, with runs in flight: both climb. y held; the filter keeps the held one only.
    c.click("#enable").await;
    c.until(
        "both climbing",
        "[...document.querySelectorAll('#board .climber-status')].every((e) => e.dataset.state === 'climbing')",
    )
    .await;
    c.click("th[data-climber] + th[data-climber] input.held").await;
    c.until(
        "one held",
        "[...document.querySelectorAll('#board .climber-status')].some((e) => e.dataset.state === 'held')",
    )
    .await;
    c.choose("#board-filter", "held").await;
    assert_eq!(c.count("#board thead th[data-climber]").await, 1);
    assert_eq!(c.text("#board .climber-status").await, "held");
    c.choose("#board-filter", "").await;
    assert_eq!(c.count("#board thead th[data-climber]").await, 2);
    // Tallies on demand: hidden, then shown; each cell's tally is on hover too.
    assert!(
        c.eval::<bool>("document.querySelector('#board .tally').offsetParent === null")
            .await
    );
    c.click("#show-tallies").await;
    assert!(
        c.eval::<bool>("document.querySelector('#board .tally').offsetParent !== null")
            .await
    );
    assert!(
        c.eval::<String>("document.querySelector('#board td[data-state]').title")
            .await
            .starts_with("passing 0 of 2 needed")
    );
    c.screenshot("ladder-board-controls").await;

    // A refused priority does not stay in its field.
    c.choose("th[data-climber] input.priority", "5000").await;
    c.until(
        "the refusal",
        "!document.querySelector('#error').hidden && document.querySelector('th[data-climber] input.priority').value === '0'",
    )
    .await;
    assert!(c.text("#error").await.starts_with("422"), "{}", c.text("#error").await);

    // Halt all asks first; kept, nothing changes; confirmed, the ladder is off everywhere.
    c.click("#halt-all").await;
    c.click("#halt-all-cancel").await;
    assert_eq!(ladder(&b, &id).await["enabled"], true);
    c.click("#halt-all").await;
    c.click("#halt-all-confirm").await;
    c.until("the halt answer", "!!document.querySelector('#halt-answer')")
        .await;
    assert!(c.text("#halt-answer").await.contains("the ladder is off"));
    c.until(
        "every climber off",
        "[...document.querySelectorAll('#board .climber-status')].every((e) => e.textContent === 'off')",
    )
    .await;
    assert_eq!(c.text("#enable").await, "Start spending on this climb");
    assert_eq!(ladder(&b, &id).await["enabled"], false);
    c.screenshot("ladder-halted-all").await;
    {
        // The refused priority was the one failed answer, and it was the API's.
        let mut j = c.journal.lock().unwrap();
        assert!(
            j.bad_answers.iter().all(|a| a.starts_with("422 ")),
            "{:?}",
            j.bad_answers
        );
        j.bad_answers.clear();
        j.errors.retain(|e| !e.starts_with("log: Failed to load resource"));
    }
    c.assert_clean("the ladder's controls");

    // A missing plan: the page says so in place of "Loading…".
    c.page.goto(format!("{}/plans/plan_missing", c.base)).await.unwrap();
    c.ready("/plans/plan_missing").await;
    assert_eq!(c.text("main h1").await, "Not found");
    assert!(c.text("#page-error").await.contains("plan_missing"));
    assert!(!c.text("main").await.contains("Loading"));
    c.close().await;
}
