-- requires: coco_protocols
-- ap_by_protocol: COCO 101-point AP and final recall per (protocol, run, category, IoU threshold, area
-- range, max dets), -1 where the category has no regular ground truth (pycocotools' precision/recall;
-- coco_ap of 09_coco_accumulation.sql).
CREATE OR REPLACE VIEW ap_by_protocol AS
SELECT * EXCLUDE (stage)
FROM coco_ap(coco_accumulation_matches, coco_accumulation_gt_matches, coco_accumulation_protocols);

-- ap: the same with the columns scripts rely on, and what each table matched (iou_type: bbox, segm, boundary,
-- keypoints); the default protocol of boxes is protocol 'coco'.
CREATE OR REPLACE VIEW ap AS
SELECT a.run, a.protocol, p.iou_type, a.category_id, a.iou_threshold, a.area_range, a.max_dets, a.ap, a.recall
FROM ap_by_protocol AS a
JOIN protocols AS p USING (protocol, run);
