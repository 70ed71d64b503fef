-- requires: coco_protocols
-- regular_gt: ground truths that count (pycocotools' npig) per (protocol, run, category, area range);
-- category_id is -1 when the protocol pools categories (use_cats false).
CREATE OR REPLACE VIEW regular_gt AS
SELECT * EXCLUDE (stage, table_id) FROM coco_regular_gt(coco_accumulation_gt_matches, coco_accumulation_protocols);

-- pr_curve: the precision-recall curve, one point per counted detection, per (protocol, run, category,
-- IoU threshold, area range, max dets), in pycocotools' order (score descending, image id, rank in image).
-- precision = tp / (tp + fp + eps), eps = 2^-52 as numpy.spacing(1); ignored detections are left out.
CREATE OR REPLACE VIEW pr_curve AS
SELECT * EXCLUDE (stage)
FROM coco_pr_curve(coco_accumulation_matches, coco_accumulation_gt_matches, coco_accumulation_protocols);
