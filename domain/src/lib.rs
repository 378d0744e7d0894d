//! belay's rules as pure functions over plain data.
//!
//! Nothing here does IO, reads a clock or draws randomness: time and ids are passed in, so every
//! rule can be tested with the specification's own examples. The store, the activities, the
//! workflows and the API call into this crate for every decision they make.

pub mod access;
pub mod adapter;
pub mod api_token;
pub mod artifact_url;
pub mod attempt;
pub mod buffer;
pub mod calendar;
pub mod catalogue;
pub mod change;
pub mod coverage;
pub mod dispatch;
pub mod edit_session;
pub mod gate;
#[cfg(test)]
mod generator;
pub mod ids;
pub mod job;
pub mod ladder;
pub mod launch;
pub mod matrix;
pub mod meter;
pub mod progress;
pub mod project;
pub mod queue;
pub mod refusal;
pub mod repo;
pub mod repo_token;
pub mod review;
pub mod run;
pub mod sandbox_lease;
pub mod top_up;
pub mod validation;
pub mod workspace;

// The source lane's verification, selection and promotion rules.
pub mod acceptance;
pub mod approval;
pub mod browser;
pub mod budget;
pub mod candidate;
pub mod candidate_sets;
pub mod check;
pub mod check_output;
pub mod client_assets;
pub mod compatibility;
pub mod conflict;
pub mod contract;
pub mod diff;
pub mod evidence;
pub mod gesture;
pub mod lifecycle;
pub mod plan;
pub mod policy;
pub mod promotion;
pub mod prose;
pub mod receipt;
pub mod repair;
pub mod selection;
pub mod selection_steps;

pub use validation::ValidationError;
