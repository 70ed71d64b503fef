-- requires: analyze_protocols
-- COCO analyze (MATLAB CocoEval.analyze) tables (protocol=analyze[-<hash>]). analyze_matches: one row per detection
-- (the top 100 of its image and category); tp_bits[a] / ignored_bits[a] bit t: TP / ignored in the evaluation of
-- curve t (analyze_protocols.curves: Loc, C50, C75, Sim, Oth) in area range a; neither: FP. analyze_gt_matches:
-- ignored_bits bit a = ignored by MATLAB's rule (crowd, ignore field, or area outside), not counted.
CREATE OR REPLACE VIEW analyze_matches AS
SELECT * FROM read_parquet(getvariable('analyze_dt'), hive_partitioning = true);

CREATE OR REPLACE VIEW analyze_gt_matches AS
SELECT * FROM read_parquet(getvariable('analyze_gt'), hive_partitioning = true);

CREATE OR REPLACE VIEW analyze_protocols AS
SELECT protocol, run, curves, match.area_ranges AS area_ranges, accumulation.recall_thresholds AS recall_thresholds
FROM read_json(getvariable('analyze_protocols'), hive_partitioning = true);

-- analyze_area_ranges, analyze_curves: one row per area range (1-based area_index) and per matched curve (its bit).
CREATE OR REPLACE VIEW analyze_area_ranges AS
SELECT protocol, run, i AS area_index, area_ranges[i].label AS area_range
FROM analyze_protocols, range(1, len(area_ranges) + 1) AS r(i);

CREATE OR REPLACE VIEW analyze_curves AS
SELECT protocol, run, i - 1 AS bit, curves[i] AS curve FROM analyze_protocols, range(1, len(curves) + 1) AS r(i);

-- analyze_detections: every detection's outcome ('tp', 'fp', 'ignored') in each evaluation and area range.
CREATE OR REPLACE VIEW analyze_detections AS
SELECT m.protocol, m.run, m.image_id, m.category_id, m.det_id, m.score, m.dt_rank, a.area_range, c.curve,
       CASE WHEN (m.tp_bits[a.area_index] >> c.bit) & 1 = 1 THEN 'tp'
            WHEN (m.ignored_bits[a.area_index] >> c.bit) & 1 = 1 THEN 'ignored'
            ELSE 'fp' END AS outcome
FROM analyze_matches AS m
JOIN analyze_area_ranges AS a USING (protocol, run)
JOIN analyze_curves AS c USING (protocol, run);

-- analyze_precision: every curve's precision at every recall threshold, per (protocol, run, category, area range):
-- pycocotools' interpolation (the highest precision tp / (tp + fp + eps) at any true positive with recall >= the
-- threshold, ranked by score, image id, rank), 0 where nothing reaches it or the category has no regular ground truth
-- (MATLAB's ps(ps == -1) = 0); BG = 1 where Oth's precision > 0, else 0; FN = 1. The curves are the IoU thresholds of
-- the COCO accumulation's steps (coco_steps of 09_coco_accumulation.sql; the table holds each image's top 100 already,
-- so no cap): a threshold takes the envelope at the first true positive reaching it (an ASOF join).
CREATE OR REPLACE VIEW analyze_precision AS
WITH params AS (
    SELECT protocol, run, '' AS stage, TRUE AS use_cats,
           list_transform(curves, lambda c: NULL::DOUBLE) AS iou_thresholds, area_ranges,
           [9223372036854775807] AS max_dets, recall_thresholds
    FROM analyze_protocols
), dt AS (
    SELECT *, '' AS stage FROM analyze_matches
), gt AS (
    SELECT *, '' AS stage FROM analyze_gt_matches
), counted AS (
    SELECT * FROM coco_counted(dt, params)
), true_positives AS (
    SELECT s.table_id, s.category_id, s.area_index, s.thr_index, s.tp / g.n_gt AS recall,
           max(s.tp / (s.n_counted + 2.220446049250313e-16)) OVER (
               PARTITION BY s.table_id, s.category_id, s.area_index, s.thr_index
               ORDER BY s.n_kept ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS envelope
    FROM coco_steps(counted, params) AS s
    JOIN coco_regular_gt(gt, params) AS g USING (table_id, category_id, area_index)
    WHERE s.is_tp AND g.n_gt > 0
), grid AS (
    SELECT t.table_id, t.protocol, t.run, k.category_id, a.area_index - 1 AS area_index, a.area_range,
           c.bit AS thr_index, c.curve, r.recall_threshold
    FROM coco_tables(params) AS t
    JOIN analyze_area_ranges AS a USING (protocol, run)
    JOIN analyze_curves AS c USING (protocol, run)
    JOIN (SELECT protocol, run, unnest(recall_thresholds) AS recall_threshold FROM analyze_protocols) AS r
      USING (protocol, run)
    CROSS JOIN (SELECT category_id FROM categories) AS k
), matched AS (
    SELECT g.protocol, g.run, g.category_id, g.area_range, g.curve, g.recall_threshold,
           coalesce(p.envelope, 0.0) AS precision
    FROM grid AS g
    ASOF LEFT JOIN true_positives AS p
      ON p.table_id = g.table_id AND p.category_id = g.category_id AND p.area_index = g.area_index
     AND p.thr_index = g.thr_index AND g.recall_threshold <= p.recall
)
SELECT * FROM matched
UNION ALL
SELECT protocol, run, category_id, area_range, 'BG', recall_threshold, CASE WHEN precision > 0 THEN 1.0 ELSE 0.0 END
FROM matched WHERE curve = 'Oth'
UNION ALL
SELECT protocol, run, category_id, area_range, 'FN', recall_threshold, 1.0 FROM matched WHERE curve = 'Oth';

-- analyze_ap_tables: each curve's AP per category and area range as the Python analysis computed it (the rows of
-- AnalyzeEvaluation.ap_table(), accumulation.parquet beside the match table, written with the parameters its
-- protocol.json records; 18_analyze_ap_tables.sql reads them); none until then. analyze_ap_pending: 'protocol/run' of
-- the match tables without one.
CREATE OR REPLACE VIEW analyze_ap_tables AS
SELECT NULL::VARCHAR AS protocol, NULL::VARCHAR AS run, NULL::BIGINT AS category_id, NULL::VARCHAR AS area_range,
       NULL::VARCHAR AS curve, NULL::DOUBLE AS ap
WHERE false;

-- analyze_ap: each curve's AP (the mean of its precision over the recall thresholds) per category and area range:
-- the stored tables (analyze_ap_tables), else the mean of analyze_precision (the same numbers, computed in SQL).
CREATE OR REPLACE VIEW analyze_ap AS
WITH ap AS (
    SELECT protocol, run, category_id, area_range, curve, ap FROM analyze_ap_tables
    UNION ALL
    SELECT protocol, run, category_id, area_range, curve, avg(precision) AS ap
    FROM analyze_precision
    WHERE list_contains(getvariable('analyze_ap_pending'), protocol || '/' || run)
    GROUP BY ALL
)
SELECT a.protocol, a.run, a.category_id, c.name, c.supercategory, a.area_range, a.curve, a.ap
FROM ap AS a LEFT JOIN categories AS c USING (category_id);

-- analyze_summary: the means over every category ('overall', categories without ground truth counting 0) and over
-- the categories of each supercategory ('supercategory').
CREATE OR REPLACE VIEW analyze_summary AS
SELECT protocol, run, 'overall' AS scope, NULL::VARCHAR AS supercategory, area_range, curve, avg(ap) AS ap
FROM analyze_ap GROUP BY ALL
UNION ALL
SELECT protocol, run, 'supercategory', supercategory, area_range, curve, avg(ap) FROM analyze_ap GROUP BY ALL;
