-- requires: coco_protocols
-- regular_gt: ground truths that count (pycocotools' npig) per (protocol, run, category, area range);
-- category_id is -1 when the protocol pools categories (use_cats false).
CREATE OR REPLACE VIEW regular_gt AS
SELECT g.protocol, g.run, CASE WHEN p.use_cats THEN g.category_id ELSE -1 END AS category_id, a.area_index,
       count(*) FILTER (WHERE (g.ignored_bits >> a.area_index) & 1 = 0) AS n_gt
FROM gt_matches AS g
JOIN protocols AS p ON p.protocol = g.protocol AND p.run = g.run
JOIN protocol_area_ranges AS a ON a.protocol = g.protocol AND a.run = g.run
GROUP BY ALL;

-- pr_curve: the precision-recall curve, one point per counted detection, per (protocol, run, category,
-- IoU threshold, area range, max dets), in pycocotools' order (score descending, image id, rank in image).
-- precision = tp / (tp + fp + eps), eps = 2^-52 as numpy.spacing(1); ignored detections are left out.
CREATE OR REPLACE VIEW pr_curve AS
WITH outcomes AS (
    SELECT m.protocol, m.run, CASE WHEN p.use_cats THEN m.category_id ELSE -1 END AS category_id,
           m.image_id, m.dt_rank, m.score, a.area_index, a.area_range, t.thr_index, t.iou_threshold, d.max_dets,
           (m.tp_bits[a.area_index + 1] >> t.thr_index) & 1 = 1 AS is_tp
    FROM matches AS m
    JOIN protocols AS p ON p.protocol = m.protocol AND p.run = m.run
    JOIN protocol_area_ranges AS a ON a.protocol = m.protocol AND a.run = m.run
    JOIN protocol_iou_thresholds AS t ON t.protocol = m.protocol AND t.run = m.run
    JOIN protocol_max_dets AS d ON d.protocol = m.protocol AND d.run = m.run AND m.dt_rank < d.max_dets
    WHERE (m.ignored_bits[a.area_index + 1] >> t.thr_index) & 1 = 0
), cumulative AS (
    SELECT *,
           sum(is_tp::BIGINT) OVER w AS tp,
           sum((NOT is_tp)::BIGINT) OVER w AS fp
    FROM outcomes
    WINDOW w AS (PARTITION BY protocol, run, category_id, area_index, thr_index, max_dets
                 ORDER BY score DESC, image_id, dt_rank ROWS UNBOUNDED PRECEDING)
)
SELECT c.protocol, c.run, c.category_id, c.iou_threshold, c.area_range, c.max_dets, c.score, c.image_id,
       c.dt_rank, c.is_tp, c.tp, c.fp, g.n_gt, c.area_index, c.thr_index,
       c.tp / g.n_gt AS recall,
       c.tp / ((c.tp + c.fp) + 2.220446049250313e-16) AS precision
FROM cumulative AS c
JOIN regular_gt AS g USING (protocol, run, category_id, area_index)
WHERE g.n_gt > 0;
