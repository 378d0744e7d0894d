-- A Sandbox's life as a fact every worker of the deployment sees: its lease (live, or being
-- removed), its last use, and the commands running in it (each with an expiry, so a worker that
-- died mid-command holds the Sandbox only until that command's time is up). One row per
-- project's Sandbox; SANDBOX_MAX counts these rows.

create table sandbox_leases (
    project_id text primary key,
    holder text not null,
    state text not null,
    last_use_ms bigint not null,
    state_since_ms bigint not null,
    created_ms bigint not null
);

create table sandbox_execs (
    id text primary key,
    project_id text not null,
    holder text not null,
    started_ms bigint not null,
    expires_ms bigint not null
);
create index sandbox_execs_project on sandbox_execs (project_id);

-- Every lease change takes this row first, so admissions, command starts and removals are
-- serialized across every worker (SQLite serializes writers already).
create table sandbox_lease_lock (
    id integer primary key,
    changes bigint not null
);
insert into sandbox_lease_lock (id, changes) values (1, 0);

-- The deployment's identity: the label on every container it makes, unless BELAY_DEPLOYMENT names
-- one. Two deployments on one Docker Engine never touch each other's containers.
create table deployment (
    id integer primary key,
    name text not null
);
insert into deployment (id, name) values (1, 'd' || substr(md5(random()::text || clock_timestamp()::text), 1, 16));
