-- requires: coco_protocols
-- invariance_metrics (Borji & Iranmanesh §6): the COCO AP numbers of every detection run tagged with a perturbation
-- (`add-run --tag perturbation=NAME`) and matched under the default COCO protocol, one row per (run, metric, class):
-- model (tag 'model', else 'reference', else the run), perturbation, level (tags), metric AP, AP50, AP75, APs, APm,
-- APl with its size (all, all, all, small, medium, large), category_id (null: pycocotools' class mean) and value (-1
-- where undefined). A class's value is the mean of its AP over the metric's IoU thresholds, as summarize() averages.
-- The paper's Tables 4-6 are pivots of it; `evalengine invariance` also reads several stores and proposal runs.
CREATE OR REPLACE VIEW invariance_runs AS
SELECT run, coalesce(tags['model'], tags['reference'], run) AS model, tags['perturbation'] AS perturbation,
       tags['level'] AS level
FROM runs
WHERE kind = 'detections' AND tags['perturbation'] IS NOT NULL;

CREATE OR REPLACE VIEW invariance_metrics AS
WITH metrics AS (
    SELECT position, metric, iou, area, cap FROM coco_summary_layout WHERE is_ap AND NOT keypoints
), caps AS (
    SELECT run, max_dets[3] AS md3 FROM protocols WHERE protocol = 'coco'
), per_class AS (
    SELECT a.run, m.position, a.category_id, coalesce(avg(a.ap) FILTER (WHERE a.ap > -1), -1) AS value
    FROM ap AS a
    JOIN caps AS c ON c.run = a.run AND a.protocol = 'coco'
    JOIN metrics AS m
      ON a.area_range = m.area AND (m.iou IS NULL OR a.iou_threshold = m.iou)
     AND a.max_dets = CASE m.cap WHEN 'ap100' THEN 100 ELSE c.md3 END
    GROUP BY ALL
), class_mean AS (
    SELECT s.run, m.position, NULL::BIGINT AS category_id, s.value
    FROM coco_summary AS s JOIN metrics AS m ON m.metric = s.metric AND s.protocol = 'coco'
)
SELECT r.model, r.perturbation, r.level, r.run, m.metric, m.area AS size, v.category_id, v.value
FROM invariance_runs AS r
JOIN (SELECT * FROM class_mean UNION ALL SELECT * FROM per_class) AS v USING (run)
JOIN metrics AS m USING (position)
ORDER BY r.model, r.perturbation, r.level, r.run, m.position, v.category_id NULLS FIRST;

-- invariance_objects: each regular object (not crowd) of each tagged run's ground truth with whether a detection
-- took it at IoU 0.5 and that detection's score and IoU: runs of one store share their objects (gt_id), so an
-- object's outcomes under the perturbations are rows to compare.
CREATE OR REPLACE VIEW invariance_objects AS
SELECT r.model, r.perturbation, r.level, r.run, g.image_id, g.gt_id, g.category_id,
       (g.matched_bits[1] & 1) <> 0 AS detected, d.score, d.iou
FROM invariance_runs AS r
JOIN gt_matches AS g ON g.run = r.run AND g.protocol = 'coco'
LEFT JOIN (SELECT run, image_id, matched_gt_id[1] AS gt_id, score, matched_iou[1] AS iou
           FROM matches WHERE protocol = 'coco' AND (tp_bits[1] & 1) <> 0) AS d
  ON d.run = r.run AND d.image_id = g.image_id AND d.gt_id = g.gt_id
WHERE (g.ignored_bits & 1) = 0;
