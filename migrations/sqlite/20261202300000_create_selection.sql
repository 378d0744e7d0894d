-- Sibling selection, conflicts, Decision Receipts and the model meters.

-- The fork round a Candidate was composed in; Candidates of one round are siblings.
alter table candidates add column sibling_group text;
create index candidates_sibling_group on candidates (sibling_group);

-- Conflicts between two Tasks' ChangeSets, as the conflict review reported them.
create table conflicts (
    id text primary key,
    change_id text not null references changes (id),
    task_a text not null references tasks (id),
    task_b text not null references tasks (id),
    status text not null,
    sides_json text not null,
    summary text,
    review_json text,
    resolved integer not null default 0,
    created_at integer not null
);
create index conflicts_change on conflicts (change_id, created_at);

-- What belay decided, with its inputs and outcome. `dedupe_key` makes a retried decision write
-- one receipt.
create table decision_receipts (
    id text primary key,
    change_id text not null references changes (id),
    kind text not null,
    dedupe_key text not null unique,
    inputs_json text not null,
    outcome_json text not null,
    created_at integer not null
);
create index decision_receipts_change on decision_receipts (change_id, created_at);

-- Meters: model calls per UTC day, model cost per month and per Change (micro-USD).
create table model_usage_counters (
    meter text not null,
    scope text not null,
    period text not null,
    amount integer not null,
    updated_at integer not null,
    primary key (meter, scope, period)
);

-- A ChangeSet the integrate rule set aside: its Task runs again on the other side's work.
alter table change_sets add column rejected_reason text;
