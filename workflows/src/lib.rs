//! belay's Temporal workflows and the activity contracts they call.
//!
//! Workflows only sequence: every decision is a call into `belay-domain`, every effect an
//! activity. This crate links no IO: the activities are declared here as contracts
//! ([`contracts`]) and implemented in `belay-activities`, so each pool's worker serves them on its
//! own task queue.

pub mod client;
pub mod contracts;
pub mod dispatcher;
pub mod edit_session;
pub mod probe;
pub mod provision;
pub mod queues;
pub mod replay;
pub mod run;
pub mod search;
pub mod sweep;
pub mod workspace;

pub use dispatcher::DispatcherWorkflow;
pub use run::RunWorkflow;
