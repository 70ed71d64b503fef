-- requires: borji_protocols
-- borji_detections: Borji & Iranmanesh's error diagnosis (evalengine diagnose), one row per detection of an evaluated
-- category: label (tp, cls_bg = Type I, loc, dup, ignored = on a crowd region), target_gt_id (the matched target, the
-- snap target, the target of largest IoU, or the crowd region), matched_gt_id (its partner in the duplicates step;
-- null: removed there), iou_max (largest IoU with a target of the original box) and area (what its size is
-- attributed by: its target's area; its own box's for cls_bg and ignored).
CREATE OR REPLACE VIEW borji_detections AS
SELECT protocol, run, image_id, category_id, det_id, score,
       ['tp', 'cls_bg', 'loc', 'dup', 'ignored'][label + 1] AS label, target_gt_id, matched_gt_id, iou_max, area
FROM read_parquet(getvariable('borji_dt'), hive_partitioning = true);

-- borji_ground_truths: one row per ground truth of an evaluated category: label (matched, miss, ignored = crowd),
-- matched_det_id (its partner in the duplicates step) and area.
CREATE OR REPLACE VIEW borji_ground_truths AS
SELECT protocol, run, image_id, category_id, gt_id, area, ['matched', 'miss', 'ignored'][label + 1] AS label,
       matched_det_id
FROM read_parquet(getvariable('borji_gt'), hive_partitioning = true);

-- borji_stage: a stage's name from its code (evalengine.match.borji.STAGES).
CREATE OR REPLACE MACRO borji_stage(code) AS ['S0', 'S1_cls', 'S2_loc', 'S3_dup', 'S4_miss', 'S3b_snap_only'][code + 1];

-- borji_stage_matches: the COCO match table (the columns of `matches`) of every stage's detections: S0 the run,
-- S1_cls without Type I errors, S2_loc with mislocalised boxes snapped, S3_dup without duplicates, S4_miss every
-- matched box snapped and the misses added (det_id above the run's), S3b_snap_only snapped without misses.
CREATE OR REPLACE VIEW borji_stage_matches AS
SELECT protocol, run, borji_stage(stage) AS stage,
       * EXCLUDE (protocol, run, stage, shard)
FROM read_parquet(getvariable('borji_stage_dt'), hive_partitioning = true);

-- borji_stage_gt_matches: the ground-truth side of every stage's COCO match table (the columns of `gt_matches`).
CREATE OR REPLACE VIEW borji_stage_gt_matches AS
SELECT protocol, run, borji_stage(stage) AS stage,
       * EXCLUDE (protocol, run, stage, shard)
FROM read_parquet(getvariable('borji_stage_gt'), hive_partitioning = true);

-- borji_stage_protocols: the COCO parameters of every stage's match table (those of the protocol), as `protocols`;
-- iou_type: what the diagnosis compared and moved (bbox, segm: masks, boundary: boundary IoU).
CREATE OR REPLACE VIEW borji_stage_protocols AS
SELECT protocol, run, borji_stage(code) AS stage,
       coalesce(json_extract_string(to_json(match.coco), '$.iou_type'), 'bbox') AS iou_type,
       match.coco.use_cats AS use_cats, match.coco.iou_thresholds AS iou_thresholds, match.coco.area_ranges AS area_ranges,
       accumulation.max_dets AS max_dets, accumulation.recall_thresholds AS recall_thresholds
FROM read_json(getvariable('borji_protocols'), hive_partitioning = true), range(6) AS r(code);

-- borji_ap_tables: each stage's AP table as the Python accumulation computed it when the diagnosis ran (the rows of
-- BorjiEvaluation.ap_table(), accumulation.parquet beside the match table, written with the parameters its
-- protocol.json records; 19_borji_ap_tables.sql reads them); none until then. borji_ap_pending: 'protocol/run' of the
-- match tables without one.
CREATE OR REPLACE VIEW borji_ap_tables AS
SELECT NULL::VARCHAR AS protocol, NULL::VARCHAR AS run, NULL::VARCHAR AS stage, NULL::BIGINT AS category_id,
       NULL::DOUBLE AS iou_threshold, NULL::VARCHAR AS area_range, NULL::BIGINT AS max_dets, NULL::DOUBLE AS ap,
       NULL::DOUBLE AS recall
WHERE false;

-- borji_stage_ap: each stage's COCO AP and recall per (protocol, run, stage, category, IoU threshold, area range,
-- max dets), the columns of `ap_by_protocol`: the stored AP tables (borji_ap_tables), else the COCO accumulation
-- macros (09_coco_accumulation.sql) over the stage match tables (the same numbers, computed in SQL);
-- borji_stage_summary: pycocotools' 12 numbers of each stage (the paper's Table 3 is its AP and AP50 rows).
CREATE OR REPLACE VIEW borji_stage_ap AS
WITH pending_protocols AS (
    SELECT * FROM kept_pending(borji_stage_protocols, 'borji_ap_pending')
), pending_matches AS (
    SELECT * FROM kept_pending(borji_stage_matches, 'borji_ap_pending')
), pending_gt_matches AS (
    SELECT * FROM kept_pending(borji_stage_gt_matches, 'borji_ap_pending')
)
SELECT protocol, run, stage, category_id, iou_threshold, area_range, max_dets, ap, recall FROM borji_ap_tables
UNION ALL
SELECT protocol, run, stage, category_id, iou_threshold, area_range, max_dets, ap, recall
FROM coco_ap(pending_matches, pending_gt_matches, pending_protocols);

CREATE OR REPLACE VIEW borji_stage_summary AS
SELECT * EXCLUDE (iou_type) FROM coco_summary_of(borji_stage_ap, borji_stage_protocols);

-- borji_error_counts: the errors per object size (the paper's pies), in the area ranges of the protocol's COCO
-- parameters (both bounds inclusive, as pycocotools'), and each error's share of the range's errors.
CREATE OR REPLACE VIEW borji_error_counts AS
WITH ranges AS (
    SELECT protocol, run, i - 1 AS area_index, match.coco.area_ranges[i].label AS area_range,
           match.coco.area_ranges[i].lo AS lo, match.coco.area_ranges[i].hi AS hi
    FROM read_json(getvariable('borji_protocols'), hive_partitioning = true),
         range(1, len(match.coco.area_ranges) + 1) AS r(i)
), errors AS (
    SELECT * FROM (VALUES ('cls_bg', 0), ('loc', 1), ('dup', 2), ('miss', 3)) AS e(error, error_index)
), events AS (
    SELECT protocol, run, label AS error, area FROM borji_detections WHERE label IN ('cls_bg', 'loc', 'dup')
    UNION ALL
    SELECT protocol, run, label, area FROM borji_ground_truths WHERE label = 'miss'
)
SELECT r.protocol, r.run, r.area_range, k.error, count(e.area) AS count,
       count(e.area) / nullif(sum(count(e.area)) OVER (PARTITION BY r.protocol, r.run, r.area_index), 0) AS fraction
FROM ranges AS r
CROSS JOIN errors AS k
LEFT JOIN events AS e
  ON e.protocol = r.protocol AND e.run = r.run AND e.error = k.error AND e.area BETWEEN r.lo AND r.hi
GROUP BY r.protocol, r.run, r.area_index, r.area_range, k.error, k.error_index
ORDER BY r.protocol, r.run, r.area_index, k.error_index;
