-- Usage meters as counters: one row per meter and scope (browser-seconds per UTC day, scope
-- `YYYY-MM-DD`; browser-runs per Candidate, scope the Candidate id), with the seconds still
-- reserved by open sessions. The reservations themselves, settled once.

create table usage_counters (
    meter text not null,
    scope text not null,
    used bigint not null default 0,
    reserved bigint not null default 0,
    primary key (meter, scope)
);

create table browser_reservations (
    id text primary key,
    candidate_id text not null,
    day text not null,
    seconds bigint not null,
    status text not null,
    charged_seconds bigint,
    created_at bigint not null,
    settled_at bigint
);
create index browser_reservations_candidate on browser_reservations (candidate_id, status);
