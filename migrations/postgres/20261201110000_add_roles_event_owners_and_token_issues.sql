-- Account roles (operator or member), the owner of each event's entity (null: an entity every
-- account sees; '': an owned entity whose owner is gone, seen by nobody), and the repository
-- tokens the API issued, so that only the owner of a token's project may revoke it.

alter table accounts add column role text not null default 'member';
-- Before roles, the first account was the deployment's bootstrap account.
update accounts set role = 'operator' where id = (select id from accounts order by created_at, id limit 1);

alter table events add column account_id text;
update events set account_id = coalesce(
    (select p.account_id from projects p where p.id = events.entity),
    (select p.account_id from changes c join projects p on p.id = c.project_id where c.id = events.entity),
    (select p.account_id from task_runs r join tasks t on t.id = r.task_id join changes c on c.id = t.change_id
        join projects p on p.id = c.project_id where r.id = events.entity),
    (select e.account_id from edit_sessions e where e.id = events.entity),
    (select g.account_id from gg_configs g where g.id = events.entity),
    (select a.id from accounts a where a.id = events.entity),
    ''
)
where kind like 'account.%' or kind like 'project.%' or kind like 'change.%' or kind like 'task.%'
    or kind like 'task\_run.%' escape '\' or kind like 'workspace.%' or kind like 'change\_set.%' escape '\'
    or kind like 'edit\_session.%' escape '\' or kind like 'gg\_config.%' escape '\';
create index events_account on events (account_id, id);

create table repo_token_issues (
    token_id text primary key,
    project_id text not null,
    account_id text not null,
    expires_at bigint not null
);
