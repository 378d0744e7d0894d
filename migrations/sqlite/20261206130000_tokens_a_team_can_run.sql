-- Tokens a team can run (decision 0042): each named, optionally expiring, its display prefix kept
-- (tokens made before this have none) and its last use written at most once a minute; accounts
-- that an operator disables and enables; and the actor of each event written through the API
-- (the account and the name of the token it used).

alter table api_tokens add column name text not null default 'first';
alter table api_tokens add column prefix text;
alter table api_tokens add column expires_at integer;
alter table api_tokens add column last_used_at integer;
create index api_tokens_account on api_tokens (account_id, created_at);

alter table accounts add column disabled_at integer;

alter table events add column actor_account_id text;
alter table events add column actor_account_name text;
alter table events add column actor_token_name text;
create index events_actor on events (actor_account_id, id);
