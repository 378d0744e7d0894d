-- Every attempt of a job's adapter is kept with its failure class (decision 0058); a job and a
-- run record the class their last attempt ended with.
create table job_attempts (
    job_id text not null references jobs (id),
    n bigint not null,
    started_at bigint not null,
    ended_at bigint not null,
    worker text,
    exit_code bigint,
    failure_class text,
    message text,
    log_tail text,
    primary key (job_id, n)
);

alter table jobs add column failure_class text;
alter table runs add column failure_class text;
alter table runs add column failure text;
