-- requires: coco_curve_tables
-- coco_curve_tables: pycocotools' running counts as the Python side computed them when the run was evaluated
-- (evalengine.metrics.curve_counts), one file per match table (matches/protocol=P/run=R/curve.parquet). Per area range
-- and cap, one row per detection with dt_rank < max_dets, not ignored at every IoU threshold, of a category with
-- regular ground truth there (n_gt > 0), in pycocotools' order per category (score descending, image id, rank in
-- image): n_kept, these rows up to it; n_steps, the steps up to it (a step: a true positive or ignored at some
-- threshold; any other row is a false positive at every threshold). A step holds tp[t + 1] and fp[t + 1], the true
-- and counted false positives up to it at the IoU threshold of index t (np.cumsum of tps and fps); other rows null.
CREATE OR REPLACE VIEW coco_curve_tables AS
SELECT protocol, run, category_id, area_index, max_dets, score, image_id, dt_rank, tp_bits, ignored_bits, n_gt,
       n_kept, n_steps, tp, fp
FROM read_parquet(getvariable('coco_curve_tables'), hive_partitioning = true);
