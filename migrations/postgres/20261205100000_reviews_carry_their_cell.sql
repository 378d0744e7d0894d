-- A review carries its run's cell key (a run never changes cell). SQLite counts an account's
-- reviews by cell from it (decision 0035); PostgreSQL's hash join of the runs with the account's
-- reviews is as fast as the two counts and returns half the rows, so it keeps the join and needs
-- no index here. The column is kept on both backends so that every write is the same.
alter table reviews add column cell_key text;
update reviews set cell_key = (select r.cell_key from runs r where r.id = reviews.run_id);
