-- requires: partitions
-- gt_partitions: the ground-truth label maps of a partition store, one per (image, annotator), as column-major runs
-- (start, length; label = region id by first appearance in a row-major scan, -1 void).
CREATE OR REPLACE VIEW gt_partitions AS
SELECT * FROM read_parquet(getvariable('gt_partitions'), hive_partitioning = true);

-- partitions: the machine partitions of every partition run, one per (image, parameter), as runs.
CREATE OR REPLACE VIEW partitions AS
SELECT * FROM read_parquet(getvariable('partitions'), hive_partitioning = true);
