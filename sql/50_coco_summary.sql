-- requires: coco_protocols
-- coco_summary: pycocotools' 12 numbers per run for the default COCO protocol (metric, value), with
-- summarize()'s rules (coco_summary_of of 09_coco_accumulation.sql).
CREATE OR REPLACE VIEW coco_summary AS
WITH ap AS (
    SELECT *, '' AS stage FROM ap_by_protocol WHERE protocol = 'coco'
), params AS (
    SELECT * FROM coco_accumulation_protocols WHERE protocol = 'coco'
)
SELECT run, metric, value FROM coco_summary_of(ap, params);
