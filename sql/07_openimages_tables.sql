-- requires: image_labels
-- image_labels: OpenImages' verified image-level labels after the hierarchy expansion (confidence 1 positive, 0
-- negative), sharded by image.
CREATE OR REPLACE VIEW image_labels AS
SELECT * FROM read_parquet(getvariable('image_labels'), hive_partitioning = true);
