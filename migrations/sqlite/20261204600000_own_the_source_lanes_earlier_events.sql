-- The source lane's events after the Change (policy, verification, Candidate, conflict,
-- approval, repair, canonical, release) written before those kinds were owned get their owner:
-- the entity's owner, else the account the payload names (the entity deleted since), else ''
-- (an owner no longer found: seen by nobody, as for any owned event whose owner is gone).
-- The coverage and ladder kinds were given theirs by 20261204300000.
update events set account_id = coalesce(
    (select p.account_id from projects p where p.id = events.entity),
    (select p.account_id from changes c join projects p on p.id = c.project_id where c.id = events.entity),
    (select p.account_id from candidates k join projects p on p.id = k.project_id where k.id = events.entity),
    (select a.id from accounts a where a.id = events.entity),
    json_extract(events.payload, '$.accountId'),
    ''
)
where account_id is null and (
    kind like 'policy.%' or kind like 'verification.%' or kind like 'candidate.%' or kind like 'conflict.%'
    or kind like 'approval.%' or kind like 'repair.%' or kind like 'canonical.%' or kind like 'release.%'
);
