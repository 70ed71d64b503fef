-- requires: coco_protocols
-- protocols: the parameters of every match table (from its protocol.json), and one view per list.
CREATE OR REPLACE VIEW protocols AS
SELECT protocol, run,
       match.name AS name, match.iou_thresholds AS iou_thresholds, match.area_ranges AS area_ranges,
       match.max_det_cap AS max_det_cap, match.use_cats AS use_cats, match.zero_id_quirk AS zero_id_quirk,
       accumulation.max_dets AS max_dets, accumulation.recall_thresholds AS recall_thresholds
FROM read_json(getvariable('coco_protocols'), hive_partitioning = true);

CREATE OR REPLACE VIEW protocol_iou_thresholds AS
SELECT protocol, run, i - 1 AS thr_index, iou_thresholds[i] AS iou_threshold
FROM protocols, range(1, len(iou_thresholds) + 1) AS r(i);

CREATE OR REPLACE VIEW protocol_area_ranges AS
SELECT protocol, run, i - 1 AS area_index, area_ranges[i].label AS area_range,
       area_ranges[i].lo AS lo, area_ranges[i].hi AS hi
FROM protocols, range(1, len(area_ranges) + 1) AS r(i);

CREATE OR REPLACE VIEW protocol_max_dets AS
SELECT protocol, run, i AS max_dets_index, max_dets[i] AS max_dets
FROM protocols, range(1, len(max_dets) + 1) AS r(i);

CREATE OR REPLACE VIEW protocol_recall_thresholds AS
SELECT protocol, run, recall_thresholds[i] AS recall_threshold, len(recall_thresholds) AS n_recall_thresholds
FROM protocols, range(1, len(recall_thresholds) + 1) AS r(i);
