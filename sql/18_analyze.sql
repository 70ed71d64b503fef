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
-- (MATLAB's ps(ps == -1) = 0); BG = 1 where Oth's precision > 0, else 0; FN = 1.
CREATE OR REPLACE VIEW analyze_precision AS
WITH thresholds AS (
    SELECT protocol, run, recall_thresholds[i] AS recall_threshold
    FROM analyze_protocols, range(1, len(recall_thresholds) + 1) AS r(i)
), n_gt AS (
    SELECT g.protocol, g.run, g.category_id, a.area_range,
           count(*) FILTER (WHERE (g.ignored_bits >> (a.area_index - 1)) & 1 = 0) AS n_gt
    FROM analyze_gt_matches AS g JOIN analyze_area_ranges AS a USING (protocol, run)
    GROUP BY ALL
), points AS (
    SELECT protocol, run, category_id, area_range, curve, outcome = 'tp' AS is_tp,
           sum((outcome = 'tp')::BIGINT) OVER w AS tp, sum((outcome = 'fp')::BIGINT) OVER w AS fp
    FROM analyze_detections
    WHERE outcome <> 'ignored'
    WINDOW w AS (PARTITION BY protocol, run, category_id, area_range, curve
                 ORDER BY score + 0.0 DESC, image_id, dt_rank ROWS UNBOUNDED PRECEDING)
), sampled AS (
    SELECT p.protocol, p.run, p.category_id, p.area_range, p.curve, t.recall_threshold,
           max(p.tp / ((p.tp + p.fp) + 2.220446049250313e-16)) AS precision
    FROM points AS p
    JOIN n_gt AS n USING (protocol, run, category_id, area_range)
    JOIN thresholds AS t ON t.protocol = p.protocol AND t.run = p.run AND p.tp / n.n_gt >= t.recall_threshold
    WHERE p.is_tp AND n.n_gt > 0
    GROUP BY ALL
), matched AS (
    SELECT a.protocol, a.run, k.category_id, a.area_range, c.curve, t.recall_threshold,
           coalesce(s.precision, 0.0) AS precision
    FROM analyze_area_ranges AS a
    JOIN analyze_curves AS c USING (protocol, run)
    JOIN thresholds AS t USING (protocol, run)
    CROSS JOIN (SELECT category_id FROM categories) AS k
    LEFT JOIN sampled AS s USING (protocol, run, category_id, area_range, curve, recall_threshold)
)
SELECT * FROM matched
UNION ALL
SELECT protocol, run, category_id, area_range, 'BG', recall_threshold, CASE WHEN precision > 0 THEN 1.0 ELSE 0.0 END
FROM matched WHERE curve = 'Oth'
UNION ALL
SELECT protocol, run, category_id, area_range, 'FN', recall_threshold, 1.0 FROM matched WHERE curve = 'Oth';

-- analyze_ap: each curve's AP (the mean of its precision over the recall thresholds) per category and area range.
CREATE OR REPLACE VIEW analyze_ap AS
SELECT p.protocol, p.run, p.category_id, c.name, c.supercategory, p.area_range, p.curve, avg(p.precision) AS ap
FROM analyze_precision AS p LEFT JOIN categories AS c USING (category_id)
GROUP BY ALL;

-- analyze_summary: the means over every category ('overall', categories without ground truth counting 0) and over
-- the categories of each supercategory ('supercategory').
CREATE OR REPLACE VIEW analyze_summary AS
SELECT protocol, run, 'overall' AS scope, NULL::VARCHAR AS supercategory, area_range, curve, avg(ap) AS ap
FROM analyze_ap GROUP BY ALL
UNION ALL
SELECT protocol, run, 'supercategory', supercategory, area_range, curve, avg(ap) FROM analyze_ap GROUP BY ALL;
