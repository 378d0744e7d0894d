//! The client side of belay's workflows: connecting to Temporal, starting the dispatcher and
//! waking it, creating schedules, fetching histories and replaying them ([`replay`]). Used by the
//! API (on every enqueue and cancel), by the workflows pool at start, by the benches and by the
//! tests.
//!
//! It lives apart from `belay-workflows` so that the crate holding workflow code opens no
//! connection of its own: workflow code reaches Temporal only through its workflow context.

pub mod replay;

use belay_workflows::contracts::ClaimedJob;
use belay_workflows::dispatcher::{DispatcherInput, DispatcherWorkflow, run_search_attributes};
use belay_workflows::ladder::{ClimbBoard, LadderClimbWorkflow, climb_workflow_id};
use belay_workflows::queues;
use belay_workflows::run::{RunInput, RunWorkflow};
use temporalio_client::{
    Client, ClientOptions, ConnectionOptions, Url, WorkflowIdConflictPolicy, WorkflowIdReusePolicy,
    WorkflowSignalOptions, WorkflowStartOptions, errors::WorkflowStartError,
};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("BELAY_TEMPORAL_ADDRESS {0:?} is not a host:port or URL")]
    Address(String),
    #[error("connecting to Temporal at {address}: {source}")]
    Connect {
        address: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{what}: {source}")]
    Call {
        what: &'static str,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// How belay reaches a Temporal frontend that wants TLS: a server CA (PEM) in place of the
/// platform's roots, a client certificate and key (PEM) for mTLS, the name the server's
/// certificate is checked against when it is not the address's host, and an API key sent as
/// `Authorization: Bearer` (Temporal Cloud). `enabled` false is plain text, the dev server's way.
#[derive(Clone, Default)]
pub struct TemporalTls {
    pub enabled: bool,
    pub server_ca_pem: Option<Vec<u8>>,
    /// `(certificate, key)`, both PEM.
    pub client_identity_pem: Option<(Vec<u8>, Vec<u8>)>,
    pub server_name: Option<String>,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for TemporalTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalTls")
            .field("enabled", &self.enabled)
            .field("server_ca", &self.server_ca_pem.is_some())
            .field("client_certificate", &self.client_identity_pem.is_some())
            .field("server_name", &self.server_name)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Connects a client to `address` (`host:port` or a URL) in plain text.
pub async fn connect(address: &str, namespace: &str, identity: &str) -> Result<Client, ClientError> {
    connect_with(address, namespace, identity, &TemporalTls::default()).await
}

/// Connects a client to `address` (`host:port` or a URL) with `tls`: over TLS when it is
/// enabled (a `host:port` is then `https://host:port`), in plain text otherwise.
pub async fn connect_with(
    address: &str,
    namespace: &str,
    identity: &str,
    tls: &TemporalTls,
) -> Result<Client, ClientError> {
    let scheme = if tls.enabled { "https" } else { "http" };
    let url = if address.contains("://") {
        address.to_string()
    } else {
        format!("{scheme}://{address}")
    };
    let url = Url::parse(&url).map_err(|_| ClientError::Address(address.to_string()))?;
    let tls_options = tls.enabled.then(|| {
        temporalio_client::TlsOptions::builder()
            .maybe_server_root_ca_cert(tls.server_ca_pem.clone())
            .maybe_domain(tls.server_name.clone())
            .maybe_client_tls_options(tls.client_identity_pem.as_ref().map(|(cert, key)| {
                temporalio_client::ClientTlsOptions::builder()
                    .client_cert(cert.clone())
                    .client_private_key(key.clone())
                    .build()
            }))
            .build()
    });
    let conn = ConnectionOptions::new(url)
        .identity(identity.to_string())
        .maybe_tls_options(tls_options)
        .maybe_api_key(tls.api_key.clone())
        .build();
    Client::connect(conn, ClientOptions::new(namespace.to_string()).build())
        .await
        .map_err(|e| ClientError::Connect {
            address: address.to_string(),
            source: Box::new(e),
        })
}

/// Starts the dispatcher unless it is running (with `input`, when it starts), then wakes it.
pub async fn ensure_dispatcher(client: &Client, input: DispatcherInput) -> Result<(), ClientError> {
    let described = belay_workflows::metadata::dispatcher();
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, queues::DISPATCHER_ID)
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .static_summary(described.summary)
        .static_details(described.details)
        .build();
    client
        .start_workflow(DispatcherWorkflow::run, input, opts)
        .await
        .map_err(|e| ClientError::Call {
            what: "starting the dispatcher",
            source: Box::new(e),
        })?;
    wake_dispatcher(client).await
}

/// Starts the run of a claimed job (RunWorkflow, id `run-{job_id}`, never reused), eagerly when
/// this process's worker serves the workflows queue. False when it exists already (started
/// before: a retried or replayed start).
pub async fn start_run(client: &Client, job: &ClaimedJob) -> Result<bool, ClientError> {
    let described = belay_workflows::metadata::run(job);
    let opts = WorkflowStartOptions::new(queues::WORKFLOWS, queues::run_workflow_id(&job.job_id))
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .search_attributes(run_search_attributes(job))
        .static_summary(described.summary)
        .static_details(described.details)
        .enable_eager_workflow_start(true)
        .build();
    let input = RunInput {
        job_id: job.job_id.clone(),
    };
    match client.start_workflow(RunWorkflow::run, input, opts).await {
        Ok(_) => Ok(true),
        Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(false),
        Err(e) => Err(ClientError::Call {
            what: "starting a run",
            source: Box::new(e),
        }),
    }
}

/// Tells the dispatcher something changed (a job was enqueued, a run ended, a job was cancelled).
pub async fn wake_dispatcher(client: &Client) -> Result<(), ClientError> {
    client
        .get_workflow_handle::<DispatcherWorkflow>(queues::DISPATCHER_ID)
        .signal(DispatcherWorkflow::wake, (), WorkflowSignalOptions::default())
        .await
        .map_err(|e| ClientError::Call {
            what: "waking the dispatcher",
            source: Box::new(e),
        })
}

/// Signals the climb of ladder `ladder_id` (`ladder-{id}`) to read its board: a run of it ended,
/// or the ladder changed. Fails when no climb runs (the ladder is disabled).
pub async fn poke_climb(client: &Client, ladder_id: &str) -> Result<(), ClientError> {
    client
        .get_workflow_handle::<LadderClimbWorkflow>(climb_workflow_id(ladder_id))
        .signal(LadderClimbWorkflow::poke, (), WorkflowSignalOptions::default())
        .await
        .map_err(|e| ClientError::Call {
            what: "signalling a ladder's climb",
            source: Box::new(e),
        })
}

/// Asks ladder `ladder_id`'s running climb where each climber stands (its `board` query).
pub async fn climb_board(client: &Client, ladder_id: &str) -> Result<ClimbBoard, ClientError> {
    client
        .get_workflow_handle::<LadderClimbWorkflow>(climb_workflow_id(ladder_id))
        .query(
            LadderClimbWorkflow::board,
            (),
            temporalio_client::WorkflowQueryOptions::default(),
        )
        .await
        .map_err(|e| ClientError::Call {
            what: "querying a ladder's climb",
            source: Box::new(e),
        })
}

/// Creates the daily `forks-sweep` schedule unless it exists. Each firing starts
/// ForksSweepWorkflow (id `forks-sweep`); a firing while one still runs is skipped.
pub async fn ensure_forks_sweep_schedule(client: &Client) -> Result<(), ClientError> {
    use belay_workflows::sweep::{EVERY, ForksSweepWorkflow, SCHEDULE_ID};
    use temporalio_client::schedules::{CreateScheduleOptions, ScheduleAction, ScheduleError, ScheduleSpec};
    let opts = CreateScheduleOptions::builder()
        .action(ScheduleAction::start_workflow(
            ForksSweepWorkflow::run,
            (),
            queues::WORKFLOWS,
            SCHEDULE_ID,
        ))
        .spec(ScheduleSpec::builder().intervals(vec![EVERY.into()]).build())
        .note("belay: delete forks the retention rules say are due".to_string())
        .build();
    match client.create_schedule(SCHEDULE_ID, opts).await {
        Ok(_) => Ok(()),
        Err(ScheduleError::Rpc(status)) if status.code() == temporalio_client::tonic::Code::AlreadyExists => Ok(()),
        Err(e) => Err(ClientError::Call {
            what: "creating the forks-sweep schedule",
            source: Box::new(e),
        }),
    }
}

/// The JSON export of a workflow's history (the form `temporal workflow show --output json`
/// writes and the replay tests read), once the workflow has closed or `limit` has passed.
pub async fn closed_history_json(
    client: &Client,
    workflow_id: &str,
    limit: std::time::Duration,
) -> Result<Vec<u8>, ClientError> {
    use temporalio_client::{UntypedWorkflow, WorkflowFetchHistoryOptions};
    let handle = client.get_workflow_handle::<UntypedWorkflow>(workflow_id.to_owned());
    let deadline = std::time::Instant::now() + limit;
    loop {
        let json = handle
            .fetch_history(WorkflowFetchHistoryOptions::default())
            .to_json()
            .await
            .map_err(|e| ClientError::Call {
                what: "fetching a workflow history",
                source: Box::new(e),
            })?;
        let text = String::from_utf8_lossy(&json);
        // The export names each event's attributes by type (`WorkflowExecutionCompletedEventAttributes`).
        let closed = [
            "Completed",
            "Failed",
            "ContinuedAsNew",
            "Terminated",
            "Canceled",
            "TimedOut",
        ]
        .iter()
        .any(|end| text.contains(&format!("WorkflowExecution{end}EventAttributes")));
        if closed || std::time::Instant::now() >= deadline {
            return Ok(json);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
