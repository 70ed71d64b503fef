-- requires: coco_protocols
-- ap_by_protocol: COCO 101-point AP and final recall per (protocol, run, category, IoU threshold, area
-- range, max dets), -1 where the category has no regular ground truth (pycocotools' precision/recall;
-- coco_ap of 09_coco_accumulation.sql).
CREATE OR REPLACE VIEW ap_by_protocol AS
SELECT * EXCLUDE (stage)
FROM coco_ap(coco_accumulation_matches, coco_accumulation_gt_matches, coco_accumulation_protocols);

-- ap: the same for the default COCO protocol, with the columns scripts rely on.
CREATE OR REPLACE VIEW ap AS
SELECT run, category_id, iou_threshold, area_range, max_dets, ap, recall
FROM ap_by_protocol
WHERE protocol = 'coco';
