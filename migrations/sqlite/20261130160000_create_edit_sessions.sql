-- Code edit sessions: one open per person per project, each with its own Sandbox uid.

create table edit_sessions (
    id text primary key,
    project_id text not null references projects (id),
    account_id text not null references accounts (id),
    uid bigint not null,
    -- open, ended
    status text not null,
    start_commit text,
    opened_at bigint not null,
    last_used_at bigint not null,
    ended_at bigint,
    end_reason text
);
create index edit_sessions_project_status on edit_sessions (project_id, status);
