-- requires: coco_protocols
-- detection_outcomes: every detection at every IoU threshold of the first area range ('all'):
-- its outcome ('tp', 'fp' or 'ignored'), the ground truth it matched and the IoU, with image and
-- category metadata.
CREATE OR REPLACE VIEW detection_outcomes AS
SELECT m.protocol, m.run, m.image_id, m.category_id, c.name AS category_name, m.det_id, m.score, m.dt_rank,
       t.iou_threshold,
       CASE WHEN (m.tp_bits[1] >> t.thr_index) & 1 = 1 THEN 'tp'
            WHEN (m.ignored_bits[1] >> t.thr_index) & 1 = 1 THEN 'ignored'
            ELSE 'fp' END AS outcome,
       m.matched_gt_id[t.thr_index + 1] AS matched_gt_id,
       m.matched_iou[t.thr_index + 1] AS matched_iou,
       i.* EXCLUDE (image_id, shard)
FROM matches AS m
JOIN protocol_iou_thresholds AS t ON t.protocol = m.protocol AND t.run = m.run
LEFT JOIN categories AS c ON c.category_id = m.category_id
LEFT JOIN images AS i ON i.image_id = m.image_id;
