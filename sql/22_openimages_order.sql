-- requires: openimages_order_tables
-- openimages_order_tables: the curve order of the OpenImages match tables whose AP has been computed in Python
-- (evalengine.metrics.openimages.accumulate: order.parquet beside the match table), read by openimages_entries.
CREATE OR REPLACE VIEW openimages_order_tables AS
SELECT protocol, run, category_id, image_id, side, "at", position
FROM read_parquet(getvariable('openimages_order_tables'), hive_partitioning = true);
