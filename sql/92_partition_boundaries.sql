-- requires: partition_boundaries_protocols
-- partition_boundaries: the boundary table of a partition run (Fb, spec §4.3), per (image, parameter) the boundary
-- kernel's counts against all the image's annotators (protocol: the kernel's parameters' key).
CREATE OR REPLACE VIEW partition_boundaries AS
SELECT * FROM read_parquet(getvariable('partition_boundaries_boundary'), hive_partitioning = true);

-- partition_fb (91_partition_measures.sql reads it): the counts with fb, fb_precision and fb_recall per image.
CREATE OR REPLACE VIEW partition_fb AS
WITH rates AS (
    SELECT protocol AS fb_protocol, run, image_id, parameter, fb_matched_pred, fb_n_pred, fb_matched_gt, fb_n_gt,
           fb_precision(fb_matched_pred, fb_n_pred, fb_n_gt) AS fb_precision,
           fb_recall(fb_matched_gt, fb_n_gt, fb_n_pred) AS fb_recall
    FROM partition_boundaries)
SELECT *, fb_f(fb_precision, fb_recall) AS fb FROM rates;
