-- requires: hosang_protocols
-- proposal_matches: one row per evaluated ground truth and budget (Hosang et al.): iou = IoU with its greedy
-- one-to-one partner among the top-`budget` proposals (0 if none), best_iou = best IoU over them (non-exclusive).
-- A table of an earlier version (before best_fb) reads with null F̃b columns, hence union_by_name.
CREATE OR REPLACE VIEW proposal_matches AS
SELECT * FROM read_parquet(getvariable('hosang_gt'), hive_partitioning = true, union_by_name = true);

-- proposal_image_counts: proposals evaluated per image and budget, min(budget, ranked proposals).
CREATE OR REPLACE VIEW proposal_image_counts AS
SELECT * FROM read_parquet(getvariable('hosang_images'), hive_partitioning = true);

-- mean_proposals: the x-axis of recall-vs-#proposals curves, the mean over all images (none counts 0).
CREATE OR REPLACE VIEW mean_proposals AS
SELECT protocol, run, budget, sum(n_proposals) / (SELECT count(*) FROM images) AS mean_proposals
FROM proposal_image_counts GROUP BY ALL;

-- proposal_recall: per (protocol, run, budget), pooled over annotations: AR = 2 * mean(max(iou - 0.5, 0))
-- (the exact integral of recall over IoU 0.5..1), recall at 0.5/0.7/0.9, ABO, and the same with best_iou.
CREATE OR REPLACE VIEW proposal_recall AS
SELECT protocol, run, budget, any_value(m.mean_proposals) AS mean_proposals, count(*) AS n_gt,
       2 * avg(greatest(iou - 0.5, 0)) AS ar,
       avg((iou >= 0.5)::DOUBLE) AS recall_50, avg((iou >= 0.7)::DOUBLE) AS recall_70,
       avg((iou >= 0.9)::DOUBLE) AS recall_90,
       2 * avg(greatest(best_iou - 0.5, 0)) AS ar_best_overlap, avg(best_iou) AS abo
FROM proposal_matches JOIN mean_proposals AS m USING (protocol, run, budget)
GROUP BY ALL ORDER BY protocol, run, budget;
