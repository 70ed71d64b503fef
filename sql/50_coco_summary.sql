-- requires: coco_protocols
-- coco_summary: pycocotools' 12 numbers per run for the default COCO protocol (metric, value), with
-- summarize()'s rules: AP looks for max dets 100, the others use the protocol's max_dets[1..3];
-- a mean over nothing defined is -1. coco_summary_layout (position, metric, is_ap, iou, area, cap) is the layout
-- the Python summary uses (evalengine.metrics.summary.SUMMARY_LAYOUT), set by the connection.
CREATE OR REPLACE VIEW coco_summary AS
WITH caps AS (
    SELECT run, max_dets[1] AS md1, max_dets[2] AS md2, max_dets[3] AS md3
    FROM protocols WHERE protocol = 'coco'
)
SELECT c.run, l.metric,
       coalesce(avg(CASE WHEN l.is_ap THEN a.ap ELSE a.recall END)
                    FILTER (WHERE (CASE WHEN l.is_ap THEN a.ap ELSE a.recall END) > -1), -1) AS value
FROM caps AS c
CROSS JOIN coco_summary_layout AS l
LEFT JOIN ap AS a
  ON a.run = c.run AND a.area_range = l.area
 AND (l.iou IS NULL OR a.iou_threshold = l.iou)
 AND a.max_dets = CASE l.cap WHEN 'ap100' THEN 100 WHEN 'md1' THEN c.md1 WHEN 'md2' THEN c.md2 ELSE c.md3 END
GROUP BY c.run, l.position, l.metric
ORDER BY c.run, l.position;
