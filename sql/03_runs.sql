-- runs: one row per run (a model, or a model under one perturbation): kind, source, size and its tags as a map
-- (`add-run --tag KEY=VALUE`; a perturbed proposal run's perturbation, level and reference): tags['model'].
-- A store written before tags existed reads as having none.
CREATE OR REPLACE VIEW runs AS
SELECT * REPLACE (map_from_entries(coalesce(tags, [])) AS tags)
FROM (SELECT * FROM read_parquet(getvariable('runs'))
      UNION ALL BY NAME
      SELECT NULL::VARCHAR AS run, NULL::STRUCT(key VARCHAR, value VARCHAR)[] AS tags WHERE false);

-- run_tags: the same tags one per row (run, key, value).
CREATE OR REPLACE VIEW run_tags AS
SELECT run, unnest(map_keys(tags)) AS key, unnest(map_values(tags)) AS value FROM runs;
