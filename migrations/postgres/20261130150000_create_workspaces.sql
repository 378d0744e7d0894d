-- Agent workspaces (one per task run), project workspace policies, and repository-token
-- revocations shared by every API process.

alter table projects add column workspace_policy text not null default '{}';

create table workspaces (
    run_id text primary key references task_runs (id),
    change_id text not null references changes (id),
    project_id text not null references projects (id),
    -- open, published, failed
    status text not null,
    base_commit text,
    start_commit text,
    reservation_id text,
    error text,
    opened_at bigint not null,
    ended_at bigint
);
create index workspaces_change_status on workspaces (change_id, status);

create table repo_token_revocations (
    token_id text primary key,
    revoked_at bigint not null
);
create index repo_token_revocations_at on repo_token_revocations (revoked_at);
