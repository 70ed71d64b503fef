-- requires: tide_protocols
-- tide_detections: TIDE's matching (tidecv): one row per detection kept (the top max_dets of its image, all classes),
-- outcome tp / fp / ignored, its error type (Cls, Loc, Both, Dupe, Bkg; null for a true positive), the matched
-- ground truth or the Cls / Loc target, and the class of the true positive its fix makes (null: fixing removes it).
CREATE OR REPLACE VIEW tide_detections AS
SELECT protocol, run, image_id, category_id, det_id, score,
       ['fp', 'tp', 'ignored'][outcome + 1] AS outcome,
       [NULL, 'Cls', 'Loc', 'Both', 'Dupe', 'Bkg'][error + 1] AS error,
       target_gt_id, fix_category_id
FROM read_parquet(getvariable('tide_dt'), hive_partitioning = true);

-- tide_ground_truths: one row per non-crowd ground truth: used (matched), missed (a Miss error).
CREATE OR REPLACE VIEW tide_ground_truths AS
SELECT * EXCLUDE (shard) FROM read_parquet(getvariable('tide_gt'), hive_partitioning = true);

-- tide_error_counts: tidecv's error counts per run (Miss from the ground-truth side).
CREATE OR REPLACE VIEW tide_error_counts AS
SELECT protocol, run, error, count(*) AS count FROM tide_detections WHERE error IS NOT NULL GROUP BY ALL
UNION ALL
SELECT protocol, run, 'Miss', count(*) FILTER (WHERE missed) FROM tide_ground_truths GROUP BY ALL;
