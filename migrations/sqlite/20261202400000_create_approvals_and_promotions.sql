-- Approvals (one per Candidate, for the exact composed tree, decided once) and promotions (one per
-- Candidate that advanced canonical, with how far its source sync got).

create table approvals (
    id text primary key,
    candidate_id text not null unique references candidates (id),
    project_id text not null references projects (id),
    status text not null,
    tree text not null,
    trigger_kind text not null,
    reason text not null,
    requested_at integer not null,
    decided_at integer,
    decided_by text,
    decision_reason text
);
create index approvals_status on approvals (status, requested_at);

create table promotions (
    candidate_id text primary key references candidates (id),
    project_id text not null references projects (id),
    generation integer not null,
    base_commit text not null,
    commit_id text not null,
    tree text not null,
    created_at integer not null,
    pushed_at integer,
    synced_at integer,
    released_at integer,
    unique (project_id, generation)
);
