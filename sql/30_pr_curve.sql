-- requires: coco_protocols
-- regular_gt: ground truths that count (pycocotools' npig) per (protocol, run, category, area range);
-- category_id is -1 when the protocol pools categories (use_cats false).
CREATE OR REPLACE VIEW regular_gt AS
SELECT * EXCLUDE (stage, table_id) FROM coco_regular_gt(coco_accumulation_gt_matches, coco_accumulation_protocols);

-- pr_curve: the precision-recall curve, one point per counted detection, per (protocol, run, category,
-- IoU threshold, area range, max dets), in pycocotools' order (score descending, image id, rank in image).
-- precision = tp / (tp + fp + eps), eps = 2^-52 as numpy.spacing(1); ignored detections are left out. A match table
-- whose run was evaluated has its running counts stored (coco_curve_tables): a point's counts at a threshold are its
-- last step's (none: 0), plus one false positive per row kept since (n_kept - n_kept of the step). The others
-- (coco_curve_pending) go through coco_pr_curve (09_coco_accumulation.sql): the same numbers computed in SQL.
CREATE OR REPLACE VIEW pr_curve AS
WITH pending_protocols AS (
    SELECT * FROM kept_pending(coco_accumulation_protocols, 'coco_curve_pending')
), pending_matches AS (
    SELECT * FROM kept_pending(coco_accumulation_matches, 'coco_curve_pending')
), pending_gt_matches AS (
    SELECT * FROM kept_pending(coco_accumulation_gt_matches, 'coco_curve_pending')
), counts AS (
    SELECT c.protocol, c.run, c.category_id, c.area_index, c.max_dets, c.score, c.image_id, c.dt_rank, c.tp_bits,
           c.ignored_bits, c.n_gt, c.n_kept - coalesce(s.n_kept, 0) AS n_since, s.tp AS step_tp, s.fp AS step_fp
    FROM coco_curve_tables AS c
    LEFT JOIN (SELECT protocol, run, category_id, area_index, max_dets, n_steps, n_kept, tp, fp
               FROM coco_curve_tables WHERE tp IS NOT NULL) AS s
      ON s.protocol = c.protocol AND s.run = c.run AND s.category_id = c.category_id
     AND s.area_index = c.area_index AND s.max_dets = c.max_dets AND s.n_steps = c.n_steps
), points AS (
    SELECT c.protocol, c.run, c.category_id, t.iou_threshold, a.area_range, c.max_dets, c.score, c.image_id,
           c.dt_rank, (c.tp_bits >> t.thr_index::UBIGINT) & 1 = 1 AS is_tp,
           coalesce(c.step_tp[t.thr_index + 1], 0) AS tp, coalesce(c.step_fp[t.thr_index + 1], 0) + c.n_since AS fp,
           c.n_gt, c.area_index::BIGINT AS area_index, t.thr_index
    FROM counts AS c
    JOIN protocol_iou_thresholds AS t USING (protocol, run)
    JOIN protocol_area_ranges AS a USING (protocol, run, area_index)
    WHERE (c.ignored_bits >> t.thr_index::UBIGINT) & 1 = 0
)
SELECT *, tp / n_gt AS recall, tp / (tp + fp + 2.220446049250313e-16) AS precision FROM points
UNION ALL
SELECT * EXCLUDE (stage) FROM coco_pr_curve(pending_matches, pending_gt_matches, pending_protocols);
