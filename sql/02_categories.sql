-- categories: category_id, name, supercategory.
CREATE OR REPLACE VIEW categories AS
SELECT * FROM read_parquet(getvariable('categories'));
