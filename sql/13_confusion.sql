-- requires: confusion_protocols
-- confusion_assignments: the cell of a confusion matrix each counted object falls in (COCO matching convention, see
-- README "Confusion matrices"): a kept detection (gt_category_id NULL: the background row; gt_id and iou its true
-- positive's or confusion's partner) or a missed ground truth (dt_category_id NULL: the background column). Protocol
-- 'confusion' is IoU 0.5 and score >= 0.05 on the default COCO match table; others are 'confusion-<hash>'.
CREATE OR REPLACE VIEW confusion_assignments AS
SELECT * EXCLUDE (shard) FROM read_parquet(getvariable('confusion_assignments'), hive_partitioning = true);

-- confusion_protocols: the parameters of each table (score_threshold: a number, or [category_id, threshold] pairs).
CREATE OR REPLACE VIEW confusion_protocols AS
SELECT protocol, run, CAST(match ->> 'iou_threshold' AS DOUBLE) AS iou_threshold,
       match -> 'score_threshold' AS score_threshold, match -> 'category_ids' AS category_ids,
       match -> 'coco' AS coco_protocol
FROM read_json(getvariable('confusion_protocols'), columns = {match: 'JSON'}, hive_partitioning = true);

-- confusion_matrix: the non-zero cells (rows: ground truth, columns: predictions, NULL: background), with the
-- count over its row's sum (row-normalised).
CREATE OR REPLACE VIEW confusion_matrix AS
SELECT protocol, run, gt_category_id, dt_category_id, count(*) AS count,
       count(*) / sum(count(*)) OVER (PARTITION BY protocol, run, gt_category_id) AS fraction
FROM confusion_assignments GROUP BY protocol, run, gt_category_id, dt_category_id;

-- confusion_image_cells: the non-zero cells of each image's matrix.
CREATE OR REPLACE VIEW confusion_image_cells AS
SELECT protocol, run, image_id, gt_category_id, dt_category_id, count(*) AS count
FROM confusion_assignments GROUP BY ALL;
