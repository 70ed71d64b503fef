"""pycocotools' ``COCOeval.ious``: ``{(imgId, catId): matrix}`` of every image and category evaluated (catId −1 when
pooled), each the ``D x G`` similarity (IoU, mask IoU or OKS) of the detections by score, cut to ``maxDets[-1]``, and
the ground truths as given (``computeIoU`` / ``computeOks``); ``[]`` where either side is empty.

The matrices are the engine's similarity step (:func:`evalengine.match.coco.similarity`) over the store's shards, the
blocks it matches with."""

from evalengine import schema
from evalengine.match.coco import similarity
from evalengine.match.groups import block_chunks
from evalengine.match.shape_columns import SHAPE_COLUMNS, places, with_shapes
from evalengine.store.layout import read_stored


def iou_matrices(layout, run: str, protocol, image_ids, category_ids) -> dict:
    """``ious`` of ``run`` under ``protocol`` for ``image_ids`` × ``category_ids`` (``[-1]`` when pooled)."""
    found = {}
    if protocol.iou_type == "keypoints" and not protocol.use_cats and protocol.kpt_use_cats_quirk:
        inputs = []  # computeOks looks the objects up under category -1 and finds none
    else:
        inputs, context = protocol.shard_inputs(layout, run)
    columns = protocol.input_columns()
    key = "category_id" if protocol.use_cats else None
    for files in inputs:
        tables = {name: read_stored(path, str(layout.root), columns.get(name), exclude=schema.SHAPES)
                  for name, path in files.items()}
        shapes = SHAPE_COLUMNS[protocol.iou_type]
        dt = with_shapes(tables["dt"], tables.get("dt_shapes"), shapes["dt"])
        gt = with_shapes(tables["gt"], tables.get("gt_shapes"), shapes["gt"])
        gt, dt, (gt_start, gt_len, dt_start, dt_len), blocks = similarity(gt, dt, context["category_ids"], protocol,
                                                                          places(context))
        named = [(gt.get_column("image_id").to_numpy(), gt.get_column(key).to_numpy() if key else None),
                 (dt.get_column("image_id").to_numpy(), dt.get_column(key).to_numpy() if key else None)]
        for lo, hi in block_chunks(gt_len, dt_len):
            values, offsets = blocks(lo, hi)
            for k in range(lo, hi):
                images, cats = named[0] if gt_len[k] else named[1]
                row = gt_start[k] if gt_len[k] else dt_start[k]
                cell = values[offsets[k - lo]:offsets[k - lo + 1]]
                found[(int(images[row]), int(cats[row]) if key else -1)] = (
                    cell.reshape(dt_len[k], gt_len[k]).copy() if dt_len[k] and gt_len[k] else [])
    return {(int(i), int(c)): found.get((int(i), int(c)), []) for i in image_ids for c in category_ids}
