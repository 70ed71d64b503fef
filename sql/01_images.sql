-- images: one row per image (image_id, width, height, file_name, shard, ...).
-- Every file reads the store's tables through DuckDB variables holding their globs (the store's path map):
-- evalengine.open(store).duckdb() and `evalengine sql STORE` set them; evalengine.sql.path_variables(store)
-- lists them for a session of your own (`SET VARIABLE images = '/path/to/store/images/[!.]*.parquet';` …; no
-- level starts with a dot: the temporary folders of a store's writers stay out of the views).
CREATE OR REPLACE VIEW images AS
SELECT * FROM read_parquet(getvariable('images'));
