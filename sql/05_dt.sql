-- requires: dt
-- dt: detections of every run (det_id = 1-based position in the run's file), with run and shard; the mask and keypoint
-- columns of the runs that have them (null in the others: runs differ in columns, hence union_by_name).
CREATE OR REPLACE VIEW dt AS
SELECT * FROM read_parquet(getvariable('dt'), hive_partitioning = true, union_by_name = true);
