-- requires: coco_protocols
-- image_counts: true positives, false positives and false negatives per image, IoU threshold and run,
-- in the first area range ('all') with every evaluated detection (the last max dets); fn = n_gt - tp.
-- Detections are counted per (image, outcome bits) first: a few patterns per image, not every detection, meet the
-- IoU thresholds.
CREATE OR REPLACE VIEW image_counts AS
WITH outcomes AS (
    SELECT protocol, run, image_id, tp_bits[1] AS tp_bits, ignored_bits[1] AS ignored_bits, count(*) AS n
    FROM matches GROUP BY ALL
), dets AS (
    SELECT o.protocol, o.run, o.image_id, t.iou_threshold,
           sum(o.n) FILTER (WHERE (o.tp_bits >> t.thr_index) & 1 = 1) AS tp,
           sum(o.n) FILTER (WHERE (o.tp_bits >> t.thr_index) & 1 = 0
                             AND (o.ignored_bits >> t.thr_index) & 1 = 0) AS fp,
           sum(o.n) FILTER (WHERE (o.ignored_bits >> t.thr_index) & 1 = 1) AS ignored_dt
    FROM outcomes AS o
    JOIN protocol_iou_thresholds AS t ON t.protocol = o.protocol AND t.run = o.run
    GROUP BY ALL
), truths AS (
    SELECT protocol, run, image_id, count(*) FILTER (WHERE ignored_bits & 1 = 0) AS n_gt
    FROM gt_matches GROUP BY ALL
), keys AS (
    SELECT t.protocol, t.run, i.image_id, t.iou_threshold
    FROM protocol_iou_thresholds AS t CROSS JOIN images AS i
)
SELECT k.protocol, k.run, k.image_id, k.iou_threshold,
       coalesce(d.tp, 0)::BIGINT AS tp, coalesce(d.fp, 0)::BIGINT AS fp,
       (coalesce(g.n_gt, 0) - coalesce(d.tp, 0))::BIGINT AS fn,
       coalesce(g.n_gt, 0) AS n_gt, coalesce(d.ignored_dt, 0)::BIGINT AS ignored_dt
FROM keys AS k
LEFT JOIN dets AS d USING (protocol, run, image_id, iou_threshold)
LEFT JOIN truths AS g USING (protocol, run, image_id);
