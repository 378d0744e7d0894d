-- A review carries its run's cell key (a run never changes cell), so that on SQLite the matrix
-- counts an account's reviews by cell from this index alone: one range of the account's reviews,
-- already in cell order. Counting them by looking each run up in `reviews` cost one index
-- descent per run of the plan's cells (measured by `belay bench coverage`, decision 0035).
alter table reviews add column cell_key text;
update reviews set cell_key = (select r.cell_key from runs r where r.id = reviews.run_id);
create index reviews_account_cell on reviews (account_id, cell_key);
