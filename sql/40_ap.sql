-- requires: coco_protocols
-- ap_by_protocol: COCO 101-point AP and final recall per (protocol, run, category, IoU threshold, area
-- range, max dets), -1 where the category has no regular ground truth (pycocotools' precision/recall).
-- The interpolated precision at recall threshold R is the highest precision at any point with
-- recall >= R (pycocotools' right-to-left envelope, sampled with searchsorted), 0 when none reaches R;
-- that maximum is always at a true positive, so only those points are joined with the thresholds.
CREATE OR REPLACE VIEW ap_by_protocol AS
WITH grid AS (
    SELECT p.protocol, p.run, k.category_id, t.thr_index, t.iou_threshold, a.area_index, a.area_range, d.max_dets
    FROM protocols AS p
    JOIN (SELECT category_id FROM categories UNION ALL SELECT -1) AS k
      ON (k.category_id = -1) = NOT p.use_cats
    JOIN protocol_iou_thresholds AS t ON t.protocol = p.protocol AND t.run = p.run
    JOIN protocol_area_ranges AS a ON a.protocol = p.protocol AND a.run = p.run
    JOIN protocol_max_dets AS d ON d.protocol = p.protocol AND d.run = p.run
), sampled AS (
    SELECT c.protocol, c.run, c.category_id, c.thr_index, c.area_index, c.max_dets, r.recall_threshold,
           r.n_recall_thresholds, max(c.precision) AS precision
    FROM pr_curve AS c
    JOIN protocol_recall_thresholds AS r
      ON r.protocol = c.protocol AND r.run = c.run AND c.recall >= r.recall_threshold
    WHERE c.is_tp
    GROUP BY ALL
), interpolated AS (
    SELECT protocol, run, category_id, thr_index, area_index, max_dets,
           sum(precision) / any_value(n_recall_thresholds) AS ap
    FROM sampled
    GROUP BY ALL
), final_recall AS (
    SELECT protocol, run, category_id, thr_index, area_index, max_dets, max(recall) AS recall
    FROM pr_curve
    GROUP BY ALL
)
SELECT g.protocol, g.run, g.category_id, g.iou_threshold, g.area_range, g.max_dets,
       CASE WHEN coalesce(n.n_gt, 0) = 0 THEN -1 ELSE coalesce(i.ap, 0) END AS ap,
       CASE WHEN coalesce(n.n_gt, 0) = 0 THEN -1 ELSE coalesce(f.recall, 0) END AS recall
FROM grid AS g
LEFT JOIN regular_gt AS n USING (protocol, run, category_id, area_index)
LEFT JOIN interpolated AS i USING (protocol, run, category_id, thr_index, area_index, max_dets)
LEFT JOIN final_recall AS f USING (protocol, run, category_id, thr_index, area_index, max_dets);

-- ap: the same for the default COCO protocol, with the columns scripts rely on.
CREATE OR REPLACE VIEW ap AS
SELECT run, category_id, iou_threshold, area_range, max_dets, ap, recall
FROM ap_by_protocol
WHERE protocol = 'coco';
