-- Coverage plans: groups, the plan's fields beside the pause flag the run lane made room for,
-- the account's buffer target, the top-up claim and each top-up's answer, and on jobs the
-- top-up's natural key and the withheld retry.
-- Times are milliseconds since the epoch (UTC); booleans are 0/1 bigints; JSON is text.

create table coverage_groups (
    id text primary key,
    account_id text not null references accounts (id),
    name text not null,
    kind text not null,
    members text not null,
    created_at bigint not null,
    updated_at bigint not null
);
create index coverage_groups_account on coverage_groups (account_id, created_at);

alter table coverage_plans add column name text;
alter table coverage_plans add column case_groups text;
alter table coverage_plans add column combo_groups text;
alter table coverage_plans add column cases text;
alter table coverage_plans add column combinations text;
alter table coverage_plans add column runs_per_cell bigint;
alter table coverage_plans add column outer_axis text;
alter table coverage_plans add column buffer_target text;
alter table coverage_plans add column auto_top_up bigint not null default 1;
alter table coverage_plans add column topping_up_at bigint;
alter table coverage_plans add column topping_up_by text;
alter table coverage_plans add column updated_at bigint;
create index coverage_plans_account on coverage_plans (account_id, created_at);

create table coverage_settings (
    account_id text primary key references accounts (id),
    buffer_target text not null,
    updated_at bigint not null
);

create table coverage_topups (
    id text primary key,
    plan_id text not null,
    account_id text not null,
    answer text not null,
    at bigint not null
);

alter table jobs add column topup_key text;
alter table jobs add column retry_withheld bigint not null default 0;
create unique index jobs_topup_key on jobs (topup_key);
