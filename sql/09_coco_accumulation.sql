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

-- coco_regular_gt: ground truths that count (pycocotools' npig) per (match table, category, area range); category_id
-- is -1 when the protocol pools categories (use_cats false).
CREATE OR REPLACE MACRO coco_regular_gt(gt, params) AS TABLE
SELECT g.protocol, g.run, g.stage, CASE WHEN p.use_cats THEN g.category_id ELSE -1 END AS category_id, a.area_index,
       count(*) FILTER (WHERE (g.ignored_bits >> a.area_index) & 1 = 0) AS n_gt
FROM query_table(gt) AS g
JOIN query_table(params) AS p USING (protocol, run, stage)
JOIN coco_area_ranges(params) AS a USING (protocol, run, stage)
GROUP BY ALL;

-- coco_pr_curve: the precision-recall curve, one point per counted detection, per (match table, category, IoU
-- threshold, area range, max dets), in pycocotools' order (score descending, image id, rank in image).
-- precision = tp / (tp + fp + eps), eps = 2^-52 as numpy.spacing(1); ignored detections are left out.
CREATE OR REPLACE MACRO coco_pr_curve(dt, gt, params) AS TABLE
WITH outcomes AS (
    SELECT m.protocol, m.run, m.stage, CASE WHEN p.use_cats THEN m.category_id ELSE -1 END AS category_id,
           m.image_id, m.dt_rank, m.score, a.area_index, a.area_range, t.thr_index, t.iou_threshold, d.max_dets,
           (m.tp_bits[a.area_index + 1] >> t.thr_index) & 1 = 1 AS is_tp
    FROM query_table(dt) AS m
    JOIN query_table(params) AS p USING (protocol, run, stage)
    JOIN coco_area_ranges(params) AS a USING (protocol, run, stage)
    JOIN coco_iou_thresholds(params) AS t USING (protocol, run, stage)
    JOIN coco_max_dets(params) AS d USING (protocol, run, stage)
    WHERE m.dt_rank < d.max_dets AND (m.ignored_bits[a.area_index + 1] >> t.thr_index) & 1 = 0
), cumulative AS (
    SELECT *,
           sum(is_tp::BIGINT) OVER w AS tp,
           sum((NOT is_tp)::BIGINT) OVER w AS fp
    FROM outcomes
    WINDOW w AS (PARTITION BY protocol, run, stage, category_id, area_index, thr_index, max_dets
                 ORDER BY score DESC, image_id, dt_rank ROWS UNBOUNDED PRECEDING)
)
SELECT c.protocol, c.run, c.stage, c.category_id, c.iou_threshold, c.area_range, c.max_dets, c.score, c.image_id,
       c.dt_rank, c.is_tp, c.tp, c.fp, g.n_gt, c.area_index, c.thr_index,
       c.tp / g.n_gt AS recall,
       c.tp / ((c.tp + c.fp) + 2.220446049250313e-16) AS precision
FROM cumulative AS c
JOIN coco_regular_gt(gt, params) AS g USING (protocol, run, stage, category_id, area_index)
WHERE g.n_gt > 0;

-- coco_ap: COCO 101-point AP and final recall per (match table, category, IoU threshold, area range, max dets), -1
-- where the category has no regular ground truth (pycocotools' precision/recall). pycocotools samples its right-to-left
-- precision envelope at the first point whose recall reaches each recall threshold R (searchsorted 'left'), 0 when
-- none does. Recall rises only at a true positive, and a false positive's precision is below that of the true positive
-- before it, so only the true positives are read: the envelope at one is the highest precision of the true positives
-- from it on, and it is sampled by the thresholds above the previous true positive's recall, up to its own (counted
-- with an ASOF join on the sorted thresholds).
-- The detections are sorted once per category (position: pycocotools' order, score descending, image id, rank in
-- image). A true positive's tp + fp is the number of detections counted up to it: those ignored at no IoU threshold
-- of the area range (most of them; one running count per area range and max dets) plus those ignored at some
-- thresholds but not this one (a running count over the few rows that are true positives or partly ignored, per
-- threshold), so that only those few rows are expanded over the IoU thresholds.
CREATE OR REPLACE MACRO coco_ap(dt, gt, params) AS TABLE
WITH grid AS (
    SELECT p.protocol, p.run, p.stage, k.category_id, t.thr_index, t.iou_threshold, a.area_index, a.area_range,
           d.max_dets
    FROM query_table(params) AS p
    JOIN (SELECT category_id FROM categories UNION ALL SELECT -1) AS k
      ON (k.category_id = -1) = NOT p.use_cats
    JOIN coco_iou_thresholds(params) AS t USING (protocol, run, stage)
    JOIN coco_area_ranges(params) AS a USING (protocol, run, stage)
    JOIN coco_max_dets(params) AS d USING (protocol, run, stage)
), thresholds AS (
    SELECT protocol, run, stage, recall_threshold, n_recall_thresholds,
           row_number() OVER (PARTITION BY protocol, run, stage ORDER BY recall_threshold) AS n_reached
    FROM coco_recall_thresholds(params)
), ordered AS (
    SELECT m.protocol, m.run, m.stage, CASE WHEN p.use_cats THEN m.category_id ELSE -1 END AS category_id,
           m.dt_rank, m.tp_bits, m.ignored_bits,
           row_number() OVER (PARTITION BY m.protocol, m.run, m.stage, CASE WHEN p.use_cats THEN m.category_id ELSE -1 END
                              ORDER BY m.score DESC, m.image_id, m.dt_rank) AS position
    FROM query_table(dt) AS m
    JOIN query_table(params) AS p USING (protocol, run, stage)
), capped AS (
    SELECT o.protocol, o.run, o.stage, o.category_id, a.area_index, d.max_dets, o.position,
           o.tp_bits[a.area_index + 1] AS tp_bits, o.ignored_bits[a.area_index + 1] AS ignored_bits
    FROM ordered AS o
    JOIN coco_area_ranges(params) AS a USING (protocol, run, stage)
    JOIN coco_max_dets(params) AS d USING (protocol, run, stage)
    WHERE o.dt_rank < d.max_dets
), counted AS (
    SELECT *, sum((ignored_bits = 0)::BIGINT) OVER (
               PARTITION BY protocol, run, stage, category_id, area_index, max_dets
               ORDER BY position ROWS UNBOUNDED PRECEDING) AS n_counted_everywhere
    FROM capped
), sparse AS (
    SELECT c.protocol, c.run, c.stage, c.category_id, c.area_index, t.thr_index, c.max_dets, c.position,
           (c.tp_bits >> t.thr_index) & 1 = 1 AS is_tp, c.ignored_bits <> 0 AS partly_ignored, c.n_counted_everywhere
    FROM counted AS c
    JOIN coco_iou_thresholds(params) AS t USING (protocol, run, stage)
    WHERE (c.tp_bits <> 0 OR c.ignored_bits <> 0) AND (c.ignored_bits >> t.thr_index) & 1 = 0
), cumulative AS (
    SELECT *,
           sum(is_tp::BIGINT) OVER w AS tp,
           n_counted_everywhere + sum(partly_ignored::BIGINT) OVER w AS n_counted
    FROM sparse
    WINDOW w AS (PARTITION BY protocol, run, stage, category_id, area_index, thr_index, max_dets
                 ORDER BY position ROWS UNBOUNDED PRECEDING)
), true_positives AS (
    SELECT c.protocol, c.run, c.stage, c.category_id, c.thr_index, c.area_index, c.max_dets, c.position,
           c.tp / g.n_gt AS recall,
           max(c.tp / (c.n_counted + 2.220446049250313e-16)) OVER (
               PARTITION BY c.protocol, c.run, c.stage, c.category_id, c.thr_index, c.area_index, c.max_dets
               ORDER BY c.position ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS envelope
    FROM cumulative AS c
    JOIN coco_regular_gt(gt, params) AS g USING (protocol, run, stage, category_id, area_index)
    WHERE c.is_tp AND g.n_gt > 0
), sampled AS (
    SELECT c.*, coalesce(r.n_reached, 0) AS n_reached, r.n_recall_thresholds
    FROM true_positives AS c
    ASOF LEFT JOIN thresholds AS r
      ON c.protocol = r.protocol AND c.run = r.run AND c.stage = r.stage AND c.recall >= r.recall_threshold
), interpolated AS (
    SELECT protocol, run, stage, category_id, thr_index, area_index, max_dets,
           sum(envelope * (n_reached - coalesce(previous, 0))) / any_value(n_recall_thresholds) AS ap,
           max(recall) AS recall
    FROM (SELECT *, lag(n_reached) OVER (PARTITION BY protocol, run, stage, category_id, thr_index, area_index, max_dets
                                         ORDER BY position) AS previous
          FROM sampled)
    GROUP BY ALL
)
SELECT g.protocol, g.run, g.stage, g.category_id, g.iou_threshold, g.area_range, g.max_dets,
       CASE WHEN coalesce(n.n_gt, 0) = 0 THEN -1 ELSE coalesce(i.ap, 0) END AS ap,
       CASE WHEN coalesce(n.n_gt, 0) = 0 THEN -1 ELSE coalesce(i.recall, 0) END AS recall
FROM grid AS g
LEFT JOIN coco_regular_gt(gt, params) AS n USING (protocol, run, stage, category_id, area_index)
LEFT JOIN interpolated AS i USING (protocol, run, stage, category_id, thr_index, area_index, max_dets);

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
