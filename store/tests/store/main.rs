//! The store suite: every repository function, on SQLite and on PostgreSQL (each test a fresh
//! database; `on_both!` runs it on each backend). One test binary of a module per subject, so
//! the store and its dependencies are linked once (`cargo nextest run -p belay-store ladders::`).

mod accounts;
mod browser_meter;
mod candidates;
mod coverage;
mod ladders;
mod lanes;
mod metrics;
mod promotion;
mod repository;
mod sandbox_leases;
mod schema;
mod selection;
