-- requires: coco_protocols
-- matches: the match table, one row per evaluated detection and (protocol, run).
-- tp_bits[a] / ignored_bits[a] (1-based a = area range) have bit t (0-based IoU threshold) set when the
-- detection is a true positive / ignored there; neither means false positive. matched_gt_id[t] and
-- matched_iou[t] give its partner in the first area range.
CREATE OR REPLACE VIEW matches AS
SELECT * FROM read_parquet(getvariable('coco_dt'), hive_partitioning = true);
