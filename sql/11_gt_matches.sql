-- requires: coco_protocols
-- gt_matches: one row per ground truth of an evaluated category and (protocol, run).
-- ignored_bits has bit a set when it is ignored in area range a (crowd, or area outside the range);
-- matched_bits[a] has bit t set when a detection took it at IoU threshold t.
CREATE OR REPLACE VIEW gt_matches AS
SELECT * FROM read_parquet(getvariable('coco_gt'), hive_partitioning = true);
