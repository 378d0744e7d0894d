-- Projects: a canonical git repository and its generation (S0 at provisioning).

create table projects (
    id text primary key,
    account_id text not null references accounts (id),
    name text not null,
    status text not null,
    generation integer not null,
    canonical_commit text,
    canonical_tree text,
    policy_ref text,
    error text,
    created_at integer not null,
    updated_at integer not null
);
create index projects_account on projects (account_id, created_at);
