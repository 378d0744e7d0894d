//! Handlers, one module per resource.

pub mod accounts;
pub mod candidates;
pub mod catalogue;
pub mod changes;
pub mod conflicts;
pub mod coverage;
pub mod edit_sessions;
pub mod events;
pub mod evidence;
pub mod health;
pub mod jobs;
pub mod ladders;
pub mod projects;
pub mod promotion;
pub mod repo_tokens;
pub mod runs;
pub mod screenshots;
pub mod workspaces;
