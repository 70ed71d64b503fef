-- requires: coco_ap_tables
-- coco_ap_tables: AP and final recall per (protocol, run, category, IoU threshold, area range, max dets) as the
-- Python accumulation computed them when the run was evaluated (evalengine.metrics.ap.ap_table), one file per match
-- table (matches/protocol=P/run=R/accumulation.parquet), written with the parameters its protocol.json records.
CREATE OR REPLACE VIEW coco_ap_tables AS
SELECT protocol, run, category_id, iou_threshold, area_range, max_dets, ap, recall
FROM read_parquet(getvariable('coco_ap_tables'), hive_partitioning = true);
