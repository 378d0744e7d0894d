//! `belay doctor`: checks, with the flags and environment of `belay api` and `belay worker`, what
//! this deployment's processes need, one line per check saying what it found: the database,
//! Temporal (and the pollers on belay's task queues), the object store (a write, read and delete),
//! the Docker Engine, the model API (a probe that spends no tokens) and Chromium. A check the
//! pools named in `--pools` do not need is skipped. Exits non-zero when a check fails.

use crate::{Conn, SandboxGitArgs, Storage};
use belay_worker::Pool;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(flatten)]
    pub storage: Storage,
    /// The pools this deployment runs (which checks apply, and whose task queues need pollers).
    #[arg(
        long,
        env = "BELAY_POOLS",
        default_value = "workflows,db,git,sandbox,llm,browser,harness"
    )]
    pub pools: String,
    #[command(flatten)]
    pub sandbox_git: SandboxGitArgs,
    /// How long one check may take.
    #[arg(long, default_value_t = 20)]
    pub timeout_seconds: u64,
    #[command(flatten)]
    pub outside: crate::settings::Outside,
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Fail,
    Skip,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

type Outcome = (Status, String);

fn fail(e: impl std::fmt::Display) -> Outcome {
    (Status::Fail, e.to_string())
}

/// `check` within `limit`.
async fn within(limit: Duration, check: impl std::future::Future<Output = Outcome>) -> Outcome {
    match tokio::time::timeout(limit, check).await {
        Ok(outcome) => outcome,
        Err(_) => (Status::Fail, format!("no answer within {}s", limit.as_secs())),
    }
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let pools = Pool::parse_list(&args.pools)?;
    let limit = Duration::from_secs(args.timeout_seconds.max(1));
    let http_roots = args.conn.http_tls.extra_roots();
    let needs = |p: Pool| pools.contains(&p);
    let mut failed = 0;
    let mut line = |name: &str, (status, found): Outcome| {
        if status == Status::Fail {
            failed += 1;
        }
        // One line per check, whatever the cause said.
        let found = found.replace('\n', " ");
        println!("{:<4}  {name:<14} {found}", status.label());
    };

    line("database", within(limit, database(&args.conn)).await);
    line("temporal", within(limit, temporal(&args.conn, &pools)).await);
    line("object store", within(limit, objects(&args.storage, &http_roots)).await);
    let docker = if needs(Pool::Sandbox) || needs(Pool::Browser) || needs(Pool::Harness) {
        let mut outcome = within(limit, docker(&args.outside.sandbox)).await;
        // The harness pool needs the Engine only for adapters marked sandbox.
        if outcome.0 == Status::Fail && !needs(Pool::Sandbox) && !needs(Pool::Browser) {
            outcome = (
                Status::Warn,
                format!("{} (harness adapters marked sandbox will fail)", outcome.1),
            );
        }
        outcome
    } else {
        (Status::Skip, "no sandbox, browser or harness pool in --pools".into())
    };
    line("docker", docker);
    let git = if needs(Pool::Sandbox) || needs(Pool::Browser) {
        let pool = if needs(Pool::Sandbox) { "sandbox" } else { "browser" };
        match crate::serve::sandbox_git(pool, &args.sandbox_git) {
            Ok(git) => (Status::Ok, format!("Sandboxes clone from {}", git.url)),
            Err(e) => fail(e),
        }
    } else {
        (Status::Skip, "no sandbox or browser pool in --pools".into())
    };
    line("sandbox git", git);
    let model = if needs(Pool::Llm) {
        within(limit, model(&args.outside.llm, &http_roots)).await
    } else {
        (Status::Skip, "no llm pool in --pools".into())
    };
    line("model api", model);
    let chromium = if needs(Pool::Browser) {
        within(limit, chromium(&args.outside.browser)).await
    } else {
        (Status::Skip, "no browser pool in --pools".into())
    };
    line("chromium", chromium);
    anyhow::ensure!(failed == 0, "{failed} check(s) failed");
    Ok(())
}

async fn database(conn: &Conn) -> Outcome {
    if let Err(e) = crate::tls::check_database_url(&conn.database_url) {
        return fail(format!("{e:#}"));
    }
    let store = match belay_store::Store::connect_with(&conn.database_url, 1).await {
        Ok(s) => s,
        Err(e) => return fail(format!("DATABASE_URL: cannot connect: {}", causes(&e))),
    };
    let outcome = match store.describe().await {
        Ok(found) if found.contains("not applied") => (Status::Fail, found),
        Ok(found) => (Status::Ok, found),
        Err(e) => fail(format!("DATABASE_URL: {}", causes(&e))),
    };
    store.close().await;
    outcome
}

async fn temporal(conn: &Conn, pools: &[Pool]) -> Outcome {
    use temporalio_common::protos::temporal::api::enums::v1::{TaskQueueKind, TaskQueueType};
    use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
    use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeTaskQueueRequest;

    let tls = match conn.temporal_tls.resolve(&conn.temporal_address) {
        Ok(tls) => tls,
        Err(e) => return fail(format!("{e:#}")),
    };
    let how = if !tls.enabled {
        "in plain text".to_string()
    } else {
        let mut parts = vec!["TLS"];
        if tls.client_identity_pem.is_some() {
            parts.push("a client certificate");
        }
        if tls.api_key.is_some() {
            parts.push("an API key");
        }
        format!(
            "over {}",
            parts.join(" with ").replacen(" with an API key", " and an API key", 1)
        )
    };
    let identity = format!("belay-doctor@{}", std::process::id());
    let client = match belay_client::connect_with(&conn.temporal_address, &conn.namespace, &identity, &tls).await {
        Ok(c) => c,
        Err(e) => return fail(causes(&e)),
    };
    let mut service = client.connection().workflow_service();
    let mut queues = Vec::new();
    let mut idle = Vec::new();
    for pool in pools {
        let queue = pool.task_queue();
        let kind = if *pool == Pool::Workflows {
            TaskQueueType::Workflow
        } else {
            TaskQueueType::Activity
        };
        let request = DescribeTaskQueueRequest {
            namespace: conn.namespace.clone(),
            task_queue: Some(TaskQueue {
                name: queue.to_string(),
                kind: TaskQueueKind::Normal as i32,
                normal_name: String::new(),
            }),
            task_queue_type: kind as i32,
            ..Default::default()
        };
        match service.describe_task_queue(tonic_request(request)).await {
            Ok(r) => {
                let n = r.into_inner().pollers.len();
                if n == 0 {
                    idle.push(queue);
                }
                queues.push(format!("{queue} {n}"));
            }
            Err(status) => {
                return fail(format!(
                    "{} namespace {} {how}: describing {queue}: {}",
                    conn.temporal_address,
                    conn.namespace,
                    status.message()
                ));
            }
        }
    }
    let found = format!(
        "{} namespace {} {how}; pollers: {}",
        conn.temporal_address,
        conn.namespace,
        queues.join(", ")
    );
    if idle.is_empty() {
        (Status::Ok, found)
    } else {
        (Status::Fail, format!("{found}; no worker polls {}", idle.join(", ")))
    }
}

fn tonic_request<T>(message: T) -> temporalio_client::tonic::Request<T> {
    temporalio_client::tonic::Request::new(message)
}

async fn objects(storage: &Storage, http_roots: &anyhow::Result<Vec<Vec<u8>>>) -> Outcome {
    use object_store::{ObjectStore, PutPayload, path::Path};
    let (location, s3) = match storage.objects.location(&storage.data_dir) {
        Ok(crate::objects::Location::Dir(dir)) => (format!("directory {}", dir.display()), false),
        Ok(crate::objects::Location::S3 { bucket, prefix }) => (format!("s3://{bucket}/{prefix}"), true),
        Err(e) => return fail(format!("{e:#}")),
    };
    // The CA bundle matters only to an S3 endpoint.
    let roots = match (http_roots, s3) {
        (Ok(r), true) => r.as_slice(),
        (Err(e), true) => return fail(format!("{e:#}")),
        (_, false) => &[],
    };
    let store = match storage.objects.open(&storage.data_dir, roots) {
        Ok(s) => s,
        Err(e) => return fail(format!("{e:#}")),
    };
    let path = Path::from(format!("doctor/probe-{}", uuid::Uuid::new_v4()));
    let bytes = b"belay doctor probe".to_vec();
    let probe = async {
        store.put(&path, PutPayload::from(bytes.clone())).await?;
        let read = store.get(&path).await?.bytes().await?;
        store.delete(&path).await?;
        Ok::<_, object_store::Error>(read)
    };
    match probe.await {
        Ok(read) if read.as_ref() == bytes.as_slice() => (
            Status::Ok,
            format!("{location}: wrote, read back and deleted a probe object"),
        ),
        Ok(_) => fail(format!(
            "{location}: the probe object read back differs from what was written"
        )),
        Err(e) => fail(format!("{location}: {}", causes(&e))),
    }
}

async fn docker(settings: &crate::settings::SandboxSettings) -> Outcome {
    let config = match settings.config() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match belay_sandbox::Sandboxes::probe_engine(&config).await {
        Ok(found) => (Status::Ok, found),
        Err(e) => fail(causes(&e)),
    }
}

async fn model(settings: &crate::settings::LlmSettings, http_roots: &anyhow::Result<Vec<Vec<u8>>>) -> Outcome {
    let mut config = match settings.config() {
        Ok(c) => c,
        Err(e) => return fail(format!("{e:#}")),
    };
    match http_roots {
        Ok(r) => config.extra_roots = r.clone(),
        Err(e) => return fail(format!("{e:#}")),
    }
    let base = config.base_url.clone();
    let client = match belay_llm::AnthropicClient::new(config) {
        Ok(c) => c,
        Err(e) => return fail(format!("{e:#}")),
    };
    match client.probe().await {
        Ok(found) => (Status::Ok, format!("{base}: {found}")),
        Err(belay_llm::CallError::Http {
            status: status @ (401 | 403),
            ..
        }) => fail(format!(
            "{base}: GET /v1/models answered {status}: BELAY_ANTHROPIC_API_KEY was not accepted"
        )),
        Err(e) => fail(format!("{base}: {e}")),
    }
}

async fn chromium(settings: &crate::settings::BrowserSettings) -> Outcome {
    let config = settings.config();
    let bin = config.chromium;
    let out = tokio::process::Command::new(&bin)
        .arg("--version")
        .kill_on_drop(true)
        .output()
        .await;
    match out {
        Ok(o) if o.status.success() => (
            Status::Ok,
            format!("{} at {}", String::from_utf8_lossy(&o.stdout).trim(), bin.display()),
        ),
        Ok(o) => fail(format!(
            "{} --version exited {}: {} (BELAY_CHROMIUM names the binary)",
            bin.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => fail(format!(
            "{} cannot be run ({e}); set BELAY_CHROMIUM to a Chromium binary",
            bin.display()
        )),
    }
}

/// An error with its causes, joined.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
