-- requires: category_edges
-- category_edges: the class hierarchy's links, once each (parent_id, child_id, their LabelNames, kind Subcategory or
-- Part; the root of the hierarchy is not a category: a null id).
CREATE OR REPLACE VIEW category_edges AS
SELECT * FROM read_parquet(getvariable('category_edges'));
