//! ProbeWorkflow: one no-op activity and nothing else. It is the floor `belay bench latency`
//! measures the run lane against, and a quick check that the workflows pool and Temporal work.

use crate::contracts::ProbeApi;
use crate::queues;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ActivityOptions, WorkflowContext, WorkflowResult};

#[workflow]
#[derive(Default)]
pub struct ProbeWorkflow;

#[workflow_methods]
impl ProbeWorkflow {
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>, input: String) -> WorkflowResult<String> {
        let opts = ActivityOptions::with_start_to_close_timeout(Duration::from_secs(10))
            .task_queue(queues::DB.to_string())
            .build();
        Ok(ctx.execute_activity(ProbeApi::echo, input, opts).await?)
    }
}
