-- Providers and the lanes beside a harness's cap (decision 0057): a provider may cap how many
-- jobs of its harnesses and models run at once, and so may a model. A harness or a model may
-- name the provider it runs on. A held job records the lane that holds it.
create table providers (
    name text primary key,
    max_parallelism bigint,
    created_at bigint not null,
    updated_at bigint not null
);

alter table models add column provider text;
alter table models add column max_parallelism bigint;
alter table harnesses add column provider text;
alter table jobs add column held_by text;
