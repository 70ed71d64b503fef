-- requires: coco_protocols
-- ap_by_run: AP@[.50:.95] (max dets 100) per run, category and area range, for the default COCO protocol.
CREATE OR REPLACE VIEW ap_by_run AS
SELECT run, category_id, area_range, avg(ap) FILTER (WHERE ap > -1) AS ap
FROM ap
WHERE protocol = 'coco' AND max_dets = 100
GROUP BY ALL;

-- run_comparison: every ordered pair of matched runs (models, or a model under perturbations) per category
-- and area range, with the AP difference run_b - run_a; null where a run has no ground truth of that size.
-- A run appears once it has been matched (`evalengine evaluate STORE --run R`, or `evalengine compare`).
CREATE OR REPLACE VIEW run_comparison AS
SELECT a.run AS run_a, b.run AS run_b, a.category_id, c.name AS category_name, a.area_range,
       a.ap AS ap_a, b.ap AS ap_b, b.ap - a.ap AS ap_difference
FROM ap_by_run AS a
JOIN ap_by_run AS b ON b.category_id = a.category_id AND b.area_range = a.area_range AND b.run <> a.run
LEFT JOIN categories AS c ON c.category_id = a.category_id;
