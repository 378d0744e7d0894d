//! The retry contract between `belay_workflows::options` and `belay-activities`, against a real
//! Temporal dev server and a real SQLite database: an activity that fails on bad input runs
//! exactly once (its failure carries the non-retryable type the options name), and one that
//! fails because the database is busy is retried and then succeeds.

use belay_domain::catalogue::{AdapterSpec, HarnessInput, TestType};
use belay_domain::job::{CasePin, Combination};
use belay_store::jobs::NewJob;
use belay_store::testing::fresh;
use belay_store::{Backend, Store};
use belay_testkit::wait_until_every;
use belay_workflows::contracts::StoreApi;
use belay_workflows::options;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::{Client, WorkflowDescribeOptions, WorkflowGetResultOptions, WorkflowStartOptions};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::runtime::RuntimeOptions;
use temporalio_sdk::{Runtime, Worker, WorkerOptions, WorkflowContext, WorkflowResult};

const QUEUE: &str = "belay.test.retries";

/// Calls `db.start_job` once with the production options and reports how it ended.
#[workflow]
#[derive(Default)]
pub struct StartJobWorkflow;

#[workflow_methods]
impl StartJobWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, job_id: String) -> WorkflowResult<String> {
        Ok(
            match ctx.execute_activity(StoreApi::start_job, job_id, options::db()).await {
                Ok(_) => "ok".to_owned(),
                Err(e) => format!("failed: {e}"),
            },
        )
    }
}

/// A Temporal dev server of this test's own, with its log in a temp dir of its own (declared
/// after the server, so the server stops before its log goes).
struct Server {
    temporal: belay_testkit::TemporalDevServer,
    _log_dir: tempfile::TempDir,
}

fn temporal() -> Server {
    let dir = tempfile::tempdir().unwrap();
    Server {
        temporal: belay_testkit::TemporalDevServer::start(dir.path(), &[]),
        _log_dir: dir,
    }
}

/// Runs the test workflow on its own queue and the store activities on `belay.db` until `body`
/// is done with the client.
async fn with_worker<F, Fut>(store: Store, address: &str, body: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let client = belay_client::connect(address, "default", "test").await.unwrap();
    let runtime = Runtime::from_current_tokio(RuntimeOptions::builder().build().unwrap()).unwrap();
    let workflows = WorkerOptions::new(QUEUE)
        .register_workflow::<StartJobWorkflow>()
        .unwrap()
        .build();
    let db = WorkerOptions::new(belay_workflows::queues::DB)
        .register_activities(belay_activities::store::StoreActivities {
            store,
            objects: Arc::new(object_store::memory::InMemory::new()),
            client: None,
            top_up_lease_ms: belay_store::coverage::TOP_UP_LEASE_MS,
        })
        .build();
    let mut w1 = Worker::new(&runtime, client.clone(), workflows).unwrap();
    let mut w2 = Worker::new(&runtime, client.clone(), db).unwrap();
    let (s1, s2) = (w1.shutdown_handle(), w2.shutdown_handle());
    let test = async {
        body(client.clone()).await;
        s1();
        s2();
    };
    let (r1, r2, ()) = tokio::join!(w1.run(), w2.run(), test);
    r1.unwrap();
    r2.unwrap();
}

async fn start(client: &Client, id: &str, job_id: &str) {
    client
        .start_workflow(
            StartJobWorkflow::run,
            job_id.to_owned(),
            WorkflowStartOptions::new(QUEUE, id).build(),
        )
        .await
        .unwrap();
}

async fn result(client: &Client, id: &str) -> String {
    client
        .get_workflow_handle::<StartJobWorkflow>(id.to_owned())
        .get_result(WorkflowGetResultOptions::default())
        .await
        .unwrap()
}

/// The attempt number of the workflow's one `db.start_job` as its history records it.
async fn recorded_attempt(client: &Client, id: &str) -> u64 {
    let json = belay_client::closed_history_json(client, id, Duration::from_secs(30))
        .await
        .unwrap();
    let history: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let attempts: Vec<u64> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["attributes"]["ActivityTaskStartedEventAttributes"]["attempt"].as_u64())
        .collect();
    assert_eq!(attempts.len(), 1, "one activity");
    attempts[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activity_failing_on_bad_input_is_attempted_exactly_once() {
    let server = temporal();
    let db = fresh(Backend::Sqlite).await;
    with_worker(db.store.clone(), &server.temporal.address, async |client| {
        // No such job: the store answers not-found, which no retry can change.
        start(&client, "bad-input", "job_doesnotexist").await;
        let answer = result(&client, "bad-input").await;
        assert!(answer.starts_with("failed:"), "{answer}");
        assert_eq!(recorded_attempt(&client, "bad-input").await, 1);
        let json = belay_client::closed_history_json(&client, "bad-input", Duration::from_secs(30))
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&json);
        let failed = text
            .find("ActivityTaskFailedEventAttributes")
            .map(|i| &text[i..])
            .expect("the activity failed");
        // The failure is typed as the options' non-retryable type, not merely flagged.
        assert!(
            failed.contains(&format!("\"type\":\"{}\"", options::FATAL)),
            "{}",
            &failed[..failed.len().min(600)]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activity_failing_because_the_database_is_busy_is_retried_until_it_succeeds() {
    let server = temporal();
    let db = fresh(Backend::Sqlite).await;
    db.store
        .create_harness(&HarnessInput {
            provider: None,
            name: "h".into(),
            provider_routed: false,
            max_parallelism: 1,
            adapter: AdapterSpec::Script {
                script: "true".into(),
                timeout_seconds: 10,
                sandbox: false,
            },
        })
        .await
        .unwrap();
    let job = db
        .store
        .enqueue(NewJob {
            case: CasePin {
                slug: "c".into(),
                version: "1.0.0".into(),
                variant: "default".into(),
                engine: "none".into(),
            },
            combination: Combination::Harness {
                harness: "h".into(),
                model: "m".into(),
                provider: None,
            },
            gg_config_name: None,
            capabilities: None,
            test_type: Some(TestType::Standard),
            user_id: None,
            origin: None,
            attempt: 1,
            retry_of: None,
        })
        .await
        .unwrap();
    // Another connection holds SQLite's write lock: every write of the activity waits out the
    // busy timeout and fails with "database is locked", a transient error.
    let other = Arc::new(Store::connect(&db.url).await.unwrap());
    let lock = other.begin().await.unwrap();
    with_worker(db.store.clone(), &server.temporal.address, async |client| {
        start(&client, "busy", &job.id).await;
        let handle = client.get_workflow_handle::<StartJobWorkflow>("busy".to_owned());
        // Wait until the server has retried the failed first attempt.
        let pending = wait_until_every(
            "the server to retry the activity",
            Duration::from_secs(120),
            Duration::from_millis(200),
            async || {
                let d = handle.describe(WorkflowDescribeOptions::default()).await.unwrap();
                let pending = d.raw_description.pending_activities;
                match pending.first() {
                    Some(a) if a.attempt >= 2 => Ok(pending),
                    first => Err(format!("pending attempt {:?}", first.map(|a| a.attempt))),
                }
            },
        )
        .await;
        assert!(
            pending[0].last_failure.is_some(),
            "the first attempt failed and its failure was kept"
        );
        lock.rollback().await.unwrap();
        assert_eq!(result(&client, "busy").await, "ok");
        assert!(recorded_attempt(&client, "busy").await >= 2);
    })
    .await;
}
