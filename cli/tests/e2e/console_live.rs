//! Live pages in a real Chromium against real `belay` processes: the matrix and the ladder board
//! follow their runs while any is in flight (bounded polling), say when they were last updated,
//! and stop updating once nothing is in flight, all without a reload.

use crate::common::Belay;
use crate::console::Console;
use serde_json::json;

const SHORT_SCRIPT: &str = r#"sleep 3; printf '{"status":"completed","loaded":true}' > "$BELAY_MANIFEST""#;

/// Marks the page's document, so a reload (a new document) would be noticed.
async fn mark_document(c: &Console) {
    assert!(
        c.eval::<bool>("(() => { window.belayTestDocument = 1; return true; })()")
            .await
    );
}

async fn same_document(c: &Console) -> bool {
    c.eval("window.belayTestDocument === 1").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_matrix_and_the_board_follow_their_runs_without_a_reload_and_stop_when_nothing_is_in_flight() {
    let b = Belay::start().await;
    b.catalogue().await;
    b.harness("x", 100, SHORT_SCRIPT).await;
    let (s, p) = b
        .post(
            "/v1/coverage-plans",
            json!({"name": "live", "cases": [{"slug": "c", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"}], "runsPerCell": 2,
                   "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
    assert_eq!(s, 201, "{p}");
    let plan = p["id"].as_str().unwrap().to_owned();
    let c = Console::open(&b.url).await;
    c.sign_in(&b.token).await;

    // Opening the plan tops it up: its runs are in flight, and the page keeps reading them.
    c.visit(&format!("/plans/{plan}")).await;
    mark_document(&c).await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#last-updated').dataset.live")
            .await,
        "on"
    );
    assert!(c.text("#last-updated").await.starts_with("Last updated"));
    c.until(
        "both runs completed on the matrix, and the page no longer updating",
        "document.querySelector('#totals td[data-col=completed]').textContent === '2' \
         && document.querySelector('#last-updated').dataset.live === 'off'",
    )
    .await;
    assert!(same_document(&c).await, "the matrix moved without a reload");
    assert!(c.text("#last-updated").await.contains("nothing in flight"));
    // Stopped: nothing is read any more.
    let at: String = c
        .eval("document.querySelector('#last-updated').dataset.updatedAt")
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#last-updated').dataset.updatedAt")
            .await,
        at
    );
    c.screenshot("matrix-live-stopped").await;

    // A ladder enabled from its board: its climber climbs, then waits on the reviewer.
    let (s, v) = b
        .post(
            "/v1/test-cases",
            json!({"slug": "d", "version": "1.0.0", "testType": "standard", "variants": ["default"]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, l) = b
        .post(
            "/v1/ladders",
            json!({"name": "live", "rungs": [{"slug": "d", "version": "1.0.0", "variant": "default"}],
                   "combinations": [{"kind": "harness", "harness": "x", "model": "m"}], "runsPerCell": 1,
                   "bufferTarget": {"kind": "unbounded"}}),
        )
        .await;
    assert_eq!(s, 201, "{l}");
    let ladder = l["id"].as_str().unwrap().to_owned();
    c.visit(&format!("/ladders/{ladder}")).await;
    mark_document(&c).await;
    assert_eq!(
        c.eval::<String>("document.querySelector('#last-updated').dataset.live")
            .await,
        "off"
    );
    c.click("#enable").await;
    c.until(
        "the climber climbing",
        "document.querySelector('#board .climber-status').dataset.state === 'climbing' \
         && document.querySelector('#last-updated').dataset.live === 'on'",
    )
    .await;
    c.until(
        "the climber's run in, waiting on the reviewer, and the board no longer updating",
        "document.querySelector('#board .climber-status').dataset.state === 'awaitingReview' \
         && document.querySelector('#last-updated').dataset.live === 'off'",
    )
    .await;
    assert!(same_document(&c).await, "the board moved without a reload");
    c.screenshot("board-live-stopped").await;
    c.assert_clean("live pages");
    c.close().await;
}
