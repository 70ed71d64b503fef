-- requires: partitions_protocols
-- contingency: the partition match table, the non-zero cells n = |R_i ∩ R'_j| of each (run, image, parameter,
-- annotator) over the valid pixels (seg_region: the machine partition's region, gt_region: the annotator's).
CREATE OR REPLACE VIEW contingency AS
SELECT * FROM read_parquet(getvariable('partitions_contingency'), hive_partitioning = true);

-- partition_bgm: the match table's per-pair side, BGM's distance in pixels (solved at match time: an assignment).
CREATE OR REPLACE VIEW partition_bgm AS
SELECT * FROM read_parquet(getvariable('partitions_pairs'), hive_partitioning = true);

-- partition_cells: the contingency cells with their rows' and columns' areas (a: the machine region's, b: the
-- annotator region's) and the pair's valid pixels (total); evalengine.metrics.partition.with_marginals.
CREATE OR REPLACE VIEW partition_cells AS
SELECT protocol, run, image_id, parameter, annotator, seg_region, gt_region, n, seg_candidate, gt_candidate,
       sum(n) OVER (PARTITION BY protocol, run, image_id, parameter, annotator, seg_region) AS a,
       sum(n) OVER (PARTITION BY protocol, run, image_id, parameter, annotator, gt_region) AS b,
       sum(n) OVER (PARTITION BY protocol, run, image_id, parameter, annotator) AS total
FROM contingency;

-- partition_pairs: SEISM's per-table terms (mex_eval_segm.cpp, spec §4.1-4.2) of one partition against one
-- annotator: Rand index, precision / recall for regions, covering both ways (sc: over machine regions, ssc: over
-- GT regions), directional Hamming distances in pixels (dhd: over GT regions, sdhd: over machine regions), BCE,
-- GCE, LCE (errors), VoI (bits) and BGM's distance in pixels (partition_bgm), with the region counts.
CREATE OR REPLACE VIEW partition_pairs AS
WITH cells AS (SELECT * EXCLUDE (seg_candidate, gt_candidate) FROM partition_cells),
regions AS (  -- per side ('seg': the machine partition's regions, 'gt': the annotator's) and pair
    SELECT protocol, run, image_id, parameter, annotator, side, count(*) AS n_regions,
           sum(max_j * area) AS covering, sum(max_n) AS max_n, -sum(area * ln(area / total)) AS entropy,
           sum(area * area) AS squares
    FROM (SELECT protocol, run, image_id, parameter, annotator, side, region, any_value(area) AS area,
                 any_value(total)::DOUBLE AS total, max(n / (a + b - n)) AS max_j, max(n) AS max_n
          FROM (SELECT *, 'seg' AS side, seg_region AS region, a AS area FROM cells
                UNION ALL
                SELECT *, 'gt' AS side, gt_region AS region, b AS area FROM cells)
          GROUP BY protocol, run, image_id, parameter, annotator, side, region)
    GROUP BY protocol, run, image_id, parameter, annotator, side),
seg AS (SELECT * FROM regions WHERE side = 'seg'),
gt AS (SELECT * FROM regions WHERE side = 'gt'),
terms AS (
    SELECT protocol, run, image_id, parameter, annotator, any_value(total) AS total, sum(n * n) AS s2,
           sum(greatest((a - n) / a, (b - n) / b) * n) AS bce, sum((b - n) * n / b) AS gce_gt,
           sum((a - n) * n / a) AS gce_seg, sum(least((b - n) * n / b, (a - n) * n / a)) AS lce,
           sum(n * ln(total * n / a / b)) AS mi
    FROM cells GROUP BY ALL),
counts AS (
    SELECT t.*, seg.n_regions AS n_seg, gt.n_regions AS n_gt, seg.covering AS covering_seg,
           gt.covering AS covering_gt,
           seg.max_n AS max_n_seg, gt.max_n AS max_n_gt, seg.entropy AS entropy_seg, gt.entropy AS entropy_gt,
           (t.s2 - t.total) // 2 AS n11, (seg.squares - t.s2) // 2 AS n10, (gt.squares - t.s2) // 2 AS n01,
           (t.total * t.total - seg.squares - gt.squares + t.s2) // 2 AS n00, m.bgm_distance
    FROM terms AS t JOIN seg USING (protocol, run, image_id, parameter, annotator)
    JOIN gt USING (protocol, run, image_id, parameter, annotator)
    JOIN partition_bgm AS m USING (protocol, run, image_id, parameter, annotator))
SELECT protocol, run, image_id, parameter, annotator, total, n_seg, n_gt,
       (n11 + n00)::DOUBLE / (n11 + n00 + n01 + n10) AS ri,
       CASE WHEN n11 + n10 > 0 THEN n11::DOUBLE / (n11 + n10) ELSE 'NaN'::DOUBLE END AS precision,
       CASE WHEN n11 + n01 > 0 THEN n11::DOUBLE / (n11 + n01) ELSE 'NaN'::DOUBLE END AS recall,
       covering_seg / total AS sc, covering_gt / total AS ssc,
       total - max_n_gt AS dhd_distance, total - max_n_seg AS sdhd_distance, bgm_distance,
       bce / total AS bce, least(gce_gt, gce_seg) / total AS gce, lce / total AS lce,
       entropy_seg / ln(2) / total + entropy_gt / ln(2) / total - 2 * (mi / ln(2) / total) AS voi
FROM counts;

-- Fb's precision and recall from its counts by SEISM's rules (no GT boundary: P 0, R 1; no machine boundary: P 1,
-- R 0), and F (0 when P + R = 0; Fb's and Fop's); evalengine.geometry.boundary_pr.boundary_precision_recall.
CREATE OR REPLACE MACRO fb_precision(matched_pred, n_pred, n_gt) AS
    CASE WHEN n_gt = 0 THEN 0.0 WHEN n_pred = 0 THEN 1.0 ELSE matched_pred / n_pred END;
CREATE OR REPLACE MACRO fb_recall(matched_gt, n_gt, n_pred) AS
    CASE WHEN n_gt = 0 THEN 1.0 WHEN n_pred = 0 THEN 0.0 ELSE matched_gt / n_gt END;
CREATE OR REPLACE MACRO fb_f(p, r) AS CASE WHEN p + r = 0 THEN 0.0 ELSE 2 * p * r / (p + r) END;

-- partition_fop: per (protocol, run, image, parameter) precision and recall for objects and parts as SEISM's fop.hpp
-- computes them over all the image's annotators (spec §4.4.3; evalengine.metrics.partition.objects) at the code's
-- γo = 0.9, γp = 0.25, β = 0.1: the candidate flags come from the match table (its 99 % area cut, area_percentile
-- in the protocol key); a cell classifies its two candidate regions (object: both overlaps >= γo; a machine part:
-- n/a >= γo, n/b >= γp; an annotator part: n/b >= γo, n/a >= γp), a machine region is an object for any annotator;
-- the fragmentation of a region left unclassified sums the overlaps of the other side's regions inside it (n/b of
-- an annotator region, n/a of a machine region, averaged over the annotators), summed as integer pixels per region.
CREATE OR REPLACE VIEW partition_fop AS
WITH cells AS (
    SELECT *, seg_candidate AND gt_candidate AND n / b >= 0.9 AND n / a >= 0.9 AS is_object,
           seg_candidate AND gt_candidate AND NOT (n / b >= 0.9 AND n / a >= 0.9) AND n / b >= 0.25
               AND n / a >= 0.9 AS seg_part,
           seg_candidate AND gt_candidate AND NOT (n / a >= 0.9 AND n / b >= 0.25) AND n / b >= 0.9
               AND n / a >= 0.25 AS gt_part,
           CASE WHEN n / a >= 0.9 AND n / b < 0.9 THEN n ELSE 0 END AS gt_fragment,
           CASE WHEN n / b >= 0.9 AND n / a < 0.9 THEN n ELSE 0 END AS seg_fragment
    FROM partition_cells),
gt_regions AS (
    SELECT protocol, run, image_id, parameter, any_value(gt_candidate) AS candidate, bool_or(is_object) AS is_object,
           bool_or(gt_part) AS is_part, sum(gt_fragment) / any_value(b) AS fragmentation
    FROM cells GROUP BY protocol, run, image_id, parameter, annotator, gt_region),
seg_regions AS (
    SELECT protocol, run, image_id, parameter, any_value(seg_candidate) AS candidate,
           bool_or(is_object) AS is_object, bool_or(seg_part) AS is_part,
           sum(seg_fragment) / any_value(a) AS fragmentation
    FROM cells GROUP BY protocol, run, image_id, parameter, seg_region),
sides AS (
    SELECT protocol, run, image_id, parameter, side, count_if(candidate) AS candidates,
           count_if(is_object) AS objects, count_if(is_part AND NOT is_object) AS parts,
           fsum(CASE WHEN candidate AND NOT is_object AND NOT is_part THEN fragmentation ELSE 0.0 END) AS fragmentation
    FROM (SELECT *, 'gt' AS side FROM gt_regions UNION ALL SELECT *, 'seg' AS side FROM seg_regions)
    GROUP BY ALL),
rates AS (
    SELECT s.protocol, s.run, s.image_id, s.parameter,
           (s.objects + s.fragmentation / k.annotators + 0.1 * s.parts) / s.candidates AS fop_precision,
           (g.objects + g.fragmentation + 0.1 * g.parts) / g.candidates AS fop_recall
    FROM sides AS s JOIN sides AS g USING (protocol, run, image_id, parameter)
    JOIN (SELECT protocol, run, image_id, parameter, count(DISTINCT annotator) AS annotators FROM contingency
          GROUP BY ALL) AS k USING (protocol, run, image_id, parameter)
    WHERE s.side = 'seg' AND g.side = 'gt')
SELECT *, fb_f(fop_precision, fop_recall) AS fop FROM rates;

-- partition_fb: per (fb_protocol, run, image, parameter) Fb's boundary counts and fb, fb_precision, fb_recall; empty
-- here, defined over the boundary table by 92_partition_boundaries.sql once a run has one (`--measures fb`).
CREATE OR REPLACE VIEW partition_fb AS
SELECT NULL::VARCHAR AS fb_protocol, NULL::VARCHAR AS run, NULL::BIGINT AS image_id, NULL::DOUBLE AS parameter,
       NULL::BIGINT AS fb_matched_pred, NULL::BIGINT AS fb_n_pred, NULL::BIGINT AS fb_matched_gt,
       NULL::BIGINT AS fb_n_gt, NULL::DOUBLE AS fb, NULL::DOUBLE AS fb_precision, NULL::DOUBLE AS fb_recall
WHERE false;

-- partition_measures: per (run, image, parameter) the SEISM measures that are aggregations of the contingency
-- table, with its multi-GT conventions (the mean over annotators; similarities 1 - mean error, 1 - mean distance / n;
-- vd = (dhd + sdhd) / 2; fr = F of the mean precision and recall; bgm from the distances solved at match time), and fb
-- with its counts from partition_fb (one row per boundary protocol key fb_protocol of the run; NULL without one), fop
-- from partition_fop.
CREATE OR REPLACE VIEW partition_measures AS
WITH per_image AS (
    SELECT protocol, run, image_id, parameter, avg(sc) AS sc, avg(ssc) AS ssc, avg(ri) AS pri, avg(voi) AS voi,
           avg(CASE WHEN greatest(n_seg, n_gt) = 1 THEN 1.0
                    ELSE 1.0 - voi / (2.0 * ln(greatest(n_seg, n_gt)) / ln(2)) END) AS nvoi,
           1.0 - avg(bce) AS bce, 1.0 - avg(gce) AS gce, 1.0 - avg(lce) AS lce,
           1.0 - avg(dhd_distance) / any_value(total) AS dhd, 1.0 - avg(sdhd_distance) / any_value(total) AS sdhd,
           1.0 - avg(bgm_distance) / any_value(total) AS bgm,
           avg(precision) AS fr_precision, avg(recall) AS fr_recall
    FROM partition_pairs GROUP BY ALL)
SELECT p.*, 0.5 * (dhd + sdhd) AS vd,
       CASE WHEN fr_precision + fr_recall > 0 AND NOT isnan(fr_precision + fr_recall)
            THEN 2 * fr_precision * fr_recall / (fr_precision + fr_recall) ELSE 0.0 END AS fr,
       o.fop, o.fop_precision, o.fop_recall, i.file_name, b.fb_protocol, b.fb, b.fb_precision, b.fb_recall,
       b.fb_matched_pred, b.fb_n_pred, b.fb_matched_gt, b.fb_n_gt
FROM per_image AS p JOIN partition_fop AS o USING (protocol, run, image_id, parameter)
LEFT JOIN images AS i USING (image_id)
LEFT JOIN partition_fb AS b USING (run, image_id, parameter);

-- dataset_measures: per (run, parameter) the mean over images, fr and fop as F of the mean precision and recall
-- (SEISM gather_measure.m), fb of the boundary counts summed over images (spec §4.3; SEISM's edge rules).
CREATE OR REPLACE VIEW dataset_measures AS
WITH pooled AS (
    SELECT protocol, run, fb_protocol, parameter, count(*) AS n_images, avg(sc) AS sc, avg(ssc) AS ssc,
           avg(pri) AS pri, avg(voi) AS voi, avg(nvoi) AS nvoi, avg(bce) AS bce, avg(gce) AS gce, avg(lce) AS lce,
           avg(dhd) AS dhd, avg(sdhd) AS sdhd, avg(vd) AS vd, avg(bgm) AS bgm, avg(fr_precision) AS fr_precision,
           avg(fr_recall) AS fr_recall,
           CASE WHEN avg(fr_precision) + avg(fr_recall) > 0
                THEN 2 * avg(fr_precision) * avg(fr_recall) / (avg(fr_precision) + avg(fr_recall)) ELSE 0.0 END AS fr,
           avg(fop_precision) AS fop_precision, avg(fop_recall) AS fop_recall,
           fb_f(avg(fop_precision), avg(fop_recall)) AS fop,
           sum(fb_matched_pred) AS fb_matched_pred, sum(fb_n_pred) AS fb_n_pred,
           sum(fb_matched_gt) AS fb_matched_gt, sum(fb_n_gt) AS fb_n_gt
    FROM partition_measures GROUP BY ALL),
rates AS (
    SELECT *, fb_precision(fb_matched_pred, fb_n_pred, fb_n_gt) AS fb_precision,
           fb_recall(fb_matched_gt, fb_n_gt, fb_n_pred) AS fb_recall
    FROM pooled)
SELECT *, fb_f(fb_precision, fb_recall) AS fb FROM rates ORDER BY protocol, run, parameter, fb_protocol;

-- pr_curve_segmentation: the dataset precision-recall points of fr, fop (and fb, per boundary key fb_protocol) over
-- each run's parameters.
CREATE OR REPLACE VIEW pr_curve_segmentation AS
SELECT DISTINCT protocol, run, NULL AS fb_protocol, 'fr' AS measure, parameter, fr_precision AS precision,
       fr_recall AS recall, fr AS f
FROM dataset_measures
UNION ALL
SELECT DISTINCT protocol, run, NULL, 'fop', parameter, fop_precision, fop_recall, fop
FROM dataset_measures
UNION ALL
SELECT protocol, run, fb_protocol, 'fb', parameter, fb_precision, fb_recall, fb
FROM dataset_measures WHERE fb_protocol IS NOT NULL
ORDER BY protocol, run, measure DESC, fb_protocol, parameter;
