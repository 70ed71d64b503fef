-- requires: dt
-- dt: detections of every run (det_id = 1-based position in the run's file), with run and shard.
CREATE OR REPLACE VIEW dt AS
SELECT * FROM read_parquet(getvariable('dt'), hive_partitioning = true);
