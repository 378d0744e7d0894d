-- Forks the daily sweep deleted: the sweep does not consider them again.

create table swept_forks (
    repo text primary key,
    swept_at bigint not null
);
