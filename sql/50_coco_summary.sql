-- requires: coco_protocols
-- coco_summary: pycocotools' summary of every COCO match table (run, protocol, iou_type, metric, value): its 12
-- numbers, 10 for keypoints, with summarize()'s rules (coco_summary_of of 09_coco_accumulation.sql). The default
-- protocol of boxes is protocol 'coco'.
CREATE OR REPLACE VIEW coco_summary AS
WITH ap AS (
    SELECT *, '' AS stage FROM ap_by_protocol
)
SELECT run, protocol, iou_type, metric, value FROM coco_summary_of(ap, coco_accumulation_protocols);
