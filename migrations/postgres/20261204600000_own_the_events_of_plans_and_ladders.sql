-- Events of an account's coverage groups, plans and settings and of its ladders are its own, as
-- those of its projects are; so are the source lane's events after the Change (policy,
-- verification, Candidate, conflict, approval, repair, canonical, release), which were written
-- without an owner before they were owned. Each gets its entity's owner, or the account its
-- payload names (the entity deleted since), or '' (an owner no longer found: seen by nobody).
update events set account_id = coalesce(
    (select p.account_id from projects p where p.id = events.entity),
    (select p.account_id from changes c join projects p on p.id = c.project_id where c.id = events.entity),
    (select p.account_id from candidates k join projects p on p.id = k.project_id where k.id = events.entity),
    (select a.id from accounts a where a.id = events.entity),
    (select x.account_id from coverage_plans x where x.id = events.entity),
    (select x.account_id from coverage_groups x where x.id = events.entity),
    (select x.account_id from ladders x where x.id = events.entity),
    (events.payload::json ->> 'accountId'),
    ''
)
where account_id is null and (
    kind like 'coverage\_group.%' escape '\' or kind like 'coverage\_plan.%' escape '\'
    or kind like 'coverage\_settings.%' escape '\' or kind like 'ladder.%'
    or kind like 'policy.%' or kind like 'verification.%' or kind like 'candidate.%' or kind like 'conflict.%'
    or kind like 'approval.%' or kind like 'repair.%' or kind like 'canonical.%' or kind like 'release.%'
);
