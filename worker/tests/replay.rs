//! Every recorded history of a released workflow replays against the current code.
//!
//! The rule: recorded histories are append-only. A history in `tests/histories/` is a fact about
//! workflows that ran (and may still be running) on a released build; it is never re-recorded
//! over or deleted. A change to a workflow's command sequence (an activity added, removed or
//! reordered, a signal sent, a timer) goes behind `ctx.patched("<change id>")`, so the old branch
//! still replays the old histories, and the change adds a new history under a new name (the
//! recording tests name their files with a version, `forks-sweep-v2`, and bump it with the change).
//! Nothing is recorded over an existing file: see `record_history` in the `belay` crate's test
//! harness.
//!
//! Histories are recorded by the `belay` crate's tests with
//! `BELAY_RECORD_HISTORIES=$PWD/worker/tests/histories`: `run_lane`'s `records_replayable_histories`
//! (dispatcher, runs), the `workspaces` tests (workspaces, an edit session, the forks sweep),
//! `coverage`'s buffer test (a plan's top-up), the `verification` test (a verified and a
//! rejected Candidate), the `promotion` test (a promotion, and a verification that hands its
//! winner on), `ladders`' enable and climb tests (a ladder's top-up, a climb) and the `browser`
//! test (a Candidate whose browser check ran), and `verification`'s live-app test (a preview smoke
//! check, run after the meter settles since `verification-preview-after-settle`; the `-v1`
//! recording before it ran the preview first; `verification-step-rows-kept-v1` reads the
//! store's Evidence once, for the gate, where the ones before read it after every step), and
//! `selection`'s lone-Candidate acceptance repair (`verification-lone-acceptance-repair-v1`);
//! `dispatcher-v3` (run_lane) and `dispatcher-refusals-v1` (`metrics`' refused-start test) since
//! the dispatcher outlives refused starts (`dispatch-starts-outlive-refusals`); `run-*-v3`
//! (run_lane) and `run-rate-limited-v1` (`lanes`' rate-limit test) since runs keep their attempts
//! and act on failure classes (`run-failure-classes`).

/// Every history file here and the workflow it records; a file not listed fails the test, so a new
/// recording is added to the list with the change that made it.
const HISTORIES: &[&str] = &[
    "dispatcher",
    "run-completed",
    "run-failed",
    "workspace-published",
    "workspace-lost",
    "edit-session",
    "forks-sweep-v1",
    "forks-sweep-v2",
    "forks-sweep-v3",
    "run-completed-v2",
    "run-failed-v2",
    "dispatcher-v2",
    "topup-plan-v1",
    "verification-verified",
    "verification-rejected",
    "promotion-promoted",
    "verification-winner-ready",
    "forks-sweep-v4",
    "topup-ladder-v1",
    "topup-plan-v2",
    "topup-ladder-v2",
    "ladder-climb-v1",
    "verification-selected-v1",
    "verification-selected-v1-sibling",
    "verification-browser-v1",
    "verification-selected-winner-ready",
    "ladder-climb-continued-v1",
    "promotion-promoted-v2",
    "verification-preview-smoke-v1",
    "verification-preview-after-settle-v1",
    "verification-step-rows-kept-v1",
    "verification-lone-acceptance-repair-v1",
    "dispatcher-v3",
    "dispatcher-refusals-v1",
    "run-completed-v3",
    "run-failed-v3",
    "run-rate-limited-v1",
];

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories")
}

#[tokio::test]
async fn every_recorded_history_replays_against_the_current_code() {
    let mut found: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut expected: Vec<String> = HISTORIES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "the histories on disk and the list in this test differ"
    );
    for name in HISTORIES {
        let json = std::fs::read(dir().join(format!("{name}.json"))).unwrap();
        belay_client::replay::replay_json(&json)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn a_history_of_a_different_command_sequence_fails_to_replay() {
    let json = std::fs::read_to_string(dir().join("run-completed.json")).unwrap();
    // Pretend the recorded run scheduled its first activity on another activity type: the
    // current code's command no longer matches the history.
    let tampered = json.replacen("db.start_job", "db.something_else", 1);
    assert_ne!(json, tampered);
    assert!(belay_client::replay::replay_json(tampered.as_bytes()).await.is_err());
}

#[tokio::test]
async fn the_forks_sweep_before_it_signalled_ended_sessions_still_replays() {
    // v1 ended an overdue session without telling its workflow; v2 signals `closed` after the end.
    // Both must replay: v1 through the unpatched branch.
    let v1 = std::fs::read_to_string(dir().join("forks-sweep-v1.json")).unwrap();
    let v2 = std::fs::read_to_string(dir().join("forks-sweep-v2.json")).unwrap();
    assert!(!v1.contains("\"signal_name\":\"closed\""));
    assert!(v2.contains("\"signal_name\":\"closed\""));
    belay_client::replay::replay_json(v1.as_bytes()).await.unwrap();
    belay_client::replay::replay_json(v2.as_bytes()).await.unwrap();
}

#[tokio::test]
async fn a_verification_before_it_handed_its_winner_on_still_replays() {
    // Before the marker `verification-winner-ready` a verified Candidate ended its workflow; after
    // it, the workflow reads the winner's facts and takes its next step. Both must replay.
    let before = std::fs::read_to_string(dir().join("verification-verified.json")).unwrap();
    let after = std::fs::read_to_string(dir().join("verification-winner-ready.json")).unwrap();
    assert!(!before.contains("db.winner_facts"));
    assert!(after.contains("db.winner_facts"));
    belay_client::replay::replay_json(before.as_bytes()).await.unwrap();
    belay_client::replay::replay_json(after.as_bytes()).await.unwrap();
}

#[tokio::test]
async fn a_selection_before_it_handed_its_winner_on_still_replays() {
    // Before the marker `selected-winner-ready` a selected winner's workflow ended after the
    // selection; after it, the workflow reads the winner's facts and takes its next step.
    let before = std::fs::read_to_string(dir().join("verification-selected-v1.json")).unwrap();
    let after = std::fs::read_to_string(dir().join("verification-selected-winner-ready.json")).unwrap();
    let marker = belay_workflows::promotion::SELECTED_WINNER_READY_PATCH.to_owned();
    let before_patches = belay_client::replay::patches(before.as_bytes()).unwrap();
    let after_patches = belay_client::replay::patches(after.as_bytes()).unwrap();
    assert!(before_patches.contains(&belay_workflows::selection::SIBLING_SELECTION.to_owned()));
    assert!(!before_patches.contains(&marker), "{before_patches:?}");
    assert!(after_patches.contains(&marker), "{after_patches:?}");
    assert!(!before.contains("db.winner_facts"));
    assert!(after.contains("db.winner_facts"));
    belay_client::replay::replay_json(before.as_bytes()).await.unwrap();
    belay_client::replay::replay_json(after.as_bytes()).await.unwrap();
}
