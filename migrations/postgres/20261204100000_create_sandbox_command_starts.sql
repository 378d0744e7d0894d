-- A Sandbox command's start as a fact that outlives its worker: written before the command is
-- handed to the Sandbox, keyed by the identity of the activity that runs it (workflow, run and
-- activity id, the same for every attempt). A retry of that activity that finds the row answers
-- that the command may have run and does not run it again. Rows are pruned a week after they
-- were written, long after any retry of their activity.

create table sandbox_command_starts (
    activity text primary key,
    project_id text not null,
    started_ms bigint not null
);
create index sandbox_command_starts_started on sandbox_command_starts (started_ms);
