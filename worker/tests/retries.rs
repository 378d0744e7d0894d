//! The retry contract between `belay_workflows::options` and `belay-activities`, against a real
//! Temporal dev server and a real SQLite database: an activity that fails on bad input runs
//! exactly once (its failure carries the non-retryable type the options name), and one that
//! fails because the database is busy is retried and then succeeds.

use belay_domain::catalogue::{AdapterSpec, HarnessInput, TestType};
use belay_domain::job::{CasePin, Combination};
use belay_store::jobs::NewJob;
use belay_store::testing::fresh;
use belay_store::{Backend, Store};
use belay_workflows::contracts::StoreApi;
use belay_workflows::options;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};
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

struct Server(Child, String, std::path::PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.2);
    }
}

/// A dev server that has started: it printed its banner, its frontend answers, and it is still
/// running a moment later (a service whose port another process took panics just after the
/// banner). Such a start is retried on fresh ports, up to three times.
fn temporal() -> Server {
    let mut failures = Vec::new();
    for _ in 0..3 {
        match try_temporal() {
            Ok(s) => return s,
            Err(why) => failures.push(why),
        }
    }
    panic!("temporal did not start in three tries: {failures:?}");
}

fn try_temporal() -> Result<Server, String> {
    let bin = belay_testkit::temporal_bin();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::env::temp_dir().join(format!("belay-retries-temporal-{}-{port}.log", std::process::id()));
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .args(["server", "start-dev", "--headless", "--ip", "127.0.0.1"])
        .args(["--port", &port.to_string()])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("start temporal (set BELAY_TEMPORAL_BIN)");
    let mut server = Server(child, format!("127.0.0.1:{port}"), log);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            return Err(format!("exited ({status}) before it served"));
        }
        let banner = std::fs::read_to_string(&server.2).is_ok_and(|l| l.contains("Temporal Server:"));
        if banner && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            return Err("did not serve within 60 s".to_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    match server.0.try_wait().unwrap() {
        Some(status) => Err(format!(
            "exited ({status}) just after it started: {}",
            std::fs::read_to_string(&server.2).unwrap_or_default()
        )),
        None => Ok(server),
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
    with_worker(db.store.clone(), &server.1, async |client| {
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
    with_worker(db.store.clone(), &server.1, async |client| {
        start(&client, "busy", &job.id).await;
        let handle = client.get_workflow_handle::<StartJobWorkflow>("busy".to_owned());
        let deadline = Instant::now() + Duration::from_secs(120);
        // Wait until the server has retried the failed first attempt.
        loop {
            let d = handle.describe(WorkflowDescribeOptions::default()).await.unwrap();
            let pending = &d.raw_description.pending_activities;
            if pending.first().is_some_and(|a| a.attempt >= 2) {
                assert!(
                    pending[0].last_failure.is_some(),
                    "the first attempt failed and its failure was kept"
                );
                break;
            }
            assert!(Instant::now() < deadline, "the activity was never retried");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        lock.rollback().await.unwrap();
        assert_eq!(result(&client, "busy").await, "ok");
        assert!(recorded_attempt(&client, "busy").await >= 2);
    })
    .await;
}
