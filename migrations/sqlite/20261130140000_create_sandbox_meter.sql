-- The monthly sandbox meter: reservations, the seconds charged per project and month, and the
-- awake intervals already charged (so overlapping uses are charged once).

create table sandbox_usage (
    project_id text not null,
    month text not null,
    charged_seconds integer not null,
    primary key (project_id, month)
);

create table sandbox_reservations (
    id text primary key,
    project_id text not null,
    month text not null,
    purpose text not null,
    seconds integer not null,
    status text not null,
    charged_seconds integer,
    created_at integer not null,
    settled_at integer
);
create index sandbox_reservations_open on sandbox_reservations (project_id, month, status);

create table sandbox_awake (
    project_id text not null,
    start_at integer not null,
    end_at integer not null,
    primary key (project_id, start_at)
);
