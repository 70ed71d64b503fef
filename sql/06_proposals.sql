-- requires: proposals
-- proposals: every proposal run (proposal_id = 1-based position in its source); rank is the position in the
-- image after ordering and de-duplication, null for a duplicate (kept, never evaluated).
CREATE OR REPLACE VIEW proposals AS
SELECT * FROM read_parquet(getvariable('proposals'), hive_partitioning = true);
