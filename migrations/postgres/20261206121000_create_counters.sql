-- Counters of what went wrong and was retried, for /metrics: one row per counter, its value only
-- grows. `run_start_failures` counts starts of run workflows Temporal refused for a reason other
-- than "already started" (each retried with its batch).
create table counters (
    name text primary key,
    value bigint not null
);
