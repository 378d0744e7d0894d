-- The model meters join the browser's in `usage_counters` (one table for every usage meter):
-- `model_calls` per UTC day (scope the day), `model_cost_month` (scope the month) and
-- `model_cost_change` (scope the Change id), costs in micro-USD. What the old table counted is
-- carried over as used (a reservation still open in it is counted as spent).
insert into usage_counters (meter, scope, used, reserved)
select meter, case when meter = 'model_cost_change' then scope else period end, amount, 0
from model_usage_counters
where true
on conflict (meter, scope) do update set used = usage_counters.used + excluded.used;

drop table model_usage_counters;
