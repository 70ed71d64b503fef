-- requires: hosang_protocols
-- object_best (Pont-Tuset & Marques §2.3): per evaluated object and budget N, its best Jaccard (best IoU; a mask
-- IoU under iou_type segm) among the first N proposals of its image and the rank of the first proposal giving it,
-- the same of its F̃b (best_fb, best_fb_rank: null unless matched with boundary_f), with the proposals actually used
-- in that image, min(N, ranked proposals).
CREATE OR REPLACE VIEW object_best AS
SELECT m.protocol, m.run, m.image_id, m.gt_id, m.category_id, m.budget, m.best_iou, m.best_rank,
       coalesce(c.n_proposals, 0) AS n_proposals, m.best_fb, m.best_fb_rank
FROM proposal_matches AS m LEFT JOIN proposal_image_counts AS c USING (protocol, run, image_id, budget);

-- achievable_quality: per (protocol, run, budget), over all objects pooled: the mean and the median of the best
-- Jaccard, and the recall at Jaccard strictly above 0.5, 0.7 and 0.85 (MCG's recallatoverlap), against the mean
-- number of proposals used per image; the same of the best F̃b ("the same three levels are used for F̃b", §6.2;
-- null unless matched with boundary_f).
CREATE OR REPLACE VIEW achievable_quality AS
SELECT protocol, run, budget, any_value(m.mean_proposals) AS mean_proposals, count(*) AS n_objects,
       avg(best_iou) AS mean_quality, median(best_iou) AS median_quality,
       avg((best_iou > 0.5)::DOUBLE) AS recall_50, avg((best_iou > 0.7)::DOUBLE) AS recall_70,
       avg((best_iou > 0.85)::DOUBLE) AS recall_85,
       avg(best_fb) AS mean_fb, median(best_fb) AS median_fb,
       avg((best_fb > 0.5)::DOUBLE) AS fb_recall_50, avg((best_fb > 0.7)::DOUBLE) AS fb_recall_70,
       avg((best_fb > 0.85)::DOUBLE) AS fb_recall_85
FROM proposal_matches JOIN mean_proposals AS m USING (protocol, run, budget)
GROUP BY ALL ORDER BY protocol, run, budget;
