-- requires: lvis_protocols
-- The LVIS match tables (protocol=lvis[-<hash>]): the columns of the COCO ones (matches, gt_matches), after lvis-api's
-- federated rules (300 results per image, zero-area and unknown-category results dropped, not-exhaustive categories'
-- unmatched results ignored), with stage '' so that the COCO accumulation macros (09_coco_accumulation.sql) read them.
CREATE OR REPLACE VIEW lvis_matches AS
SELECT *, '' AS stage FROM read_parquet(getvariable('lvis_dt'), hive_partitioning = true);

CREATE OR REPLACE VIEW lvis_gt_matches AS
SELECT *, '' AS stage FROM read_parquet(getvariable('lvis_gt'), hive_partitioning = true);

-- lvis_protocols: the parameters of every LVIS match table (its protocol.json), as `protocols` (max_dets: [300]).
CREATE OR REPLACE VIEW lvis_protocols AS
SELECT protocol, run, '' AS stage, match.use_cats AS use_cats,
       match.iou_thresholds AS iou_thresholds, match.area_ranges AS area_ranges, accumulation.max_dets AS max_dets,
       accumulation.recall_thresholds AS recall_thresholds
FROM read_json(getvariable('lvis_protocols'), hive_partitioning = true);

-- lvis_image_labels: what an LVIS ground truth says of the categories of each image beyond its objects, one row per
-- (image, category): label 'negative' (neg_category_ids: known absent) or 'not_exhaustive'
-- (not_exhaustive_category_ids: present, not every instance annotated).
CREATE OR REPLACE VIEW lvis_image_labels AS
SELECT image_id, unnest(neg_category_ids) AS category_id, 'negative' AS label FROM images
UNION ALL
SELECT image_id, unnest(not_exhaustive_category_ids), 'not_exhaustive' FROM images;

-- lvis_ap_tables: the AP table written beside an LVIS match table once its run was evaluated (accumulation.parquet),
-- as 22_lvis_ap_tables.sql reads them; none until then. lvis_ap_pending: 'protocol/run' of the match tables without one.
CREATE OR REPLACE VIEW lvis_ap_tables AS
SELECT NULL::VARCHAR AS protocol, NULL::VARCHAR AS run, NULL::BIGINT AS category_id, NULL::DOUBLE AS iou_threshold,
       NULL::VARCHAR AS area_range, NULL::DOUBLE AS ap, NULL::DOUBLE AS recall
WHERE false;

-- lvis_ap: AP (101-point) and final recall per (protocol, run, category, IoU threshold, area range), -1 where the
-- category has no regular ground truth: lvis-api's precision and recall. The stored AP table of a match table
-- (lvis_ap_tables), else the COCO accumulation macros over it (the same numbers, computed in SQL).
CREATE OR REPLACE VIEW lvis_ap AS
WITH pending_protocols AS (
    SELECT * FROM kept_pending(lvis_protocols, 'lvis_ap_pending')
), pending_matches AS (
    SELECT * FROM kept_pending(lvis_matches, 'lvis_ap_pending')
), pending_gt_matches AS (
    SELECT * FROM kept_pending(lvis_gt_matches, 'lvis_ap_pending')
)
SELECT protocol, run, category_id, iou_threshold, area_range, ap, recall FROM lvis_ap_tables
UNION ALL
SELECT protocol, run, category_id, iou_threshold, area_range, ap, recall
FROM coco_ap(pending_matches, pending_gt_matches, pending_protocols);

-- lvis_per_class_ap: AP@[.50:.95] (area all) per category, with its name and frequency (-1: undefined).
CREATE OR REPLACE VIEW lvis_per_class_ap AS
SELECT a.protocol, a.run, a.category_id, c.name, c.frequency,
       coalesce(avg(a.ap) FILTER (WHERE a.ap > -1), -1) AS ap
FROM lvis_ap AS a
LEFT JOIN categories AS c USING (category_id)
WHERE a.area_range = 'all'
GROUP BY ALL
ORDER BY a.protocol, a.run, a.category_id;

-- lvis_results: lvis-api's get_results() per match table (metric, value), in its order: the mean of the defined values
-- of each slice (the frequency groups r, c, f by the categories' frequency), -1 where nothing is defined.
CREATE OR REPLACE VIEW lvis_results AS
WITH layout AS (
    SELECT * FROM (VALUES
        (1, 'AP', TRUE, NULL, 'all', NULL), (2, 'AP50', TRUE, 0.5, 'all', NULL), (3, 'AP75', TRUE, 0.75, 'all', NULL),
        (4, 'APs', TRUE, NULL, 'small', NULL), (5, 'APm', TRUE, NULL, 'medium', NULL),
        (6, 'APl', TRUE, NULL, 'large', NULL), (7, 'APr', TRUE, NULL, 'all', 'r'), (8, 'APc', TRUE, NULL, 'all', 'c'),
        (9, 'APf', TRUE, NULL, 'all', 'f'), (10, 'AR@', FALSE, NULL, 'all', NULL),
        (11, 'ARs@', FALSE, NULL, 'small', NULL), (12, 'ARm@', FALSE, NULL, 'medium', NULL),
        (13, 'ARl@', FALSE, NULL, 'large', NULL)
    ) AS l(position, metric, is_ap, iou, area, frequency)
), rated AS (
    SELECT a.*, c.frequency FROM lvis_ap AS a LEFT JOIN categories AS c USING (category_id)
)
SELECT p.protocol, p.run, CASE WHEN l.is_ap THEN l.metric ELSE l.metric || p.max_dets[1] END AS metric,
       coalesce(avg(CASE WHEN l.is_ap THEN a.ap ELSE a.recall END)
                    FILTER (WHERE (CASE WHEN l.is_ap THEN a.ap ELSE a.recall END) > -1), -1) AS value
FROM lvis_protocols AS p
CROSS JOIN layout AS l
LEFT JOIN rated AS a
  ON a.protocol = p.protocol AND a.run = p.run AND a.area_range = l.area
 AND (l.iou IS NULL OR a.iou_threshold = l.iou::DOUBLE) AND (l.frequency IS NULL OR a.frequency = l.frequency)
GROUP BY p.protocol, p.run, l.position, l.metric, l.is_ap, p.max_dets
ORDER BY p.protocol, p.run, l.position;
