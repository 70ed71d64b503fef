-- requires: coco_protocols
-- protocols: the parameters of every match table (from its protocol.json), and one view per list. iou_type is what
-- the table matched (bbox, segm, boundary, keypoints; protocol.json records it when it is not bbox).
CREATE OR REPLACE VIEW protocols AS
SELECT protocol, run,
       match.name AS name, coalesce(json_extract_string(to_json(match), '$.iou_type'), 'bbox') AS iou_type, match.iou_thresholds AS iou_thresholds, match.area_ranges AS area_ranges,
       match.max_det_cap AS max_det_cap, match.use_cats AS use_cats, match.zero_id_quirk AS zero_id_quirk,
       accumulation.max_dets AS max_dets, accumulation.recall_thresholds AS recall_thresholds
FROM read_json(getvariable('coco_protocols'), hive_partitioning = true);

-- coco_accumulation_protocols, coco_accumulation_matches, coco_accumulation_gt_matches: protocols, matches and
-- gt_matches with stage '' (a protocol's own match table), the arguments of the COCO accumulation macros
-- (09_coco_accumulation.sql).
CREATE OR REPLACE VIEW coco_accumulation_protocols AS SELECT *, '' AS stage FROM protocols;
CREATE OR REPLACE VIEW coco_accumulation_matches AS SELECT *, '' AS stage FROM matches;
CREATE OR REPLACE VIEW coco_accumulation_gt_matches AS SELECT *, '' AS stage FROM gt_matches;

-- coco_ap_tables: the AP table written beside a match table once its run was evaluated (accumulation.parquet), as
-- 39_coco_ap_tables.sql reads them; none until then. coco_ap_pending: 'protocol/run' of the match tables without one.
CREATE OR REPLACE VIEW coco_ap_tables AS
SELECT NULL::VARCHAR AS protocol, NULL::VARCHAR AS run, NULL::BIGINT AS category_id, NULL::DOUBLE AS iou_threshold,
       NULL::VARCHAR AS area_range, NULL::BIGINT AS max_dets, NULL::DOUBLE AS ap, NULL::DOUBLE AS recall
WHERE false;

-- coco_curve_tables: the precision-recall counts written beside a match table once its run was evaluated
-- (curve.parquet, evalengine.metrics.curve_counts), as 29_coco_curve_tables.sql reads them; none until then.
-- coco_curve_pending: 'protocol/run' of the match tables without one.
CREATE OR REPLACE VIEW coco_curve_tables AS
SELECT NULL::VARCHAR AS protocol, NULL::VARCHAR AS run, NULL::BIGINT AS category_id, NULL::INTEGER AS area_index,
       NULL::BIGINT AS max_dets, NULL::DOUBLE AS score, NULL::BIGINT AS image_id, NULL::BIGINT AS dt_rank,
       NULL::UBIGINT AS tp_bits, NULL::UBIGINT AS ignored_bits, NULL::BIGINT AS n_gt, NULL::BIGINT AS n_kept,
       NULL::BIGINT AS n_steps, NULL::BIGINT[] AS tp, NULL::BIGINT[] AS fp
WHERE false;

CREATE OR REPLACE VIEW protocol_iou_thresholds AS
SELECT * EXCLUDE (stage) FROM coco_iou_thresholds(coco_accumulation_protocols);

CREATE OR REPLACE VIEW protocol_area_ranges AS
SELECT * EXCLUDE (stage) FROM coco_area_ranges(coco_accumulation_protocols);

CREATE OR REPLACE VIEW protocol_max_dets AS
SELECT * EXCLUDE (stage) FROM coco_max_dets(coco_accumulation_protocols);

CREATE OR REPLACE VIEW protocol_recall_thresholds AS
SELECT * EXCLUDE (stage) FROM coco_recall_thresholds(coco_accumulation_protocols);
