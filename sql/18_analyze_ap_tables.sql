-- requires: analyze_ap_tables
-- analyze_ap_tables: each curve's AP per (protocol, run, category, area range, curve) as the Python analysis computed
-- it (AnalyzeEvaluation.ap_table), one file per match table (matches/protocol=P/run=R/accumulation.parquet), written
-- with the parameters its protocol.json records.
CREATE OR REPLACE VIEW analyze_ap_tables AS
SELECT protocol, run, category_id, area_range, curve, ap
FROM read_parquet(getvariable('analyze_ap_tables'), hive_partitioning = true);
