-- Events of an account's coverage groups, plans, buffer setting and ladders are that account's
-- (they were every account's to read): the owner comes from the entity's row (a plan's top-up
-- events name it by origin, `plan:<id>`), else from the event's own `accountId`; '' when
-- neither is known (seen by nobody).
update events set account_id = coalesce(
    (select g.account_id from coverage_groups g where g.id = events.entity),
    (select p.account_id from coverage_plans p where p.id = events.entity or 'plan:' || p.id = events.entity),
    (select l.account_id from ladders l where l.id = events.entity or 'ladder:' || l.id = events.entity),
    (select a.id from accounts a where a.id = events.entity),
    json_extract(events.payload, '$.accountId'),
    ''
)
where kind like 'coverage%' or kind like 'ladder.%';
