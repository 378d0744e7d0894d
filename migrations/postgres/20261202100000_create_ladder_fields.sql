-- Ladders: the ladder's fields beside the enabled flag the run lane made room for (rungs as
-- JSON, each with its stable id), the top-up claim, each climber's steering and every verdict
-- keyed by climber, rung id and the exact case version it was decided against.
-- Times are milliseconds since the epoch (UTC); booleans are 0/1 bigints; JSON is text.

alter table ladders add column name text;
alter table ladders add column rungs text;
alter table ladders add column combo_groups text;
alter table ladders add column combinations text;
alter table ladders add column runs_per_cell bigint;
alter table ladders add column gate text;
alter table ladders add column unloaded_counts_as_broken bigint not null default 1;
alter table ladders add column early_stop bigint not null default 0;
alter table ladders add column outer_axis text;
alter table ladders add column buffer_target text;
alter table ladders add column auto_top_up bigint not null default 1;
alter table ladders add column topping_up_at bigint;
alter table ladders add column topping_up_by text;
alter table ladders add column updated_at bigint;
create index ladders_account on ladders (account_id, created_at);

create table ladder_steering (
    ladder_id text not null,
    climber_key text not null,
    priority bigint not null,
    focused bigint not null,
    held bigint not null,
    updated_at bigint not null,
    primary key (ladder_id, climber_key)
);

create table ladder_verdicts (
    ladder_id text not null,
    climber_key text not null,
    rung_id text not null,
    version text not null,
    verdict text,
    override_outcome text,
    updated_at bigint not null,
    primary key (ladder_id, climber_key, rung_id, version)
);
