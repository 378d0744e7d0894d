-- How each top-up of a coverage plan or a ladder ended, for the metrics: launched (it ran and
-- recorded its answer), failed (it held the claim and recorded none), busy (another top-up of the
-- same plan held it) or paused (the plan is paused or the ladder disabled); with the claim's
-- time as its start, so a top-up that ran has a duration. One row per top-up (its workflow run
-- id; a busy answer the API gave without starting one gets an id of its own).
create table top_up_outcomes (
    id text primary key,
    kind text not null,
    target_id text not null,
    outcome text not null,
    started_ms bigint,
    ended_ms bigint not null
);

-- The verification metrics read the Candidates' verdict events by kind at every scrape.
create index events_kind on events (kind, entity);
