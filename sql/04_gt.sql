-- gt: ground truth boxes (COCO xywh), area, iscrowd, the source's ignore flag, file order; with their shard.
CREATE OR REPLACE VIEW gt AS
SELECT * FROM read_parquet(getvariable('gt'), hive_partitioning = true);
