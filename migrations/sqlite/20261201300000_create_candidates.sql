-- Project policies (versioned), Candidates and their Evidence: what the verification workflow
-- reads and writes.

create table project_policies (
    project_id text not null references projects (id),
    version integer not null,
    policy text not null,
    created_at integer not null,
    primary key (project_id, version)
);

create table candidates (
    id text primary key,
    change_id text not null references changes (id),
    project_id text not null references projects (id),
    base_generation integer not null,
    base_commit text not null,
    base_tree text not null,
    change_set_ids text not null,
    status text not null,
    status_reason text,
    composed_commit text,
    composed_tree text,
    plan_json text,
    selection_json text,
    acceptance_json text,
    metrics_json text not null,
    recomposed_as text,
    created_at integer not null,
    updated_at integer not null
);
create index candidates_change on candidates (change_id, created_at);

-- One record per (Candidate, check, attempt): a retried step writes no second row.
create table evidence (
    id text primary key,
    candidate_id text not null references candidates (id),
    check_id text not null,
    kind text not null,
    attempt integer not null,
    status text not null,
    coverage text not null,
    summary text not null,
    metric_json text,
    object_key text,
    duration_ms integer not null,
    started_at integer not null,
    completed_at integer not null,
    unique (candidate_id, check_id, attempt)
);
