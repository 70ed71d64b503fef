-- requires: lvis_ap_tables
-- lvis_ap_tables: AP and final recall per (protocol, run, category, IoU threshold, area range) as the Python
-- accumulation computed them when the LVIS run was evaluated (LvisEvaluation.accumulate, evalengine.metrics.ap.ap_table;
-- one cap, 300), one file per match table (matches/protocol=P/run=R/accumulation.parquet), written with the parameters
-- its protocol.json records.
CREATE OR REPLACE VIEW lvis_ap_tables AS
SELECT protocol, run, category_id, iou_threshold, area_range, ap, recall
FROM read_parquet(getvariable('lvis_ap_tables'), hive_partitioning = true);
