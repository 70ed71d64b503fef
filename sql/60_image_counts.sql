-- requires: coco_protocols
-- image_counts: true positives, false positives and false negatives per image, IoU threshold and run,
-- in the first area range ('all') with every evaluated detection (the last max dets); fn = n_gt - tp.
CREATE OR REPLACE VIEW image_counts AS
WITH dets AS (
    SELECT m.protocol, m.run, m.image_id, t.iou_threshold,
           count(*) FILTER (WHERE (m.tp_bits[1] >> t.thr_index) & 1 = 1) AS tp,
           count(*) FILTER (WHERE (m.tp_bits[1] >> t.thr_index) & 1 = 0
                             AND (m.ignored_bits[1] >> t.thr_index) & 1 = 0) AS fp,
           count(*) FILTER (WHERE (m.ignored_bits[1] >> t.thr_index) & 1 = 1) AS ignored_dt
    FROM matches AS m
    JOIN protocol_iou_thresholds AS t ON t.protocol = m.protocol AND t.run = m.run
    GROUP BY ALL
), truths AS (
    SELECT protocol, run, image_id, count(*) FILTER (WHERE ignored_bits & 1 = 0) AS n_gt
    FROM gt_matches GROUP BY ALL
), keys AS (
    SELECT t.protocol, t.run, i.image_id, t.iou_threshold
    FROM protocol_iou_thresholds AS t CROSS JOIN images AS i
)
SELECT k.protocol, k.run, k.image_id, k.iou_threshold,
       coalesce(d.tp, 0) AS tp, coalesce(d.fp, 0) AS fp, coalesce(g.n_gt, 0) - coalesce(d.tp, 0) AS fn,
       coalesce(g.n_gt, 0) AS n_gt, coalesce(d.ignored_dt, 0) AS ignored_dt
FROM keys AS k
LEFT JOIN dets AS d USING (protocol, run, image_id, iou_threshold)
LEFT JOIN truths AS g USING (protocol, run, image_id);
