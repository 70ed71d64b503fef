-- requires: coco_protocols
-- protocols: the parameters of every match table (from its protocol.json), and one view per list.
CREATE OR REPLACE VIEW protocols AS
SELECT protocol, run,
       match.name AS name, match.iou_thresholds AS iou_thresholds, match.area_ranges AS area_ranges,
       match.max_det_cap AS max_det_cap, match.use_cats AS use_cats, match.zero_id_quirk AS zero_id_quirk,
       accumulation.max_dets AS max_dets, accumulation.recall_thresholds AS recall_thresholds
FROM read_json(getvariable('coco_protocols'), hive_partitioning = true);

-- coco_keyed_protocols, coco_keyed_matches, coco_keyed_gt_matches: protocols, matches and gt_matches with the key
-- {protocol, run} the COCO accumulation macros (09_coco_accumulation.sql) group by.
CREATE OR REPLACE VIEW coco_keyed_protocols AS SELECT {'protocol': protocol, 'run': run} AS key, * FROM protocols;
CREATE OR REPLACE VIEW coco_keyed_matches AS SELECT {'protocol': protocol, 'run': run} AS key, * FROM matches;
CREATE OR REPLACE VIEW coco_keyed_gt_matches AS SELECT {'protocol': protocol, 'run': run} AS key, * FROM gt_matches;

CREATE OR REPLACE VIEW protocol_iou_thresholds AS
SELECT key.protocol, key.run, * EXCLUDE (key) FROM coco_iou_thresholds(coco_keyed_protocols);

CREATE OR REPLACE VIEW protocol_area_ranges AS
SELECT key.protocol, key.run, * EXCLUDE (key) FROM coco_area_ranges(coco_keyed_protocols);

CREATE OR REPLACE VIEW protocol_max_dets AS
SELECT key.protocol, key.run, * EXCLUDE (key) FROM coco_max_dets(coco_keyed_protocols);

CREATE OR REPLACE VIEW protocol_recall_thresholds AS
SELECT key.protocol, key.run, * EXCLUDE (key) FROM coco_recall_thresholds(coco_keyed_protocols);
