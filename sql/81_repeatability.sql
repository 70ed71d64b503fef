-- requires: repeatability_protocols
-- repeatability_matches: one row per reference proposal (top N) and perturbed run: iou with its greedy partner
-- among the perturbed proposals projected back (0 if none), null when not evaluated (Hosang et al. §3).
CREATE OR REPLACE VIEW repeatability_matches AS
SELECT * FROM read_parquet(getvariable('repeatability_ref'), hive_partitioning = true);

-- repeatability: per (protocol, run) the unweighted mean over non-empty size bins of the mean matched IoU
-- (= the area under recall vs IoU over [0, 1]); protocol.json names the reference run and N.
CREATE OR REPLACE VIEW repeatability AS
WITH bins AS (
    SELECT protocol, run, size_bin, avg(iou) AS area, count(*) AS n
    FROM repeatability_matches WHERE iou IS NOT NULL GROUP BY ALL
)
SELECT protocol, run, avg(area) AS repeatability, sum(n) AS n_evaluated, count(*) AS n_bins
FROM bins GROUP BY ALL ORDER BY protocol, run;
