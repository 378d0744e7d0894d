-- A Change can wait on a person with no promotable Candidate (a selection no one won, a repair
-- that fell short again): its request names the Change, with no Candidate and no tree. Every
-- approval names its Change.

alter table approvals alter column candidate_id drop not null;
alter table approvals alter column tree drop not null;
alter table approvals add column change_id text references changes (id);
update approvals a set change_id = k.change_id from candidates k where k.id = a.candidate_id;
alter table approvals alter column change_id set not null;
create index approvals_change on approvals (change_id, status);
-- One open request per waiting Change without a Candidate.
create unique index approvals_change_request on approvals (change_id)
    where candidate_id is null and status = 'requested';
