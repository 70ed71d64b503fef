-- requires: borji_ap_tables
-- borji_ap_tables: each stage's AP and final recall per (protocol, run, stage, category, IoU threshold, area range,
-- max dets) as the Python accumulation computed them when the diagnosis ran (BorjiEvaluation.ap_table), one file per
-- match table (matches/protocol=P/run=R/accumulation.parquet), written with the parameters its protocol.json records.
CREATE OR REPLACE VIEW borji_ap_tables AS
SELECT protocol, run, stage, category_id, iou_threshold, area_range, max_dets, ap, recall
FROM read_parquet(getvariable('borji_ap_tables'), hive_partitioning = true);
