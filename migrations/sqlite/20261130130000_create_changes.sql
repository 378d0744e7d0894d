-- Changes, Tasks, task runs and ChangeSets: what Candidates are composed from.

create table changes (
    id text primary key,
    project_id text not null references projects (id),
    goal text not null,
    acceptance_criteria text not null,
    invariants text not null,
    risk_tier text,
    status text not null,
    created_at integer not null,
    updated_at integer not null
);
create index changes_project on changes (project_id, created_at);

create table tasks (
    id text primary key,
    change_id text not null references changes (id),
    key text not null,
    kind text not null,
    title text not null,
    semantic_resources text not null,
    created_at integer not null,
    unique (change_id, key)
);

create table task_dependencies (
    task_id text not null references tasks (id),
    depends_on text not null references tasks (id),
    primary key (task_id, depends_on)
);

create table task_runs (
    id text primary key,
    task_id text not null references tasks (id),
    status text not null,
    started_at integer not null,
    ended_at integer
);
create index task_runs_task on task_runs (task_id, started_at);

create table change_sets (
    id text primary key,
    task_id text not null references tasks (id),
    run_id text not null unique references task_runs (id),
    commit_id text not null,
    contract_changes text not null,
    data_changes text not null,
    patch_ref text,
    created_at integer not null
);
