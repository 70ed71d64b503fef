"""A transcription of the TF Object Detection API's NumPy evaluation path for boxes (tensorflow/models
research/object_detection, PyPI ``tf-models-research-object-detection==2.8.0.post1``, Apache-2.0), the differential
reference of the OpenImages tests (the package needs TensorFlow to import): ``OpenImagesChallengeEvaluator`` /
``OpenImagesDetectionEvaluator`` → ``ObjectDetectionEvaluation`` → ``PerImageEvaluation`` (box mode) →
``metrics.compute_precision_recall`` / ``compute_average_precision``, with ``np_box_ops``. Kept as the reference
writes it (its NumPy-1 ``np.float`` spelled ``float``)."""

import numpy as np


def _area(b):
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def _intersection(b1, b2):
    y_min1, x_min1, y_max1, x_max1 = np.split(b1, 4, axis=1)
    y_min2, x_min2, y_max2, x_max2 = np.split(b2, 4, axis=1)
    h = np.maximum(np.zeros(np.maximum(y_min1, y_min2.T).shape), np.minimum(y_max1, y_max2.T) - np.maximum(y_min1, y_min2.T))
    w = np.maximum(np.zeros(np.maximum(x_min1, x_min2.T).shape), np.minimum(x_max1, x_max2.T) - np.maximum(x_min1, x_min2.T))
    return h * w


def _iou(b1, b2):
    inter = _intersection(b1, b2)
    return inter / (np.expand_dims(_area(b1), axis=1) + np.expand_dims(_area(b2), axis=0) - inter)


def _ioa(b1, b2):
    return _intersection(b1, b2) / np.expand_dims(_area(b2), axis=0)


_EPSILON = 1e-7  # np_mask_ops


def _mask_area(masks):
    return np.sum(masks, axis=(1, 2), dtype=np.float32)


def _mask_intersection(m1, m2):
    answer = np.zeros([m1.shape[0], m2.shape[0]], dtype=np.float32)
    for i in np.arange(m1.shape[0]):
        for j in np.arange(m2.shape[0]):
            answer[i, j] = np.sum(np.minimum(m1[i], m2[j]), dtype=np.float32)
    return answer


def _mask_iou(m1, m2):
    inter = _mask_intersection(m1, m2)
    union = np.expand_dims(_mask_area(m1), axis=1) + np.expand_dims(_mask_area(m2), axis=0) - inter
    return inter / np.maximum(union, _EPSILON)


def _mask_ioa(m1, m2):
    return _mask_intersection(m1, m2) / (np.expand_dims(_mask_area(m2), axis=0) + _EPSILON)


def _tp_fp_single_class(boxes, scores, gt_boxes, difficult, group_of, thr, weight, max_out=10000, masks=None,
                        gt_masks=None):
    if boxes.size == 0:
        return np.array([], dtype=float), np.array([], dtype=bool)
    if masks is not None:
        return _tp_fp_single_class_masks(boxes, scores, masks, gt_boxes, gt_masks, difficult, group_of, thr, weight)
    keep = scores > -10.0  # non_max_suppression: filter_scores_greater_than, sort, cap (IoU 1.0)
    boxes, scores = boxes[keep], scores[keep]
    order = np.argsort(scores)[::-1][:max_out]
    boxes, scores = boxes[order], scores[order]
    n = boxes.shape[0]
    iou = _iou(boxes, gt_boxes[~group_of])
    ioa = np.transpose(_ioa(gt_boxes[group_of], boxes))
    if gt_boxes.size == 0:
        return scores, np.zeros(n, dtype=bool)
    tp = np.zeros(n, dtype=bool)
    to_difficult = np.zeros(n, dtype=bool)
    to_group = np.zeros(n, dtype=bool)
    if iou.shape[1] > 0:
        diff = difficult[~group_of]
        best = np.argmax(iou, axis=1)
        detected = np.zeros(iou.shape[1], dtype=bool)
        for i in range(n):
            g = best[i]
            if not tp[i] and not to_difficult[i] and iou[i, g] >= thr and not to_group[i]:
                if not diff[g]:
                    if not detected[g]:
                        tp[i] = True
                        detected[g] = True
                else:
                    to_difficult[i] = True
    group_scores = np.ndarray([0], dtype=float)
    group_labels = np.ndarray([0], dtype=float)
    if ioa.shape[1] > 0:
        group_scores = np.zeros(ioa.shape[1], dtype=float)
        group_labels = weight * np.ones(ioa.shape[1], dtype=float)
        best = np.argmax(ioa, axis=1)
        for i in range(n):
            g = best[i]
            if not tp[i] and not to_difficult[i] and ioa[i, g] >= thr and not to_group[i]:
                to_group[i] = True
                group_scores[g] = max(group_scores[g], scores[i])
        selector = np.where((group_scores > 0) & (group_labels > 0))
        group_scores, group_labels = group_scores[selector], group_labels[selector]
    valid = ~to_difficult & ~to_group
    return (np.concatenate((scores[valid], group_scores)),
            np.concatenate((tp[valid].astype(float), group_labels)))


def _tp_fp_single_class_masks(boxes, scores, masks, gt_boxes, gt_masks, difficult, group_of, thr, weight):
    """The mask mode of ``_compute_tp_fp_for_single_class`` (NMS at IoU 1.0: a sort)."""
    order = np.argsort(scores)[::-1]
    boxes, scores, masks = boxes[order], scores[order], masks[order]
    n = boxes.shape[0]
    present = np.sum(gt_masks, axis=(1, 2)) > 0
    if gt_boxes.size == 0:
        return scores, np.zeros(n, dtype=bool)
    tp = np.zeros(n, dtype=bool)
    to_difficult, to_group, to_box = (np.zeros(n, dtype=bool) for _ in range(3))

    def match_iou(iou, diff, is_box):
        best = np.argmax(iou, axis=1)
        detected = np.zeros(iou.shape[1], dtype=bool)
        for i in range(n):
            g = best[i]
            if not tp[i] and not to_difficult[i] and iou[i, g] >= thr and not to_group[i]:
                if not diff[g]:
                    if not detected[g]:
                        tp[i] = True
                        detected[g] = True
                        to_box[i] = is_box
                else:
                    to_difficult[i] = True

    def match_ioa(ioa, is_box):
        group_scores = np.zeros(ioa.shape[1], dtype=float)
        labels = weight * np.ones(ioa.shape[1], dtype=float)
        best = np.argmax(ioa, axis=1)
        for i in range(n):
            g = best[i]
            if not tp[i] and not to_difficult[i] and ioa[i, g] >= thr and not to_group[i]:
                to_group[i] = True
                to_box[i] = is_box
                group_scores[g] = max(group_scores[g], scores[i])
        selector = np.where((group_scores > 0) & (labels > 0))
        return group_scores[selector], labels[selector]

    gm, gg, gd = gt_masks[present], group_of[present], difficult[present]
    iou_mask, ioa_mask = _mask_iou(masks, gm[~gg]), np.transpose(_mask_ioa(gm[gg], masks))
    bb, bg, bd = gt_boxes[~present], group_of[~present], difficult[~present]
    iou = ioa = np.ndarray([0, 0])
    if (~present).any():
        iou, ioa = _iou(boxes, bb[~bg]), np.transpose(_ioa(bb[bg], boxes))
    mask_group_scores, mask_group_labels = np.ndarray([0], dtype=float), np.ndarray([0], dtype=float)
    if iou_mask.shape[1] > 0:
        match_iou(iou_mask, gd[~gg], False)
    if ioa_mask.shape[1] > 0:
        mask_group_scores, mask_group_labels = match_ioa(ioa_mask, False)
    if iou.shape[1] > 0:
        match_iou(iou, bd[~bg], True)
    if ioa.shape[1] > 0:
        match_ioa(ioa, True)
    valid = ~to_difficult & ~to_group & ~to_box
    return (np.concatenate((scores[valid], mask_group_scores)),
            np.concatenate((tp[valid].astype(float), mask_group_labels)))


def _precision_recall(scores, labels, num_gt):
    order = np.argsort(scores)[::-1]
    tp = labels[order]
    fp = (tp <= 0).astype(float)
    cum_tp, cum_fp = np.cumsum(tp), np.cumsum(fp)
    return cum_tp.astype(float) / (cum_tp + cum_fp), cum_tp.astype(float) / num_gt


def _average_precision(precision, recall):
    if not precision.size:
        return 0.0
    recall = np.concatenate([[0], recall, [1]])
    precision = np.concatenate([[0], precision, [0]])
    for i in range(len(precision) - 2, -1, -1):
        precision[i] = np.maximum(precision[i], precision[i + 1])
    indices = np.where(recall[1:] != recall[:-1])[0] + 1
    return np.sum((recall[indices] - recall[indices - 1]) * precision[indices])


def _is_class_correctly_detected(boxes, scores, gt_boxes, thr, masks=None, gt_masks=None):
    """``_compute_is_class_correctly_detected_in_image``: the top-scoring detection (``np.argmax``) against every
    ground truth of the class (IoU, or mask IoU)."""
    if boxes.size == 0 or gt_boxes.size == 0:
        return 0
    top = np.argmax(scores)
    if masks is not None:
        iou = _mask_iou(masks[top:top + 1], gt_masks)
    else:
        iou = _iou(boxes[top:top + 1], gt_boxes)
    return int(np.max(iou) >= thr)


def evaluate(num_classes, groundtruth, detections, challenge, thr=0.5, weight=1.0, corloc=False):
    """``(per_class_ap, mean_ap)`` (``corloc``: and ``(per_class_corloc, mean_corloc)``): every ground-truth image added
    first (in list order), then the detections image by image, as ``oid_challenge_evaluation.py``; dicts as
    :func:`tests.openimages_cases.build_store` takes them, class ids 1-based."""
    gts, evaluatable = {}, {}
    num_gt = np.zeros(num_classes, dtype=float)
    num_gt_imgs, num_correct = np.zeros(num_classes, dtype=int), np.zeros(num_classes)
    for g in groundtruth:
        boxes = np.asarray(g["groundtruth_boxes"], float).reshape(-1, 4)
        classes = np.asarray(g["groundtruth_classes"], int) - 1
        n = classes.shape[0]
        group_of = np.asarray(g.get("groundtruth_group_of", np.zeros(n, bool)), bool)
        difficult = np.asarray(g.get("groundtruth_difficult", np.zeros(n, bool)), bool)
        gt_masks = g.get("groundtruth_instance_masks")
        gts[g["image_key"]] = (boxes, classes, difficult, group_of, gt_masks)
        if gt_masks is not None:  # a ground truth without a mask is not counted
            difficult = difficult | (np.sum(gt_masks, axis=(1, 2)) == 0)
        for c in range(num_classes):
            num_gt[c] += np.sum(classes[~difficult & ~group_of] == c) + weight * np.sum(classes[group_of & ~difficult] == c)
            if np.any(classes == c):
                num_gt_imgs[c] += 1
        image_classes = np.asarray(g.get("groundtruth_image_classes", []), int) - 1
        evaluatable[g["image_key"]] = np.unique(np.concatenate((image_classes, classes)))
    scores_per_class = [[] for _ in range(num_classes)]
    labels_per_class = [[] for _ in range(num_classes)]
    for d in detections:
        key = d["image_key"]
        boxes = np.asarray(d["detection_boxes"], float).reshape(-1, 4)
        scores = np.asarray(d["detection_scores"], float)
        classes = np.asarray(d["detection_classes"], int) - 1
        masks = d.get("detection_masks")
        masks = np.zeros((len(scores), 1, 1), np.uint8) if masks is None else np.asarray(masks, np.uint8)
        if challenge:
            allowed = np.isin(classes, evaluatable.get(key, np.array([])))
            boxes, scores, classes, masks = boxes[allowed], scores[allowed], classes[allowed], masks[allowed]
        valid = np.logical_and(boxes[:, 0] < boxes[:, 2], boxes[:, 1] < boxes[:, 3])
        boxes, scores, classes, masks = boxes[valid], scores[valid], classes[valid], masks[valid]
        gt_boxes, gt_classes, difficult, group_of, gt_masks = gts.get(
            key, (np.empty((0, 4)), np.array([], int), np.array([], bool), np.array([], bool), None))
        mask_mode = "detection_masks" in d
        if mask_mode and gt_masks is None:
            gt_masks = np.zeros((0, 1, 1), np.uint8)
        for c in range(num_classes):
            s, lab = _tp_fp_single_class(boxes[classes == c], scores[classes == c], gt_boxes[gt_classes == c],
                                         difficult[gt_classes == c], group_of[gt_classes == c], thr, weight,
                                         masks=masks[classes == c] if mask_mode else None,
                                         gt_masks=gt_masks[gt_classes == c] if mask_mode else None)
            if s.shape[0] > 0:
                scores_per_class[c].append(s)
                labels_per_class[c].append(lab)
            num_correct[c] += _is_class_correctly_detected(
                boxes[classes == c], scores[classes == c], gt_boxes[gt_classes == c], thr,
                masks[classes == c] if mask_mode else None, gt_masks[gt_classes == c] if mask_mode else None)
    ap = np.full(num_classes, np.nan)
    for c in range(num_classes):
        if num_gt[c] == 0:
            continue
        scores = np.concatenate(scores_per_class[c]) if scores_per_class[c] else np.array([], float)
        labels = np.concatenate(labels_per_class[c]) if labels_per_class[c] else np.array([], float)
        ap[c] = _average_precision(*_precision_recall(scores, labels, num_gt[c]))
    result = ap, np.nanmean(ap) if (~np.isnan(ap)).any() else np.nan
    if not corloc:
        return result
    with np.errstate(divide="ignore", invalid="ignore"):
        located = np.where(num_gt_imgs == 0, np.nan, num_correct / num_gt_imgs)
    return result, (located, np.nanmean(located) if (~np.isnan(located)).any() else np.nan)


# --- dataset_tools/oid_hierarchical_labels_expansion.py and metrics/oid_challenge_evaluation.py ----------------------

def _update_dict(initial, update):
    for key, values in update.items():
        if key in initial:
            initial[key].update(values)
        else:
            initial[key] = set(values)


def _build_plain_hierarchy(hierarchy, skip_root=False):
    all_children, all_keyed_parent, all_keyed_child = set(), {}, {}
    if "Subcategory" in hierarchy:
        for node in hierarchy["Subcategory"]:
            keyed_parent, keyed_child, children = _build_plain_hierarchy(node)
            _update_dict(all_keyed_parent, keyed_parent)
            _update_dict(all_keyed_child, keyed_child)
            all_children.update(children)
    if not skip_root:
        all_keyed_parent[hierarchy["LabelName"]] = set(all_children)
        all_children.add(hierarchy["LabelName"])
        for child in all_keyed_child:
            all_keyed_child[child].add(hierarchy["LabelName"])
        all_keyed_child[hierarchy["LabelName"]] = set()
    return all_keyed_parent, all_keyed_child, all_children


def expand_csv(lines, hierarchy, labels_file):
    """The expansion tool's ``main`` on a CSV file's lines (header first)."""
    keyed_parent, keyed_child, _ = _build_plain_hierarchy(hierarchy, skip_root=True)
    header, out = lines[0], [lines[0]]
    names = header.strip().split(",")
    label_at = names.index("LabelName")
    confidence_at = names.index("Confidence") if labels_file else -1
    for line in lines[1:]:
        row = line.split(",")
        out.append(line)
        if labels_file and int(row[confidence_at]) != 1:
            targets = keyed_parent[row[label_at]]
        else:
            assert row[label_at] in keyed_child
            targets = keyed_child[row[label_at]]
        for target in targets:
            row[label_at] = target
            out.append(",".join(row))
    return out


def evaluate_csv(boxes_csv, labels_csv, predictions_csv, hierarchy, label_map, weight=1.0):
    """``oid_challenge_evaluation.py``'s ``main`` (boxes) with files expanded by the expansion tool: pandas reads,
    groupby('ImageID'), ``build_groundtruth_dictionary`` / ``build_predictions_dictionary``, the challenge evaluator.
    ``label_map``: LabelName → 1-based id. Returns ``(per_class_ap, mean_ap)``."""
    import io

    import pandas as pd

    def expanded(path, labels_file):
        with open(path) as handle:
            return io.StringIO("".join(expand_csv(handle.readlines(), hierarchy, labels_file)))

    locations = pd.read_csv(expanded(boxes_csv, False))
    labels = pd.read_csv(expanded(labels_csv, True)).rename(columns={"Confidence": "ConfidenceImageLabel"})
    annotations = pd.concat([locations, labels])
    predictions = pd.read_csv(predictions_csv)
    groundtruth, detections = [], []
    for image_id, data in annotations.groupby("ImageID"):
        boxes = data[data.XMin.notnull()]
        verified = data[data.ConfidenceImageLabel.notnull()]
        groundtruth.append({"image_key": image_id,
                            "groundtruth_boxes": boxes[["YMin", "XMin", "YMax", "XMax"]].to_numpy().astype(float),
                            "groundtruth_classes": boxes["LabelName"].map(lambda x: label_map[x]).to_numpy(),
                            "groundtruth_group_of": boxes["IsGroupOf"].to_numpy().astype(int).astype(bool),
                            "groundtruth_image_classes": verified["LabelName"].map(lambda x: label_map[x]).to_numpy()})
        mine = predictions.loc[predictions["ImageID"] == image_id]
        detections.append({"image_key": image_id,
                           "detection_classes": mine["LabelName"].map(lambda x: label_map[x]).to_numpy(),
                           "detection_scores": mine["Score"].to_numpy().astype(float),
                           "detection_boxes": mine[["YMin", "XMin", "YMax", "XMax"]].to_numpy().astype(float)})
    return evaluate(max(label_map.values()), groundtruth, detections, challenge=True, weight=weight)
