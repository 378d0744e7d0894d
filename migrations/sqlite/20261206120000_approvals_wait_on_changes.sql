-- A Change can wait on a person with no promotable Candidate (a selection no one won, a repair
-- that fell short again): its request names the Change, with no Candidate and no tree. Every
-- approval names its Change. SQLite cannot drop a NOT NULL, so the table is rebuilt.

create table approvals_next (
    id text primary key,
    candidate_id text unique references candidates (id),
    change_id text not null references changes (id),
    project_id text not null references projects (id),
    status text not null,
    tree text,
    trigger_kind text not null,
    reason text not null,
    requested_at integer not null,
    decided_at integer,
    decided_by text,
    decision_reason text
);
insert into approvals_next (id, candidate_id, change_id, project_id, status, tree, trigger_kind, reason,
                            requested_at, decided_at, decided_by, decision_reason)
select a.id, a.candidate_id, k.change_id, a.project_id, a.status, a.tree, a.trigger_kind, a.reason,
       a.requested_at, a.decided_at, a.decided_by, a.decision_reason
from approvals a join candidates k on k.id = a.candidate_id;
drop table approvals;
alter table approvals_next rename to approvals;
create index approvals_status on approvals (status, requested_at);
create index approvals_change on approvals (change_id, status);
-- One open request per waiting Change without a Candidate.
create unique index approvals_change_request on approvals (change_id)
    where candidate_id is null and status = 'requested';
