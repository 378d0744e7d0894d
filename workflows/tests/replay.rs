//! Every recorded history of a released workflow replays against the current code.
//! Histories are recorded by the `belay` crate's tests with
//! `BELAY_RECORD_HISTORIES=$PWD/workflows/tests/histories`: `run_lane`'s
//! `records_replayable_histories` (dispatcher, runs) and the `workspaces` tests (workspaces, an
//! edit session, the forks sweep).

#[tokio::test]
async fn every_recorded_history_replays_against_the_current_code() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let json = std::fs::read(&path).unwrap();
            belay_workflows::replay::replay_json(&json)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            replayed += 1;
        }
    }
    assert!(
        replayed >= 7,
        "expected the recorded dispatcher, run, failed-run, workspace, lost-workspace, edit-session and forks-sweep histories, found {replayed}"
    );
}

#[tokio::test]
async fn a_history_of_a_different_command_sequence_fails_to_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories");
    let json = std::fs::read_to_string(dir.join("run-completed.json")).unwrap();
    // Pretend the recorded run scheduled its first activity on another activity type: the
    // current code's command no longer matches the history.
    let tampered = json.replacen("db.start_job", "db.something_else", 1);
    assert_ne!(json, tampered);
    assert!(belay_workflows::replay::replay_json(tampered.as_bytes()).await.is_err());
}
