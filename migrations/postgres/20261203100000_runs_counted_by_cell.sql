-- SQLite only: there the matrix's and the ladder board's grouped run counts read a covering index
-- (cell_key, test_type, loaded, id) in place of the wide run rows. PostgreSQL aggregates them
-- faster by a sequential scan and a hash, which the wider index made it give up (measured by
-- `belay bench coverage`), so it keeps `runs_cell`.
select 1;
