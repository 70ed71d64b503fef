-- requires: coco_protocols
-- ap_by_protocol: COCO 101-point AP and final recall per (protocol, run, category, IoU threshold, area
-- range, max dets), -1 where the category has no regular ground truth (pycocotools' precision/recall): the stored AP
-- table of a match table (coco_ap_tables), else coco_ap of 09_coco_accumulation.sql over the match table (the same
-- numbers, computed in SQL; coco_ap_pending lists the tables without a stored one).
CREATE OR REPLACE VIEW ap_by_protocol AS
WITH pending_protocols AS (
    SELECT * FROM kept_pending(coco_accumulation_protocols, 'coco_ap_pending')
), pending_matches AS (
    SELECT * FROM kept_pending(coco_accumulation_matches, 'coco_ap_pending')
), pending_gt_matches AS (
    SELECT * FROM kept_pending(coco_accumulation_gt_matches, 'coco_ap_pending')
)
SELECT protocol, run, category_id, iou_threshold, area_range, max_dets, ap, recall FROM coco_ap_tables
UNION ALL
SELECT protocol, run, category_id, iou_threshold, area_range, max_dets, ap, recall
FROM coco_ap(pending_matches, pending_gt_matches, pending_protocols);

-- ap: the same with the columns scripts rely on, and what each table matched (iou_type: bbox, segm, boundary,
-- keypoints); the default protocol of boxes is protocol 'coco'.
CREATE OR REPLACE VIEW ap AS
SELECT a.run, a.protocol, p.iou_type, a.category_id, a.iou_threshold, a.area_range, a.max_dets, a.ap, a.recall
FROM ap_by_protocol AS a
JOIN protocols AS p USING (protocol, run);
