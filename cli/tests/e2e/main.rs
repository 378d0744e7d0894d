//! belay end to end: the real `belay` binary (API, worker, `belay dev`, `belay doctor`) against a
//! real Temporal dev server, real SQLite and PostgreSQL databases, Docker Sandboxes and Chromium,
//! spoken to over HTTP the way a client does. One test binary of many modules, one per subject,
//! so the whole dependency graph is linked once rather than once per subject; nextest still runs
//! each test in a process of its own (`cargo nextest run -p belay --test e2e run_lane::`).

mod common;

mod accounts;
mod api;
mod boundaries;
mod browser;
mod compose;
mod console;
mod console_board;
mod console_diff;
mod console_live;
mod console_play;
mod console_review;
mod console_session;
mod coverage;
mod dead_ends;
mod dev;
mod ladders;
mod lanes;
mod metrics;
mod model_client;
mod plans_budget;
mod projects;
mod promotion;
mod run_lane;
mod sandbox_sharing;
mod selection;
mod tls;
mod topology;
mod verification;
mod workflow_search;
mod workspaces;
