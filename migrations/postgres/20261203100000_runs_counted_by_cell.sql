-- The matrix's and the ladder board's grouped run counts (by cell, with the test type and whether
-- the build loaded, joined to the reviewer's review by run id) read from this index alone, never
-- from the wide run rows. It covers every lookup `runs_cell` served.
create index runs_cell_counts on runs (cell_key, test_type, loaded, id);
drop index runs_cell;
