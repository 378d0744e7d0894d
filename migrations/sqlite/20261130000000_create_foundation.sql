-- Accounts, tokens, events, catalogue, jobs, runs and reviews: the run lane.
-- Times are milliseconds since the epoch (UTC); booleans are 0/1 integers; JSON is text.

create table accounts (
    id text primary key,
    name text not null,
    created_at integer not null
);

create table api_tokens (
    id text primary key,
    account_id text not null references accounts (id),
    token_hash text not null unique,
    created_at integer not null,
    revoked_at integer
);

create table events (
    id integer primary key autoincrement,
    entity text not null,
    kind text not null,
    payload text not null,
    at integer not null
);
create index events_entity on events (entity, id);

create table test_cases (
    slug text primary key,
    created_at integer not null
);

create table test_case_versions (
    slug text not null references test_cases (slug),
    version text not null,
    test_type text not null,
    variants text not null,
    engines text not null,
    title text,
    ingested_at integer not null,
    updated_at integer not null,
    primary key (slug, version)
);

create table harnesses (
    name text primary key,
    provider_routed integer not null,
    max_parallelism integer not null,
    adapter text not null,
    created_at integer not null,
    updated_at integer not null
);

create table models (
    id text primary key,
    context_window integer,
    input_per_mtok_usd real,
    output_per_mtok_usd real,
    created_at integer not null,
    updated_at integer not null
);

create table gg_configs (
    id text primary key,
    account_id text not null references accounts (id),
    name text not null,
    launch_slots text not null,
    capabilities text not null,
    deleted_at integer,
    created_at integer not null,
    updated_at integer not null
);
create index gg_configs_account on gg_configs (account_id);

-- Plans and ladders arrive with the coverage issue; jobs already name them as their origin,
-- and a retry looks up whether its origin is paused here.
create table coverage_plans (
    id text primary key,
    account_id text not null references accounts (id),
    paused integer not null default 0,
    created_at integer not null
);

create table ladders (
    id text primary key,
    account_id text not null references accounts (id),
    enabled integer not null default 0,
    created_at integer not null
);

create table jobs (
    queue_seq integer primary key autoincrement,
    id text not null unique,
    status text not null,
    case_slug text not null,
    case_version text not null,
    case_variant text not null,
    engine text not null,
    combo_kind text not null,
    harness text not null,
    model text,
    provider text,
    gg_config_id text,
    gg_config_name text,
    gg_bindings text,
    capabilities text,
    cell_key text not null,
    test_type text,
    jam_models text not null,
    user_id text,
    origin text,
    attempt integer not null,
    retry_of text unique,
    claim_key text,
    error text,
    created_at integer not null,
    queued_at integer,
    pending_at integer,
    dispatched_at integer,
    starting_at integer,
    running_at integer,
    completed_at integer,
    failed_at integer,
    canceled_at integer
);
create index jobs_lane on jobs (harness, status, queue_seq);
create index jobs_status on jobs (status, queue_seq);
create index jobs_cell on jobs (cell_key, status);
create index jobs_origin on jobs (origin, status);
create index jobs_claim on jobs (claim_key);

create table job_transitions (
    seq integer primary key autoincrement,
    job_id text not null,
    from_status text,
    to_status text not null,
    at integer not null
);
create index job_transitions_job on job_transitions (job_id, seq);

-- Claims and enqueues take this row first, so they are serialized on both backends.
create table dispatcher_lock (
    id integer primary key,
    claims integer not null
);
insert into dispatcher_lock (id, claims) values (1, 0);

create table runs (
    id text primary key,
    job_id text not null unique,
    case_slug text not null,
    case_version text not null,
    case_variant text not null,
    engine text not null,
    combo_kind text not null,
    harness text not null,
    model text,
    provider text,
    gg_config_id text,
    gg_config_name text,
    gg_bindings text,
    cell_key text not null,
    test_type text not null,
    loaded integer not null,
    artifacts text not null,
    user_id text,
    origin text,
    completed_at integer not null
);
create index runs_cell on runs (cell_key);
create index runs_case_version on runs (case_slug, case_version);

create table reviews (
    run_id text not null references runs (id),
    account_id text not null references accounts (id),
    ratings text,
    category text,
    worst text,
    note text,
    created_at integer not null,
    updated_at integer not null,
    primary key (run_id, account_id)
);
