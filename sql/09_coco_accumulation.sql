-- pycocotools' accumulate() and summarize() as table macros over any COCO match table, the one SQL definition of
-- COCO AP: the `coco` protocol's views (pr_curve, ap_by_protocol, coco_summary) and Borji's stages (borji_stage_ap,
-- borji_stage_summary) call them. Their arguments are relations (views or CTE names) whose rows name their match
-- table by (protocol, run, stage) — stage '' for a protocol's own table, the stage's name for Borji's — plain columns,
-- so that a filter on them reaches the tables before the windows:
--   dt     protocol, run, stage, category_id, image_id, dt_rank, score, tp_bits, ignored_bits (as `matches`),
--   gt     protocol, run, stage, category_id, ignored_bits (as `gt_matches`),
--   params protocol, run, stage, iou_type, use_cats, iou_thresholds, area_ranges, max_dets, recall_thresholds (as
--          `protocols`).

-- coco_iou_thresholds, coco_area_ranges, coco_max_dets, coco_recall_thresholds: one row per entry of each list of
-- the parameters, with its 0-based index (thr_index, area_index) or the list's length (n_recall_thresholds).
CREATE OR REPLACE MACRO coco_iou_thresholds(params) AS TABLE
SELECT protocol, run, stage, i - 1 AS thr_index, iou_thresholds[i] AS iou_threshold
FROM query_table(params), range(1, len(iou_thresholds) + 1) AS r(i);

CREATE OR REPLACE MACRO coco_area_ranges(params) AS TABLE
SELECT protocol, run, stage, i - 1 AS area_index, area_ranges[i].label AS area_range, area_ranges[i].lo AS lo,
       area_ranges[i].hi AS hi
FROM query_table(params), range(1, len(area_ranges) + 1) AS r(i);

CREATE OR REPLACE MACRO coco_max_dets(params) AS TABLE
SELECT protocol, run, stage, i AS max_dets_index, max_dets[i] AS max_dets
FROM query_table(params), range(1, len(max_dets) + 1) AS r(i);

CREATE OR REPLACE MACRO coco_recall_thresholds(params) AS TABLE
SELECT protocol, run, stage, recall_thresholds[i] AS recall_threshold, len(recall_thresholds) AS n_recall_thresholds
FROM query_table(params), range(1, len(recall_thresholds) + 1) AS r(i);

-- coco_tables: the match tables of params numbered (table_id, in (protocol, run, stage) order, so that every call
-- numbers them alike), with use_cats and the number of IoU thresholds: the windows below partition on integers.
CREATE OR REPLACE MACRO coco_tables(params) AS TABLE
SELECT protocol, run, stage, use_cats, len(iou_thresholds) AS n_thresholds,
       row_number() OVER (ORDER BY protocol, run, stage) AS table_id
FROM query_table(params);

-- coco_numbered_ious, coco_numbered_areas, coco_numbered_max_dets: the IoU thresholds, area ranges and caps by
-- table_id (the macros below call these, not CTEs of their own: a macro cannot share a CTE with another).
CREATE OR REPLACE MACRO coco_numbered_ious(params) AS TABLE
SELECT t.table_id, i.thr_index, i.iou_threshold
FROM coco_iou_thresholds(params) AS i JOIN coco_tables(params) AS t USING (protocol, run, stage);

CREATE OR REPLACE MACRO coco_numbered_areas(params) AS TABLE
SELECT t.table_id, a.area_index, a.area_range
FROM coco_area_ranges(params) AS a JOIN coco_tables(params) AS t USING (protocol, run, stage);

CREATE OR REPLACE MACRO coco_numbered_max_dets(params) AS TABLE
SELECT t.table_id, d.max_dets
FROM coco_max_dets(params) AS d JOIN coco_tables(params) AS t USING (protocol, run, stage);

-- coco_regular_gt: ground truths that count (pycocotools' npig) per (match table, category, area range); category_id
-- is -1 when the protocol pools categories (use_cats false).
CREATE OR REPLACE MACRO coco_regular_gt(gt, params) AS TABLE
SELECT t.table_id, g.protocol, g.run, g.stage, CASE WHEN t.use_cats THEN g.category_id ELSE -1 END AS category_id,
       a.area_index, count(*) FILTER (WHERE (g.ignored_bits >> a.area_index) & 1 = 0) AS n_gt
FROM query_table(gt) AS g
JOIN coco_tables(params) AS t USING (protocol, run, stage)
JOIN coco_area_ranges(params) AS a USING (protocol, run, stage)
GROUP BY ALL;

-- coco_counted: the detections in pycocotools' order per (match table, category) — position: score descending, image
-- id, rank in image — once per area range and max dets that keeps them (rank in image below the cap), without those
-- ignored at every IoU threshold (they count nowhere), with tp_bits and ignored_bits of that area range and n_kept, the
-- number of these rows up to this one (a row number: one sort, no running sum; it orders the rows of an area range and
-- cap as position does). Every detection not ignored at a threshold counts in tp + fp there, so a point's tp + fp is
-- n_kept minus the rows ignored there before it, and recall rises only at a true positive: a curve is made of n_kept
-- and of the few rows that are true positives or ignored at some thresholds (is_step). Ranking each detection once,
-- then numbering the kept rows by position, costs less than numbering them by the three keys (measured).
CREATE OR REPLACE MACRO coco_counted(dt, params) AS TABLE
WITH ordered AS (
    SELECT t.table_id, t.n_thresholds, CASE WHEN t.use_cats THEN m.category_id ELSE -1 END AS category_id,
           m.image_id, m.dt_rank, m.score, m.tp_bits, m.ignored_bits,
           row_number() OVER (PARTITION BY t.table_id, CASE WHEN t.use_cats THEN m.category_id ELSE -1 END
                              ORDER BY m.score DESC, m.image_id, m.dt_rank) AS position
    FROM query_table(dt) AS m
    JOIN coco_tables(params) AS t USING (protocol, run, stage)
), capped AS (
    SELECT o.table_id, o.category_id, a.area_index, d.max_dets, o.position, o.image_id, o.dt_rank, o.score,
           o.tp_bits[a.area_index + 1] AS tp_bits, o.ignored_bits[a.area_index + 1] AS ignored_bits
    FROM ordered AS o
    JOIN coco_numbered_areas(params) AS a USING (table_id)
    JOIN coco_numbered_max_dets(params) AS d USING (table_id)
    WHERE o.dt_rank < d.max_dets AND bit_count(o.ignored_bits[a.area_index + 1]) < o.n_thresholds
)
SELECT *, tp_bits <> 0 OR ignored_bits <> 0 AS is_step,
       row_number() OVER (PARTITION BY table_id, category_id, area_index, max_dets ORDER BY position) AS n_kept
FROM capped;

-- coco_steps: at every IoU threshold, the rows of coco_counted (its result `counted`, e.g. a CTE over the macro) that
-- are true positives or ignored there, in their order (n_kept): is_tp, and the counts up to them of true positives
-- (tp, a running count), of the detections ignored there (n_ignored: the rest of the row number among these rows) and
-- of those counted in tp + fp (n_counted = n_kept - n_ignored); one window. What coco_ap, voc_ap and
-- analyze_precision read: their true positives. The bits are shifted as UBIGINT (a BIGINT shift would widen them to
-- HUGEINT).
CREATE OR REPLACE MACRO coco_steps(counted, params) AS TABLE
SELECT table_id, category_id, area_index, max_dets, thr_index, n_kept, is_tp, tp, n_changing - tp AS n_ignored,
       n_kept - (n_changing - tp) AS n_counted
FROM (SELECT *, row_number() OVER w AS n_changing, count(*) FILTER (WHERE is_tp) OVER w AS tp
      FROM (SELECT c.table_id, c.category_id, c.area_index, c.max_dets, t.thr_index, c.n_kept,
                   (c.tp_bits >> t.thr_index::UBIGINT) & 1 = 1 AS is_tp
            FROM query_table(counted) AS c
            JOIN coco_numbered_ious(params) AS t USING (table_id)
            WHERE c.is_step AND ((c.tp_bits | c.ignored_bits) >> t.thr_index::UBIGINT) & 1 = 1)
      WINDOW w AS (PARTITION BY table_id, category_id, area_index, max_dets, thr_index ORDER BY n_kept
                   ROWS UNBOUNDED PRECEDING));

-- coco_pr_curve: the precision-recall curve, one point per counted detection, per (match table, category, IoU
-- threshold, area range, max dets), in pycocotools' order (score descending, image id, rank in image).
-- precision = tp / (tp + fp + eps), eps = 2^-52 as numpy.spacing(1); ignored detections are left out. A point's
-- counts are those of the last step (is_step of coco_counted) up to it: n_steps, the steps up to a row, is a row number
-- among the steps for a step, n_kept minus that among the others for any other row; each step's tp and n_ignored at
-- every IoU threshold are row numbers among the steps (as in coco_steps, with all of them), gathered in a list
-- sorted by threshold and joined once per detection, area range and cap (none: no step before it), then taken per
-- threshold: tp, and tp + fp = n_kept - n_ignored.
CREATE OR REPLACE MACRO coco_pr_curve(dt, gt, params) AS TABLE
WITH counted AS MATERIALIZED (
    SELECT * EXCLUDE (n_of_kind), CASE WHEN is_step THEN n_of_kind ELSE n_kept - n_of_kind END AS n_steps
    FROM (SELECT *, row_number() OVER (PARTITION BY table_id, category_id, area_index, max_dets, is_step
                                       ORDER BY n_kept) AS n_of_kind
          FROM coco_counted(dt, params))
), step_bits AS (
    SELECT c.table_id, c.category_id, c.area_index, c.max_dets, c.n_steps, t.thr_index, c.n_kept,
           (c.tp_bits >> t.thr_index::UBIGINT) & 1 = 1 AS is_tp,
           (c.ignored_bits >> t.thr_index::UBIGINT) & 1 = 1 AS is_ignored
    FROM counted AS c
    JOIN coco_numbered_ious(params) AS t USING (table_id)
    WHERE c.is_step
), step_counts AS (
    SELECT table_id, category_id, area_index, max_dets, n_steps,
           list_sort(list({'thr_index': thr_index,
                           'tp': CASE WHEN is_tp THEN n_tp ELSE n_steps - n_tp END,
                           'n_ignored': CASE WHEN is_ignored THEN n_ignored ELSE n_steps - n_ignored END})) AS counts
    FROM (SELECT *,
                 row_number() OVER (PARTITION BY table_id, category_id, area_index, max_dets, thr_index, is_tp
                                    ORDER BY n_kept) AS n_tp,
                 row_number() OVER (PARTITION BY table_id, category_id, area_index, max_dets, thr_index, is_ignored
                                    ORDER BY n_kept) AS n_ignored
          FROM step_bits)
    GROUP BY ALL
), points AS (
    SELECT b.protocol, b.run, b.stage, c.category_id, a.area_range, c.max_dets, c.score, c.image_id, c.dt_rank,
           c.table_id, c.area_index, c.tp_bits, c.ignored_bits, c.n_kept, g.n_gt, s.counts
    FROM counted AS c
    JOIN coco_regular_gt(gt, params) AS g USING (table_id, category_id, area_index)
    JOIN coco_tables(params) AS b USING (table_id)
    JOIN coco_numbered_areas(params) AS a USING (table_id, area_index)
    LEFT JOIN step_counts AS s
      ON s.table_id = c.table_id AND s.category_id = c.category_id AND s.area_index = c.area_index
     AND s.max_dets = c.max_dets AND s.n_steps = c.n_steps
    WHERE g.n_gt > 0
), thresholds AS (
    SELECT p.protocol, p.run, p.stage, p.category_id, t.iou_threshold, p.area_range, p.max_dets, p.score, p.image_id,
           p.dt_rank, (p.tp_bits >> t.thr_index::UBIGINT) & 1 = 1 AS is_tp,
           coalesce(p.counts[t.thr_index + 1].tp, 0) AS tp,
           p.n_kept - coalesce(p.counts[t.thr_index + 1].n_ignored, 0) AS n_counted, p.n_gt,
           p.area_index, t.thr_index
    FROM points AS p
    JOIN coco_numbered_ious(params) AS t USING (table_id)
    WHERE (p.ignored_bits >> t.thr_index::UBIGINT) & 1 = 0
)
SELECT protocol, run, stage, category_id, iou_threshold, area_range, max_dets, score, image_id, dt_rank, is_tp, tp,
       n_counted - tp AS fp, n_gt, area_index, thr_index, tp / n_gt AS recall,
       tp / (n_counted + 2.220446049250313e-16) AS precision
FROM thresholds;

-- coco_ap: COCO 101-point AP and final recall per (match table, category, IoU threshold, area range, max dets), -1
-- where the category has no regular ground truth (pycocotools' precision/recall). pycocotools samples its right-to-left
-- precision envelope at the first point whose recall reaches each recall threshold R (searchsorted 'left'), 0 when
-- none does. Recall rises only at a true positive, and a false positive's precision is below that of the true positive
-- before it, so only the true positives are read (coco_steps): each takes n_reached, the number of thresholds its
-- recall reaches (an ASOF join on the sorted thresholds, once per recall: a (table, n_gt, tp) many curves share). The true positives of one n_reached follow each other, and
-- the thresholds sampled there are those above the previous group's n_reached; the envelope at the group's first is
-- the highest precision of this group and the later ones: a running max over the groups, highest n_reached first.
CREATE OR REPLACE MACRO coco_ap(dt, gt, params) AS TABLE
WITH grid AS (
    SELECT t.table_id, t.protocol, t.run, t.stage, k.category_id, i.thr_index, i.iou_threshold, a.area_index,
           a.area_range, d.max_dets
    FROM coco_tables(params) AS t
    JOIN (SELECT category_id FROM categories UNION ALL SELECT -1) AS k ON (k.category_id = -1) = NOT t.use_cats
    JOIN coco_numbered_ious(params) AS i USING (table_id)
    JOIN coco_numbered_areas(params) AS a USING (table_id)
    JOIN coco_numbered_max_dets(params) AS d USING (table_id)
), thresholds AS (
    SELECT t.table_id, r.recall_threshold, r.n_recall_thresholds,
           row_number() OVER (PARTITION BY t.table_id ORDER BY r.recall_threshold) AS n_reached
    FROM coco_recall_thresholds(params) AS r JOIN coco_tables(params) AS t USING (protocol, run, stage)
), n_gt AS (
    SELECT * FROM coco_regular_gt(gt, params)
), counted AS (
    SELECT * FROM coco_counted(dt, params)
), true_positives AS (
    SELECT s.table_id, s.category_id, s.thr_index, s.area_index, s.max_dets, s.tp, g.n_gt, s.tp / g.n_gt AS recall,
           s.tp / (s.n_counted + 2.220446049250313e-16) AS precision
    FROM coco_steps(counted, params) AS s
    JOIN n_gt AS g USING (table_id, category_id, area_index)
    WHERE s.is_tp AND g.n_gt > 0
), recalls AS (
    SELECT c.table_id, c.n_gt, c.tp, coalesce(r.n_reached, 0) AS n_reached
    FROM (SELECT DISTINCT table_id, n_gt, tp, recall FROM true_positives) AS c
    ASOF LEFT JOIN thresholds AS r ON c.table_id = r.table_id AND c.recall >= r.recall_threshold
), reached AS (
    SELECT c.table_id, c.category_id, c.thr_index, c.area_index, c.max_dets, r.n_reached,
           max(c.precision) AS precision, max(c.recall) AS recall
    FROM true_positives AS c
    JOIN recalls AS r USING (table_id, n_gt, tp)
    GROUP BY ALL
), interpolated AS (
    SELECT g.table_id, g.category_id, g.thr_index, g.area_index, g.max_dets,
           sum(g.envelope * (g.n_reached - coalesce(g.previous, 0))) / any_value(t.n_recall_thresholds) AS ap,
           max(g.recall) AS recall
    FROM (SELECT *, max(precision) OVER w AS envelope, lead(n_reached) OVER w AS previous
          FROM reached
          WINDOW w AS (PARTITION BY table_id, category_id, thr_index, area_index, max_dets ORDER BY n_reached DESC
                       ROWS UNBOUNDED PRECEDING)) AS g
    JOIN (SELECT DISTINCT table_id, n_recall_thresholds FROM thresholds) AS t USING (table_id)
    GROUP BY ALL
)
SELECT g.protocol, g.run, g.stage, g.category_id, g.iou_threshold, g.area_range, g.max_dets,
       CASE WHEN coalesce(n.n_gt, 0) = 0 THEN -1 ELSE coalesce(i.ap, 0) END AS ap,
       CASE WHEN coalesce(n.n_gt, 0) = 0 THEN -1 ELSE coalesce(i.recall, 0) END AS recall
FROM grid AS g
LEFT JOIN n_gt AS n USING (table_id, category_id, area_index)
LEFT JOIN interpolated AS i USING (table_id, category_id, thr_index, area_index, max_dets);

-- coco_summary_of: pycocotools' summary per match table (iou_type, metric, value) from coco_ap's rows, with summarize()'s rules:
-- 12 numbers (AP looks for max dets 100, the others use the protocol's max_dets[1..3]); for iou_type keypoints
-- _summarizeKps()'s 10 (every one at max dets 20); a mean over nothing defined is -1. coco_summary_layout (keypoints,
-- position, metric, is_ap, iou, area, cap) holds both layouts as the Python summary uses them
-- (evalengine.metrics.summary.SUMMARY_LAYOUT, KEYPOINT_LAYOUT), set by the connection.
CREATE OR REPLACE MACRO coco_summary_of(ap, params) AS TABLE
SELECT p.protocol, p.run, p.stage, p.iou_type, l.metric,
       coalesce(avg(CASE WHEN l.is_ap THEN a.ap ELSE a.recall END)
                    FILTER (WHERE (CASE WHEN l.is_ap THEN a.ap ELSE a.recall END) > -1), -1) AS value
FROM query_table(params) AS p
JOIN coco_summary_layout AS l ON l.keypoints = (p.iou_type = 'keypoints')
LEFT JOIN query_table(ap) AS a
  ON a.protocol = p.protocol AND a.run = p.run AND a.stage = p.stage AND a.area_range = l.area
 AND (l.iou IS NULL OR a.iou_threshold = l.iou)
 AND a.max_dets = CASE l.cap WHEN 'ap100' THEN 100 WHEN 'md1' THEN p.max_dets[1] WHEN 'md2' THEN p.max_dets[2]
                             WHEN 'md3' THEN p.max_dets[3] ELSE CAST(l.cap AS INTEGER) END
GROUP BY p.protocol, p.run, p.stage, p.iou_type, l.position, l.metric
ORDER BY p.protocol, p.run, p.stage, l.position;
