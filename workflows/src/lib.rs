//! belay's Temporal workflows and the activity contracts they call.
//!
//! Workflows only sequence: every decision is a call into `belay-domain`, every effect an
//! activity. This crate links no IO and opens no connection: the activities are declared here as
//! contracts ([`contracts`]) and implemented in `belay-activities`, so each pool's worker serves
//! them on its own task queue; starting, signalling and querying workflows from outside is
//! `belay-client`'s. Recorded histories of every released workflow live in
//! `worker/tests/histories/` and replay against this code (see that test's module doc for the
//! append-only rule).

pub mod browser;
pub mod contracts;
pub mod dispatcher;
pub mod edit_session;
pub mod ladder;
pub mod metadata;
pub mod options;
pub mod probe;
pub mod promotion;
pub mod provision;
pub mod queues;
pub mod run;
pub mod search;
pub mod selection;
pub mod sweep;
pub mod top_up;
pub mod verification;
pub mod wake;
pub mod workspace;

pub use dispatcher::DispatcherWorkflow;
pub use run::RunWorkflow;

/// Registers every belay workflow on a worker's or a replayer's options (both builders take
/// `register_workflow::<W>()` and answer a `Result`): the one list of workflows the workflows
/// pool serves and the replay tests replay against.
#[macro_export]
macro_rules! register_every_workflow {
    ($options:expr) => {
        $options
            .register_workflow::<$crate::DispatcherWorkflow>()
            .and_then(|o| o.register_workflow::<$crate::RunWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::probe::ProbeWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::provision::ProjectProvisionWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::provision::ProjectDeleteWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::workspace::WorkspaceWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::edit_session::EditSessionWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::sweep::ForksSweepWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::top_up::TopUpWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::verification::CandidateVerificationWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::promotion::PromotionWorkflow>())
            .and_then(|o| o.register_workflow::<$crate::ladder::LadderClimbWorkflow>())
    };
}
