-- requires: openimages_protocols
-- The OpenImages match tables (protocol=openimages[-<hash>], the TF Object Detection API's challenge evaluator).
-- openimages_matches: one row per evaluated detection (verified class, valid box, score > -10, in the top 10,000 of
-- its class in its image); outcome 0 FP, 1 TP, 2 ignored (difficult), 3 ignored (inside a group-of box); dt_rank its
-- position in the evaluator's order within (image, class). openimages_gt_matches: one row per ground truth;
-- group_of, and a group-of box's group_score (the largest score of its detections, from 0; null if none).
CREATE OR REPLACE VIEW openimages_matches AS
SELECT * FROM read_parquet(getvariable('openimages_dt'), hive_partitioning = true);

CREATE OR REPLACE VIEW openimages_gt_matches AS
SELECT * FROM read_parquet(getvariable('openimages_gt'), hive_partitioning = true);

CREATE OR REPLACE VIEW openimages_protocols AS
SELECT protocol, run, match.iou_threshold AS iou_threshold, match.group_of_weight AS group_of_weight,
       match.verified_labels AS verified_labels, match.max_dets AS max_dets
FROM read_json(getvariable('openimages_protocols'), hive_partitioning = true);

-- openimages_order_tables: each entry's place in its class's curve (position, from 0) as the Python metric sorted
-- them (np.argsort(scores)[::-1]), one file per match table (matches/protocol=P/run=R/order.parquet) written when the
-- run's OpenImages AP is computed in Python; 22_openimages_order.sql reads them, none until then.
-- openimages_order_pending: 'protocol/run' of the match tables without one.
CREATE OR REPLACE VIEW openimages_order_tables AS
SELECT NULL::VARCHAR AS protocol, NULL::VARCHAR AS run, NULL::BIGINT AS category_id, NULL::BIGINT AS image_id,
       NULL::TINYINT AS side, NULL::BIGINT AS at, NULL::BIGINT AS position
WHERE false;

-- openimages_entries: what the evaluator's per-class curve is made of: the detections that are not ignored (label 1
-- TP, 0 FP) and one entry per group-of box holding a detection scored above 0 (label group_of_weight, at its
-- group_score; none when the weight is 0); `at` orders them as the evaluator concatenates them; `position` is the
-- entry's place in its class's curve where the order table is stored (null otherwise).
CREATE OR REPLACE VIEW openimages_entries AS
WITH entries AS (
    SELECT m.protocol, m.run, m.category_id, m.image_id, 0 AS side, m.dt_rank::BIGINT AS at, m.score,
           CASE WHEN m.outcome = 1 THEN 1.0 ELSE 0.0 END AS label
    FROM openimages_matches AS m WHERE m.outcome IN (0, 1)
    UNION ALL
    SELECT g.protocol, g.run, g.category_id, g.image_id, 1 AS side, g.gt_id AS at, g.group_score AS score,
           p.group_of_weight AS label
    FROM openimages_gt_matches AS g JOIN openimages_protocols AS p USING (protocol, run)
    WHERE g.group_of AND g.group_score > 0 AND p.group_of_weight > 0 AND g.ignored_bits & 2 = 0
)
SELECT e.*, o.position
FROM entries AS e LEFT JOIN openimages_order_tables AS o USING (protocol, run, category_id, image_id, side, "at");

-- openimages_ap: AP per class as compute_precision_recall / compute_average_precision (all-point, precision made
-- non-increasing from the right), TP (weighted) and FP counts and num_gt (regular + group_of_weight per group-of
-- box, difficult ones left out); NaN where num_gt is 0. The curve follows the stored order (position) where the run's
-- AP was computed in Python: the same order as NumPy's unstable sort, ties included; without it (a match table of
-- openimages_order_pending) equal scores are taken in reverse concatenation order (a stable sort's; NumPy's is not
-- stable), and with ties in a class the AP may differ from the Python metric's.
CREATE OR REPLACE VIEW openimages_ap AS
WITH num_gt AS (
    SELECT g.protocol, g.run, g.category_id,
           sum(CASE WHEN g.group_of THEN p.group_of_weight ELSE 1.0 END) AS num_gt
    FROM openimages_gt_matches AS g JOIN openimages_protocols AS p USING (protocol, run)
    WHERE g.ignored_bits = 0 GROUP BY ALL
), curve AS (
    SELECT e.protocol, e.run, e.category_id, e.label,
           sum(e.label) OVER w AS cum_tp,
           sum(CASE WHEN e.label <= 0 THEN 1.0 ELSE 0.0 END) OVER w AS cum_fp,
           row_number() OVER w AS k
    FROM openimages_entries AS e
    WINDOW w AS (PARTITION BY e.protocol, e.run, e.category_id
                 ORDER BY e.position, e.score DESC, e.image_id DESC, e.side DESC, e.at DESC
                 ROWS UNBOUNDED PRECEDING)
), points AS (
    SELECT c.*, c.cum_tp / (c.cum_tp + c.cum_fp) AS precision, c.cum_tp / n.num_gt AS recall
    FROM curve AS c JOIN num_gt AS n USING (protocol, run, category_id) WHERE n.num_gt > 0
), envelope AS (
    SELECT *, max(precision) OVER (PARTITION BY protocol, run, category_id ORDER BY k
                                   ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS best,
           coalesce(lag(recall) OVER (PARTITION BY protocol, run, category_id ORDER BY k), 0.0) AS previous
    FROM points
), per_class AS (
    SELECT protocol, run, category_id, sum(CASE WHEN recall <> previous THEN (recall - previous) * best ELSE 0 END) AS ap
    FROM envelope GROUP BY ALL
), counts AS (
    SELECT protocol, run, category_id, sum(label) AS tp, count(*) FILTER (WHERE label <= 0) AS fp
    FROM openimages_entries GROUP BY ALL
)
SELECT p.protocol, p.run, c.category_id, c.name AS label_name,
       CASE WHEN coalesce(n.num_gt, 0) = 0 THEN 'NaN'::DOUBLE ELSE coalesce(a.ap, 0.0) END AS ap,
       coalesce(k.tp, 0.0) AS tp, coalesce(k.fp, 0)::BIGINT AS fp, coalesce(n.num_gt, 0.0) AS num_gt
FROM openimages_protocols AS p CROSS JOIN categories AS c
LEFT JOIN num_gt AS n ON n.protocol = p.protocol AND n.run = p.run AND n.category_id = c.category_id
LEFT JOIN per_class AS a ON a.protocol = p.protocol AND a.run = p.run AND a.category_id = c.category_id
LEFT JOIN counts AS k ON k.protocol = p.protocol AND k.run = p.run AND k.category_id = c.category_id;

-- openimages_map: the mAP over the classes with ground truth (np.nanmean).
CREATE OR REPLACE VIEW openimages_map AS
SELECT protocol, run, avg(ap) FILTER (WHERE NOT isnan(ap)) AS map FROM openimages_ap GROUP BY ALL;
