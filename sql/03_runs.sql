-- runs: one row per detection run (a model, or a model under one perturbation).
CREATE OR REPLACE VIEW runs AS
SELECT * FROM read_parquet(getvariable('runs'));
