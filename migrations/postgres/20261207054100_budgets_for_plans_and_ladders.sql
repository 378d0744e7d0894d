-- Budgets (decision 0054): what a plan's or a ladder's runs may cost, what they have cost and
-- what its runs in flight have reserved, in micro-dollars (whole numbers: sums are exact on both
-- backends). A top-up reserves on the row with one conditional update; a job's end settles it.
alter table coverage_plans add column budget_micros bigint;
alter table coverage_plans add column estimated_run_micros bigint;
alter table coverage_plans add column spent_micros bigint not null default 0;
alter table coverage_plans add column reserved_micros bigint not null default 0;

alter table ladders add column budget_micros bigint;
alter table ladders add column estimated_run_micros bigint;
alter table ladders add column spent_micros bigint not null default 0;
alter table ladders add column reserved_micros bigint not null default 0;

-- What a top-up reserved for the job (null: not budgeted, as a run launched by hand never is),
-- and what it settled at when it ended (null until then).
alter table jobs add column reserved_micros bigint;
alter table jobs add column cost_micros bigint;

-- What a run cost (null when unknown: a run launched by hand that reported nothing), and what its
-- adapter reported (its costUsd, or its usage priced).
alter table runs add column cost_micros bigint;
alter table runs add column measured_cost_micros bigint;

-- The estimates' means, kept as each measured run is recorded: the sum and the number of the
-- measured costs of a cell's runs (`case:<cell key>`) and of a combination's on any case
-- (`combination:<identity>`), so a top-up reads the few it needs by key.
create table run_cost_means (
    mean_key text primary key,
    total_micros bigint not null,
    runs bigint not null
);
