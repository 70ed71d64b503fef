-- requires: voc_protocols
-- The PASCAL VOC match tables (protocol=voc[-<hash>]): the same columns as the COCO ones (one area slot).
-- voc_matches: one row per detection; tp_bits[1] / ignored_bits[1] bit t: TP / ignored (its best ground truth is
-- difficult) at IoU threshold t; neither: FP. voc_gt_matches: ignored_bits bit 0 = difficult (not counted).
CREATE OR REPLACE VIEW voc_matches AS
SELECT * FROM read_parquet(getvariable('voc_dt'), hive_partitioning = true);

CREATE OR REPLACE VIEW voc_gt_matches AS
SELECT * FROM read_parquet(getvariable('voc_gt'), hive_partitioning = true);

-- voc_protocols: the matching parameters of every VOC match table; voc_iou_thresholds one row per threshold.
CREATE OR REPLACE VIEW voc_protocols AS
SELECT protocol, run, match.iou_thresholds AS iou_thresholds, match.strict AS strict,
       match.use_difficult AS use_difficult
FROM read_json(getvariable('voc_protocols'), hive_partitioning = true);

CREATE OR REPLACE VIEW voc_iou_thresholds AS
SELECT protocol, run, i - 1 AS thr_index, iou_thresholds[i] AS iou_threshold
FROM voc_protocols, range(1, len(iou_thresholds) + 1) AS r(i);

-- voc_detection_outcomes: every detection at every IoU threshold: 'tp', 'fp' or 'ignored', with its partner.
CREATE OR REPLACE VIEW voc_detection_outcomes AS
SELECT m.protocol, m.run, m.image_id, m.category_id, c.name AS category_name, m.det_id, m.score, m.dt_rank,
       t.iou_threshold, t.thr_index,
       CASE WHEN (m.tp_bits[1] >> t.thr_index) & 1 = 1 THEN 'tp'
            WHEN (m.ignored_bits[1] >> t.thr_index) & 1 = 1 THEN 'ignored'
            ELSE 'fp' END AS outcome,
       m.matched_gt_id[t.thr_index + 1] AS matched_gt_id,
       m.matched_iou[t.thr_index + 1] AS matched_iou
FROM voc_matches AS m
JOIN voc_iou_thresholds AS t ON t.protocol = m.protocol AND t.run = m.run
LEFT JOIN categories AS c ON c.category_id = m.category_id;

-- voc_pr_curve: voc_eval.py's rec and prec, one point per counted (not ignored) detection of a class in the
-- devkit's order (score descending, then file order: det_id); prec = tp / max(tp + fp, eps).
CREATE OR REPLACE VIEW voc_pr_curve AS
WITH npos AS (
    SELECT protocol, run, category_id, count(*) FILTER (WHERE ignored_bits & 1 = 0) AS n_gt
    FROM voc_gt_matches GROUP BY ALL
), cumulative AS (
    SELECT protocol, run, category_id, iou_threshold, thr_index, score, det_id, image_id, outcome = 'tp' AS is_tp,
           count(*) FILTER (WHERE outcome = 'tp') OVER w AS tp,
           count(*) FILTER (WHERE outcome = 'fp') OVER w AS fp
    FROM voc_detection_outcomes
    WHERE outcome <> 'ignored'
    WINDOW w AS (PARTITION BY protocol, run, category_id, thr_index ORDER BY score DESC, det_id
                 ROWS UNBOUNDED PRECEDING)
)
SELECT c.*, n.n_gt, CASE WHEN n.n_gt > 0 THEN c.tp / n.n_gt END AS recall,
       c.tp / greatest(c.tp + c.fp, 2.220446049250313e-16) AS precision
FROM cumulative AS c
LEFT JOIN npos AS n USING (protocol, run, category_id);

-- voc_ap: per (protocol, run, class, IoU threshold) the VOC2007 11-point AP (ap_voc07: the best precision at recall
-- >= t for t in numpy's arange(0, 1.1, 0.1), whose floats are kept), the VOC2010+ all-point AP (ap_voc12: the
-- right-to-left precision envelope summed over the recall steps), TP, FP and the non-difficult ground truths;
-- AP -1 for a class without non-difficult ground truth. Recall rises only at a true positive, by 1 / n_gt, and the
-- envelope there is the best precision tp / (tp + fp) of the true positives from it on (a false positive's is below
-- that of the true positive before it), so only the true positives are read: the steps of the COCO accumulation
-- (coco_steps of 09_coco_accumulation.sql, one area range, no cap; the devkit's order, score descending then det_id,
-- is its order keys (image_id, dt_rank) set to (0, det_id)). voc07 samples the envelope at the first true positive
-- reaching each of the 11 recalls (counted with an ASOF join on them, as coco_ap does).
CREATE OR REPLACE VIEW voc_ap AS
WITH params AS (
    SELECT protocol, run, '' AS stage, TRUE AS use_cats, iou_thresholds,
           [{'label': 'all', 'lo': 0.0, 'hi': 'inf'::DOUBLE}] AS area_ranges, [9223372036854775807] AS max_dets
    FROM voc_protocols
), dt AS (
    SELECT protocol, run, '' AS stage, category_id, 0 AS image_id, det_id AS dt_rank, score, tp_bits, ignored_bits
    FROM voc_matches
), npos AS (
    SELECT protocol, run, category_id, count(*) FILTER (WHERE ignored_bits & 1 = 0) AS n_gt
    FROM voc_gt_matches GROUP BY ALL
), counts AS (
    SELECT m.protocol, m.run, m.category_id, t.thr_index,
           count(*) FILTER (WHERE (m.tp_bits[1] >> t.thr_index) & 1 = 1) AS tp,
           count(*) FILTER (WHERE ((m.tp_bits[1] | m.ignored_bits[1]) >> t.thr_index) & 1 = 0) AS fp
    FROM voc_matches AS m JOIN voc_iou_thresholds AS t USING (protocol, run)
    GROUP BY ALL
), grid AS (
    SELECT b.table_id, t.protocol, t.run, t.thr_index, t.iou_threshold, k.category_id, coalesce(n.n_gt, 0) AS n_gt
    FROM voc_iou_thresholds AS t JOIN coco_tables(params) AS b USING (protocol, run) CROSS JOIN categories AS k
    LEFT JOIN npos AS n ON n.protocol = t.protocol AND n.run = t.run AND n.category_id = k.category_id
), counted AS (
    SELECT * FROM coco_counted(dt, params)
), true_positives AS (
    SELECT s.table_id, s.category_id, s.thr_index, s.n_kept, s.tp / g.n_gt AS recall,
           max(s.tp / s.n_counted) OVER (PARTITION BY s.table_id, s.category_id, s.thr_index ORDER BY s.n_kept
                                         ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS envelope
    FROM coco_steps(counted, params) AS s
    JOIN grid AS g USING (table_id, category_id, thr_index)
    WHERE s.is_tp AND g.n_gt > 0
), recalls AS (
    SELECT t, row_number() OVER (ORDER BY t) AS n_reached
    FROM (SELECT unnest(['0', '0.1', '0.2', '0.30000000000000004', '0.4', '0.5', '0.6000000000000001',
                         '0.7000000000000001', '0.8', '0.9', '1.0']::DOUBLE[]) AS t)
), sampled AS (
    SELECT p.*, coalesce(r.n_reached, 0) AS n_reached
    FROM true_positives AS p ASOF LEFT JOIN recalls AS r ON p.recall >= r.t
), points AS (
    SELECT table_id, category_id, thr_index,
           sum((recall - coalesce(previous_recall, 0)) * envelope) AS ap_voc12,
           sum(envelope * (n_reached - coalesce(previous_reached, 0))) / 11 AS ap_voc07
    FROM (SELECT *, lag(recall) OVER w AS previous_recall, lag(n_reached) OVER w AS previous_reached
          FROM sampled WINDOW w AS (PARTITION BY table_id, category_id, thr_index ORDER BY n_kept))
    GROUP BY ALL
)
SELECT g.protocol, g.run, g.category_id, g.iou_threshold,
       CASE WHEN g.n_gt = 0 THEN -1 ELSE coalesce(p.ap_voc07, 0) END AS ap_voc07,
       CASE WHEN g.n_gt = 0 THEN -1 ELSE coalesce(p.ap_voc12, 0) END AS ap_voc12,
       coalesce(c.tp, 0) AS tp, coalesce(c.fp, 0) AS fp, g.n_gt
FROM grid AS g
LEFT JOIN points AS p USING (table_id, category_id, thr_index)
LEFT JOIN counts AS c USING (protocol, run, category_id, thr_index);
