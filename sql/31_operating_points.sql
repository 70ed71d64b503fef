-- requires: coco_protocols
-- operating_points: per (protocol, run, category, IoU threshold), area range 'all' (the first), one row per
-- distinct score: the detections kept at score >= threshold and their precision, recall, F1 and LRP (Oksuz et
-- al.: LRP = (sum of (1 - IoU) over TPs / (1 - tau) + FP + FN) / (TP + FP + FN)). Ignored detections count in
-- neither TP nor FP. The same numbers as evalengine.metrics.operating_points (up to float summation order).
CREATE OR REPLACE VIEW operating_points AS
WITH outcomes AS (
    SELECT m.protocol, m.run, CASE WHEN p.use_cats THEN m.category_id ELSE -1 END AS category_id,
           m.score + 0.0 AS score, t.thr_index, t.iou_threshold,
           (m.tp_bits[1] >> t.thr_index) & 1 = 1 AS is_tp,
           (m.ignored_bits[1] >> t.thr_index) & 1 = 1 AS is_ignored,
           m.matched_iou[t.thr_index + 1] AS iou
    FROM matches AS m
    JOIN protocols AS p ON p.protocol = m.protocol AND p.run = m.run
    JOIN protocol_iou_thresholds AS t ON t.protocol = m.protocol AND t.run = m.run
), per_score AS (
    SELECT protocol, run, category_id, thr_index, iou_threshold, score,
           count(*) FILTER (WHERE is_tp) AS tp, count(*) FILTER (WHERE NOT is_tp AND NOT is_ignored) AS fp,
           coalesce(sum(iou) FILTER (WHERE is_tp), 0.0) AS iou_sum
    FROM outcomes
    GROUP BY ALL
), cumulative AS (
    SELECT *, sum(tp) OVER w AS n_tp, sum(fp) OVER w AS n_fp, sum(iou_sum) OVER w AS tp_iou_sum
    FROM per_score
    WINDOW w AS (PARTITION BY protocol, run, category_id, thr_index ORDER BY score DESC ROWS UNBOUNDED PRECEDING)
)
SELECT c.protocol, c.run, c.category_id, c.iou_threshold, c.score AS threshold, g.n_gt,
       c.n_tp, c.n_fp, g.n_gt - c.n_tp AS n_fn,
       CASE WHEN c.n_tp + c.n_fp > 0 THEN c.n_tp / (c.n_tp + c.n_fp) END AS precision,
       c.n_tp / g.n_gt AS recall,
       CASE WHEN c.n_tp > 0 THEN 2 * c.n_tp / (2 * c.n_tp + c.n_fp + (g.n_gt - c.n_tp)) ELSE 0.0 END AS f1,
       ((c.n_tp - c.tp_iou_sum) / (1 - c.iou_threshold) + c.n_fp + (g.n_gt - c.n_tp)) / (c.n_fp + g.n_gt) AS lrp
FROM cumulative AS c
JOIN regular_gt AS g ON g.protocol = c.protocol AND g.run = c.run AND g.category_id = c.category_id
                    AND g.area_index = 0
WHERE g.n_gt > 0;
