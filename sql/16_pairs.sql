-- requires: pairs_protocols
-- pairs: every (detection, ground truth) pair of an image, of any classes, with box IoU >= the protocol's min_iou
-- (protocol 'pairs': 0.1); for a crowd ground truth (gt_iscrowd) the IoU is pycocotools' intersection over the
-- detection's area; a segm table (protocol 'pairs-<hash>', iou_type segm) holds mask IoUs, crowd likewise over the
-- detection's mask area. Every detection of the run takes part (no cap). A detection's COCO outcome is a join:
--   SELECT p.*, m.tp_bits, m.matched_gt_id FROM pairs AS p
--   JOIN matches AS m ON m.run = p.run AND m.image_id = p.image_id AND m.det_id = p.det_id AND m.protocol = 'coco'
CREATE OR REPLACE VIEW pairs AS
SELECT * FROM read_parquet(getvariable('pairs_pairs'), hive_partitioning = true);
