-- images: one row per image (image_id, width, height, file_name, shard, ...).
-- Paths are relative to the store: run `SET file_search_path = '/path/to/store';` first
-- (evalengine.open(store).duckdb() and `evalengine sql STORE` do it for you).
CREATE OR REPLACE VIEW images AS
SELECT * FROM read_parquet('images/*.parquet');
