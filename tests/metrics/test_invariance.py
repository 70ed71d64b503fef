"""Invariance tables (Borji & Iranmanesh §6): runs tagged with their perturbation, in one store or one store per
dataset variant, against pycocotools run on each run's own files; per-object outcomes against pycocotools' evalImgs."""

import json

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine.api import ingest_gt, invariance
from evalengine.errors import InputError, InputWarning
from evalengine.metrics.summary import SUMMARY_LAYOUT
from tests.generators import random_coco
from tests.helpers import write_proposals_near_objects
from tests.reference import pycocotools_eval

MODELS = ("frcnn", "retina")
AREAS = ("all", "small", "medium", "large")


def detections(gt: dict, rng) -> list:
    """A model's results on ``gt``: jittered objects (some with another label), background boxes, tied scores."""
    categories = [c["id"] for c in gt["categories"]]
    images = [i["id"] for i in gt["images"]]
    dets = []
    for ann in gt["annotations"]:
        for _ in range(int(rng.choice([0, 1, 1, 2]))):
            x, y, w, h = ann["bbox"]
            dx, dy = rng.normal(0, 0.1 * max(w, 1), 2)
            label = ann["category_id"] if rng.random() < 0.85 else int(rng.choice(categories))
            dets.append({"image_id": ann["image_id"], "category_id": label, "score": round(float(rng.random()), 2),
                         "bbox": [x + dx, y + dy, w * float(np.exp(rng.normal(0, 0.1))), h]})
    for _ in range(int(rng.integers(1, 6))):
        dets.append({"image_id": int(rng.choice(images)), "category_id": int(rng.choice(categories)),
                     "score": round(float(rng.random()), 2), "bbox": [*rng.uniform(0, 300, 2), *rng.uniform(1, 90, 2)]})
    return dets


def flipped(gt: dict, dets: list) -> tuple:
    """The vertical flip (spec §3.5 row 7): y' = H − y − h for the ground truth and the results."""
    height = {i["id"]: i["height"] for i in gt["images"]}
    flip = lambda item: dict(item, bbox=[item["bbox"][0], height[item["image_id"]] - item["bbox"][1] - item["bbox"][3],
                                         *item["bbox"][2:]])
    return dict(gt, annotations=[flip(a) for a in gt["annotations"]]), [flip(d) for d in dets]


def make_store(folder, gt: dict, runs: dict):
    """A store of ``gt`` with ``runs`` = {run: (dets, tags)}."""
    folder.mkdir(parents=True)
    (folder / "gt.json").write_text(json.dumps(gt))
    store = ingest_gt(folder / "gt.json", folder / "store")
    for run, (dets, tags) in runs.items():
        (folder / f"{run}.json").write_text(json.dumps(dets))
        store = store.add_run(folder / f"{run}.json", run, tags=tags)
    return store


def expected_rows(ev) -> dict:
    """{(metric, category_id or None): value} from pycocotools' precision array, as summarize() slices it."""
    precision, params = ev.eval["precision"], ev.params
    out = {}
    for (metric, _, iou, area, _), stat in zip(SUMMARY_LAYOUT[:6], ev.stats[:6]):
        a, m = params.areaRngLbl.index(area), params.maxDets.index(100)
        t = slice(None) if iou is None else np.where(params.iouThrs == iou)[0]
        out[(metric, None)] = stat
        for k, category in enumerate(params.catIds):
            values = precision[t, :, k, a, m]
            out[(metric, category)] = float(np.mean(values[values > -1])) if (values > -1).any() else -1.0
    return out


def check_against_pycocotools(table: pl.DataFrame, inputs: dict):
    """Every row of the long table equals pycocotools on that run's (gt, dets); every expected row is there."""
    for run, (gt, dets) in inputs.items():
        want = expected_rows(pycocotools_eval(gt, dets))
        rows = table.filter(pl.col("run") == run)
        got = {(r["metric"], r["category_id"]): r["value"] for r in rows.iter_rows(named=True)}
        assert got.keys() == want.keys(), run
        np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=0, atol=1e-12, err_msg=run)


def random_variants(tmp_path, seed: int) -> tuple:
    """One store of the original images (orig and blur runs per model, an untagged run) and one of the flipped
    ones (vflip runs); returns (orig store, flip store, {run: (gt, dets)})."""
    rng = np.random.default_rng(seed)
    gt = {}
    while not gt.get("annotations"):
        gt, _ = random_coco(seed)
        seed += 1000
    inputs, orig_runs, flip_runs = {}, {}, {}
    for model in MODELS:
        for perturbation in ("orig", "blur"):
            dets = detections(gt, rng)
            inputs[f"{model}-{perturbation}"] = (gt, dets)
            orig_runs[f"{model}-{perturbation}"] = (dets, {"model": model, "perturbation": perturbation})
        flip_gt, flip_dets = flipped(gt, detections(gt, rng))
        inputs[f"{model}-vflip"] = (flip_gt, flip_dets)
        flip_runs[f"{model}-vflip"] = (flip_dets, {"model": model, "perturbation": "vflip", "level": "1"})
    orig_runs["untagged"] = (detections(gt, rng), {"model": "frcnn"})
    return make_store(tmp_path / "orig", gt, orig_runs), make_store(tmp_path / "flip", flip_gt, flip_runs), inputs


@pytest.mark.parametrize("seed", range(6))
def test_tables_equal_pycocotools_per_run(tmp_path, seed):
    orig, flip, inputs = random_variants(tmp_path, seed)
    with pytest.warns(InputWarning, match=f"left out \\(no perturbation tag\\): {orig.path}:untagged"):
        result = invariance([orig, flip.path])
    table = result.metrics()
    assert table.columns == ["store", "model", "perturbation", "level", "run", "metric", "size", "category_id",
                             "value"]
    assert table.get_column("run").unique(maintain_order=True).to_list() == [
        "frcnn-orig", "frcnn-blur", "retina-orig", "retina-blur", "frcnn-vflip", "retina-vflip"]
    sizes = dict(table.select("metric", "size").unique().iter_rows())
    assert sizes == {"AP": "all", "AP50": "all", "AP75": "all", "APs": "small", "APm": "medium", "APl": "large"}
    assert set(table.filter(pl.col("perturbation") == "vflip").get_column("level")) == {"1"}
    assert set(table.filter(pl.col("perturbation") == "vflip").get_column("store")) == {str(flip.path)}
    check_against_pycocotools(table, inputs)
    pivot = result.table(("AP", "AP50"))
    assert pivot.columns == ["model", "orig AP", "orig AP50", "blur AP", "blur AP50", "vflip:1 AP", "vflip:1 AP50"]
    assert pivot.get_column("model").to_list() == list(MODELS)
    for model in MODELS:
        stats = pycocotools_eval(*inputs[f"{model}-vflip"]).stats
        assert pivot.filter(pl.col("model") == model)["vflip:1 AP50"].item() == pytest.approx(stats[1], abs=1e-12)


def reference_objects(gt: dict, dets: list) -> dict:
    """{gt_id: (detected, score, iou)} of the regular objects at IoU 0.5, area all, from pycocotools' evalImgs."""
    ev = pycocotools_eval(gt, dets)
    boxes = {a["id"]: a["bbox"] for a in gt["annotations"]}
    det_boxes = {i + 1: d["bbox"] for i, d in enumerate(dets)}  # loadRes ids
    out = {}
    for img in ev.evalImgs:
        if img is None or img["aRng"] != ev.params.areaRng[0]:
            continue
        scores = dict(zip(img["dtIds"], img["dtScores"]))
        for j, gt_id in enumerate(img["gtIds"]):
            if img["gtIgnore"][j]:
                continue
            det = int(img["gtMatches"][0, j])
            iou = float(mask_utils.iou([det_boxes[det]], [boxes[gt_id]], [0])[0, 0]) if det else None
            out[gt_id] = (bool(det), scores[det] if det else None, iou)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_objects_equal_pycocotools_and_pair_across_stores(tmp_path, seed):
    orig, flip, inputs = random_variants(tmp_path, seed)
    with pytest.warns(InputWarning):
        result = invariance([orig, flip], models=["frcnn"])
    objects = result.objects()
    assert objects.get_column("run").unique(maintain_order=True).to_list() == ["frcnn-orig", "frcnn-blur",
                                                                               "frcnn-vflip"]
    for run, (gt, dets) in inputs.items():
        if not run.startswith("frcnn"):
            continue
        got = {r["gt_id"]: (r["detected"], r["score"], r["iou"])
               for r in objects.filter(pl.col("run") == run).iter_rows(named=True)}
        assert got == reference_objects(gt, dets), run
    detected = {run: {r["object_id"]: r["detected"] for r in objects.filter(pl.col("run") == run).iter_rows(
        named=True)} for run in ("frcnn-orig", "frcnn-blur", "frcnn-vflip")}
    changes = {r["perturbation"]: r for r in result.object_changes("orig").iter_rows(named=True)}
    for run, label in (("frcnn-blur", "blur"), ("frcnn-vflip", "vflip:1")):
        base, other = detected["frcnn-orig"], detected[run]
        assert changes[label] == {"model": "frcnn", "perturbation": label, "n_objects": len(base),
                                  "detected_baseline": sum(base.values()), "detected": sum(other.values()),
                                  "lost": sum(base[o] and not other[o] for o in base),
                                  "gained": sum(other[o] and not base[o] for o in base)}


def test_objects_pair_by_source_annotation_id(tmp_path):
    """A variant whose annotations are renumbered pairs its objects through ``source_ann_id``; a pairing that mixes
    classes or repeats an object is refused."""
    gt = {"images": [{"id": 1, "width": 100, "height": 100}], "categories": [{"id": 1}, {"id": 2}],
          "annotations": [{"id": 5, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100},
                          {"id": 6, "image_id": 1, "category_id": 2, "bbox": [50, 50, 10, 10], "area": 100}]}
    hit = [{"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9}]
    orig = make_store(tmp_path / "a", gt, {"m": (hit, {"perturbation": "orig"})})
    renumbered = dict(gt, annotations=[dict(a, id=a["id"] + 100, source_ann_id=a["id"]) for a in gt["annotations"]])
    miss = [{"image_id": 1, "category_id": 2, "bbox": [50, 50, 10, 10], "score": 0.9}]
    other = make_store(tmp_path / "b", renumbered, {"m": (miss, {"perturbation": "white_bg"})})
    result = invariance([orig, other])
    assert result.object_changes("orig").rows() == [("m", "white_bg", 2, 1, 1, 1, 1)]
    assert result.objects().select("run", "object_id", "gt_id").rows() == [("m", 5, 5), ("m", 6, 6),
                                                                           ("m", 5, 105), ("m", 6, 106)]
    swapped = dict(gt, annotations=[dict(a, id=a["id"] + 100, source_ann_id=11 - a["id"]) for a in gt["annotations"]])
    clash = make_store(tmp_path / "c", swapped, {"m": (miss, {"perturbation": "noise_bg"})})
    with pytest.raises(InputError, match="^object 5 has different categories in .*a/store, .*c/store: their ground "
                                         "truths do not pair \\(give the variants a 'source_ann_id' column\\)$"):
        invariance([orig, clash]).objects()
    twice = dict(gt, annotations=[dict(a, id=a["id"] + 100, source_ann_id=5) for a in gt["annotations"]])
    repeated = make_store(tmp_path / "d", twice, {"m": (miss, {"perturbation": "crop"})})
    with pytest.raises(InputError, match="d/store: object 5 \\(source_ann_id\\) is more than one annotation"):
        invariance(repeated).objects()


def test_perturbed_proposal_runs_are_measured_by_repeatability(tmp_path):
    """The repeatability machinery's runs carry their kind, level and reference as tags, and enter the table as
    their repeatability against the reference run (model: the reference), equal to Store.repeatability."""
    write_proposals_near_objects(tmp_path)
    store = ingest_gt(tmp_path / "gt.json", tmp_path / "store")
    store = store.add_proposals(tmp_path / "props.json", run="props")
    store = store.add_perturbed_proposals(tmp_path / "props.json", "light", kind="light", reference="props")
    store = store.add_perturbed_proposals(tmp_path / "props.json", "scaled", kind="scale", level=0.5,
                                          reference="props")
    tags = store.sql("SELECT run, key, value FROM run_tags ORDER BY run, key").rows()
    assert tags == [("light", "perturbation", "light"), ("light", "reference", "props"), ("scaled", "level", "0.5"),
                    ("scaled", "perturbation", "scale"), ("scaled", "reference", "props")]
    with pytest.warns(InputWarning, match="store:props$"):
        table = invariance(store).metrics()
    want = store.repeatability(["light", "scaled"], reference="props")
    assert table.select("model", "perturbation", "level", "run", "metric", "size", "category_id").rows() == [
        ("props", "light", None, "light", "repeatability", "all", None),
        ("props", "scale", "0.5", "scaled", "repeatability", "all", None)]
    assert table.get_column("value").to_list() == want.get_column("repeatability").to_list()


def test_located_errors(tmp_path):
    gt, _ = random_coco(4)
    dets = detections(gt, np.random.default_rng(0))
    store = make_store(tmp_path / "s", gt, {"a": (dets, {"model": "m1", "perturbation": "blur"}),
                                            "b": (dets, {"model": "m2", "perturbation": "orig"}),
                                            "c": (dets, {})})
    bare = make_store(tmp_path / "bare", gt, {"x": (dets, {"model": "m1"})})
    with pytest.raises(InputError, match=f"^{bare.path}: no run has a 'perturbation' tag \\(runs: {bare.path}:x\\); "
                                         "tag them: evalengine add-run STORE --run R --dt FILE --tag perturbation=NAME "
                                         "--tag model=NAME$"):
        invariance(bare)
    with pytest.warns(InputWarning):
        with pytest.raises(InputError, match="^perturbation 'fog' is not a tag of any run \\(known: blur, orig\\)$"):
            invariance(store, perturbations=["fog"])
        with pytest.raises(InputError, match="^model 'm3' is not a tag of any run \\(known: m1, m2\\)$"):
            invariance(store, models=["m3"])
        with pytest.raises(InputError, match=f"^runs {store.path}:a and {store.path}:a are both model 'm1' under "
                                             "perturbation 'blur'; tag one of them otherwise$"):
            invariance([store, store.path])
        with pytest.raises(InputError, match="^baseline perturbation 'fog' is not a tag of any detection run "
                                             "\\(known: blur, orig\\)$"):
            invariance(store).object_changes("fog")
    for tags, message in (({"a b": "x"}, "tag name 'a b' is not allowed"),
                          ({"model": "two\nlines"}, "tag model: the value 'two\\\\nlines' is not allowed"),
                          ({"model": ""}, "tag model: the value '' is not allowed")):
        with pytest.raises(InputError, match=f"^{message}"):
            store.add_run(tmp_path / "s" / "a.json", "d", tags=tags)
    assert "d" not in store.layout.runs
