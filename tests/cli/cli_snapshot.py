"""Snapshots of the ``evalengine`` command's output: every subcommand in a fixed list of invocations.

Each invocation runs in-process (``evalengine.cli.main``) with stdout and stderr captured (one-line warnings
included) and is recorded as one text file: the argv, the exit code, stdout, stderr and a description of any
file it writes (a Parquet file by its schema and a digest of its rows, a figure only by being non-empty).
What legitimately varies between runs is normalised: the temporary folder (``<TMP>``), the bundled data
folder (``<DATA>``), the generated data folder (``<GEN>``), the demo's elapsed time and ``--profile`` timings.

Two datasets:

- ``sample``: the bundled COCO sample (``evalengine/data``: 100 val2014 images, the official fake results);
  its snapshots are the golden files of ``tests/data/cli_snapshot/`` (checked by ``test_cli_snapshot.py``);
- ``gen5k``: 5000 generated images with 100 detections each (``benchmarks/generate.py``, seed 0); the
  detections double as proposals. A shorter list, every command at least once.

    python tests/cli/cli_snapshot.py --dataset sample --out tests/data/cli_snapshot
    python tests/cli/cli_snapshot.py --dataset gen5k --gen-dir /tmp/gen5k --out /tmp/snap-gen5k
    python tests/cli/cli_snapshot.py --dataset all --out /tmp/snap        # /tmp/snap/sample, /tmp/snap/gen5k

Invocations run in order and later ones use the stores earlier ones wrote. The script imports whichever
``evalengine`` the interpreter finds (it prints ``evalengine.__file__``).
"""

import argparse
import contextlib
import csv
import hashlib
import importlib.util
import io
import json
import os
import re
import shlex
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

DATASETS = ("sample", "gen5k")
REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "benchmarks" / "generate.py"
GEN5K = dict(n_images=5000, n_classes=80, gt_per_image=7.3, dets_per_image=100, seed=0)
COLUMNS = "100"  # argparse wraps its usage text to the terminal width: fixed here


@dataclass(frozen=True)
class Invocation:
    """One command line; ``{gt}``, ``{dt}``, ``{tmp}``, … are filled in from the session's paths."""

    id: str
    argv: tuple
    files: tuple = ()  # files the command writes, described in the snapshot
    datasets: tuple = ("sample",)  # where it runs

    def expand(self, paths: dict) -> list:
        return [part.format(**paths) for part in self.argv]


def _inv(id, *argv, files=(), gen5k=False, sample=True) -> Invocation:
    """An invocation of the sample list, and of the (shorter) gen5k list if ``gen5k``."""
    return Invocation(id, tuple(argv), tuple(files), ("sample",) * sample + ("gen5k",) * gen5k)


S, P, T = "{tmp}/store", "{tmp}/proposal-store", "{tmp}/tagged-store"
QUERY = {
    "coco-summary": "SELECT run, metric, round(value, 6) AS value FROM coco_summary WHERE protocol = 'coco' "
                    "ORDER BY run, metric",
    "ap": "SELECT run, area_range, max_dets, count(*) AS n, round(avg(ap) FILTER (WHERE ap > -1), 6) AS ap, "
          "round(avg(recall) FILTER (WHERE recall > -1), 6) AS recall FROM ap WHERE protocol = 'coco' "
          "GROUP BY ALL ORDER BY ALL",
    "image-counts": "SELECT protocol, run, iou_threshold, sum(tp) AS tp, sum(fp) AS fp, sum(fn) AS fn, "
                    "sum(n_gt) AS n_gt, sum(ignored_dt) AS ignored_dt, count(*) AS n_images "
                    "FROM image_counts GROUP BY ALL ORDER BY ALL",
    "detection-outcomes": "SELECT run, iou_threshold, outcome, count(*) AS n, round(sum(score), 3) AS score, "
                          "round(avg(matched_iou), 6) AS mean_iou FROM detection_outcomes "
                          "WHERE protocol = 'coco' AND iou_threshold IN (0.5, 0.75, 0.95) GROUP BY ALL ORDER BY ALL",
    "outcomes-by-weather": "SELECT weather, outcome, count(*) AS n FROM detection_outcomes "
                           "WHERE protocol = 'coco' AND run = 'default' AND iou_threshold = 0.5 "
                           "GROUP BY ALL ORDER BY ALL",
    "pr-curve": "SELECT run, area_range, iou_threshold, count(*) AS points, max(tp) AS tp, max(fp) AS fp, "
                "round(max(recall), 6) AS recall, round(min(precision), 6) AS min_precision FROM pr_curve "
                "WHERE protocol = 'coco' AND max_dets = 100 AND iou_threshold IN (0.5, 0.75) "
                "GROUP BY ALL ORDER BY ALL",
    "protocols": "SELECT protocol, run, name, iou_thresholds, area_ranges, max_det_cap, use_cats, zero_id_quirk, "
                 "max_dets, len(recall_thresholds) AS n_recall_thresholds FROM protocols ORDER BY protocol, run",
    "run-comparison": "SELECT run_a, run_b, area_range, count(*) AS n, round(avg(ap_difference), 6) AS mean_diff "
                      "FROM run_comparison GROUP BY ALL ORDER BY ALL",
    "images": "SELECT weather, camera, count(*) AS n, min(width) AS min_w, max(height) AS max_h "
              "FROM images GROUP BY ALL ORDER BY ALL",
    "worst-classes": "SELECT c.name, round(a.ap, 6) AS ap FROM ap_by_run AS a JOIN categories AS c USING "
                     "(category_id) WHERE a.run = 'default' AND a.area_range = 'all' ORDER BY a.ap, c.name LIMIT 8",
    "proposal-recall": "SELECT protocol, run, budget, round(mean_proposals, 6) AS mean_proposals, n_gt, "
                       "round(ar, 6) AS ar, round(recall_50, 6) AS r50, round(recall_70, 6) AS r70, "
                       "round(recall_90, 6) AS r90, round(abo, 6) AS abo FROM proposal_recall ORDER BY ALL",
    "repeatability": "SELECT protocol, run, round(repeatability, 6) AS repeatability, n_evaluated, n_bins "
                     "FROM repeatability ORDER BY ALL",
    "analyze-summary": "SELECT run, scope, supercategory, curve, round(ap, 6) AS ap FROM analyze_summary "
                       "WHERE area_range = 'all' AND (scope = 'overall' OR supercategory = 'animal') ORDER BY ALL",
    "proposal-ranks": "SELECT run, count(*) AS n, count(rank) AS ranked, max(rank) AS max_rank "
                      "FROM proposals GROUP BY ALL ORDER BY ALL",
}


def invocations(dataset: str) -> list:
    """The invocations of ``dataset``, in running order. On gen5k the costly SQL views (ap, coco_summary,
    pr_curve) are queried over the one-run store of ``coco --store``, and OMA and a second sliding-window run are
    left out: the list takes a few minutes."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    G = ("--gt", "{gt}")
    GD = ("--gt", "{gt}", "--dt", "{dt}")
    area_ranges = ("all:0:1e10", "small:0:2048", "medium:2048:9216", "large:9216:1e10")
    every = [
        # coco: the pycocotools summary straight from files
        _inv("coco", "coco", *GD, gen5k=True),
        _inv("coco-json", "coco", *GD, "--json", gen5k=True),
        _inv("coco-use-cats-0-max-dets", "coco", *GD, "--use-cats", "0", "--max-dets", "1", "10", "1000", gen5k=True),
        _inv("coco-iou-thresholds", "coco", *GD, "--iou-thresholds", "0.5", "0.6", "0.75"),
        _inv("coco-area-ranges", "coco", *GD, "--area-ranges", *area_ranges),
        _inv("coco-zero-id-quirk-0", "coco", *GD, "--keep-zero-id-quirk", "0", "--json"),
        _inv("coco-store", "coco", *GD, "--store", "{tmp}/coco-store", gen5k=True),
        _inv("coco-store-json-sync-shards", "coco", *GD, "--store", "{tmp}/coco-store-json", "--shards", "3",
             "--scheduler", "sync", "--json"),
        # ingest, evaluate, add-run, compare
        _inv("ingest", "ingest", "coco", *GD, "--store", S, "--shards", "3", "--image-metadata", "{tmp}/meta.csv",
             gen5k=True),
        _inv("ingest-again-error", "ingest", "coco", *GD, "--store", S),
        _inv("ingest-overwrite", "ingest", "coco", *GD, "--store", S, "--shards", "3", "--image-metadata",
             "{tmp}/meta.csv", "--overwrite"),
        _inv("ingest-plain", "ingest", "coco", *GD, "--store", "{tmp}/plain-store", "--run", "model"),
        _inv("ingest-metadata-duplicate-error", "ingest", "coco", *GD, "--store", "{tmp}/bad-store",
             "--image-metadata", "{tmp}/meta-duplicate.csv"),
        _inv("ingest-metadata-clash-error", "ingest", "coco", *GD, "--store", "{tmp}/bad-store",
             "--image-metadata", "{tmp}/meta-clash.csv"),
        _inv("evaluate", "evaluate", S, gen5k=True),
        _inv("evaluate-json", "evaluate", S, "--json", gen5k=True),
        _inv("evaluate-plain-run", "evaluate", "{tmp}/plain-store", "--run", "model", "--json"),
        _inv("add-run", "add-run", S, "--run", "shifted", "--dt", "{tmp}/dt-shifted.json", gen5k=True),
        _inv("add-run-again-error", "add-run", S, "--run", "shifted", "--dt", "{tmp}/dt-shifted.json"),
        _inv("add-run-overwrite", "add-run", S, "--run", "shifted", "--dt", "{tmp}/dt-shifted.json", "--overwrite"),
        _inv("evaluate-run", "evaluate", S, "--run", "shifted", gen5k=True),
        _inv("evaluate-run-use-cats-0", "evaluate", S, "--run", "shifted", "--use-cats", "0", "--max-dets", "1", "10",
             "100", "--json"),
        _inv("evaluate-iou-area", "evaluate", S, "--iou-thresholds", "0.5", "0.75", "--area-ranges", *area_ranges),
        _inv("compare", "compare", S, "default", "shifted"),
        _inv("compare-json", "compare", S, "default", "shifted", "--json"),
        _inv("compare-area-range", "compare", S, "default", "shifted", "--area-range", "large", gen5k=True),
        _inv("compare-area-range-json", "compare", S, "default", "shifted", "--area-range", "small", "--json",
             gen5k=True),
        # report: slices by image metadata and categories
        _inv("report-where-width", "report", S, "--where", "width > 500", gen5k=True),
        _inv("report-where-metadata-json", "report", S, "--where", "weather = 'rain' AND height >= 400", "--json"),
        _inv("report-categories", "report", S, "--categories", "1", "3", "18", gen5k=True),
        _inv("report-run-categories-json", "report", S, "--run", "shifted", "--categories", "1", "62", "--where",
             "camera <> 'cam0'", "--json"),
        _inv("report-use-cats-0", "report", S, "--where", "weather = 'fog'", "--use-cats", "0"),
        _inv("report-bad-where-error", "report", S, "--where", "no_such_column > 1"),
        # sql over the views
        _inv("sql-coco-summary", "sql", S, "SELECT * FROM coco_summary"),
        _inv("sql-coco-summary-one-run", "sql", "{tmp}/coco-store", "SELECT * FROM coco_summary", gen5k=True),
        _inv("sql-coco-summary-csv", "sql", S, QUERY["coco-summary"], "--format", "csv"),
        _inv("sql-ap-json", "sql", S, QUERY["ap"], "--format", "json"),
        _inv("sql-ap", "sql", S, QUERY["ap"]),
        _inv("sql-image-counts", "sql", S, QUERY["image-counts"], gen5k=True),
        _inv("sql-detection-outcomes-csv", "sql", S, QUERY["detection-outcomes"], "--format", "csv", gen5k=True),
        _inv("sql-outcomes-by-weather", "sql", S, QUERY["outcomes-by-weather"]),
        _inv("sql-pr-curve", "sql", "{tmp}/coco-store", QUERY["pr-curve"], gen5k=True),
        _inv("sql-protocols", "sql", S, QUERY["protocols"], gen5k=True),
        _inv("sql-run-comparison-json", "sql", S, QUERY["run-comparison"], "--format", "json"),
        _inv("sql-images-metadata", "sql", S, QUERY["images"]),
        _inv("sql-worst-classes", "sql", S, QUERY["worst-classes"]),
        _inv("sql-file", "sql", S, "--file", "{tmp}/query.sql"),
        _inv("sql-out-csv", "sql", S, QUERY["coco-summary"], "--format", "csv", "--out", "{tmp}/summary.csv",
             files=("{tmp}/summary.csv",)),
        _inv("sql-out-table", "sql", S, QUERY["coco-summary"], "--out", "{tmp}/summary.txt",
             files=("{tmp}/summary.txt",)),
        _inv("sql-out-parquet", "sql", S, QUERY["ap"], "--format", "parquet", "--out", "{tmp}/ap.parquet",
             files=("{tmp}/ap.parquet",)),
        _inv("sql-parquet-without-out-error", "sql", S, "SELECT 1", "--format", "parquet"),
        _inv("sql-no-query-error", "sql", S),
        _inv("sql-query-and-file-error", "sql", S, "SELECT 1", "--file", "{tmp}/query.sql"),
        _inv("sql-missing-file-error", "sql", S, "--file", "{tmp}/missing.sql"),
        _inv("sql-unknown-view-error", "sql", S, "SELECT * FROM no_such_view"),
        _inv("sql-before-evaluate-error", "sql", "{tmp}/coco-store", "SELECT count(*) FROM proposal_recall"),
        # proposals: Hosang et al.'s recall and AR, best overlap, the coco protocol
        _inv("proposals", "proposals", *G, "--proposals", "{props}", gen5k=True),
        _inv("proposals-best-overlap", "proposals", *G, "--proposals", "{props}", "--protocol", "best-overlap",
             gen5k=True),
        _inv("proposals-coco", "proposals", *G, "--proposals", "{props}", "--protocol", "coco", "--budgets", "1",
             "10", "100", gen5k=True),
        _inv("proposals-aggregation-images", "proposals", *G, "--proposals", "{props}", "--aggregation", "images",
             "--iou", "0.5", "0.7", "0.9"),
        _inv("proposals-oma", "proposals", *G, "--proposals", "{props}", "--oma", "--budgets", "1", "10", "100"),
        _inv("proposals-oma-wang-lattice", "proposals", *G, "--proposals", "{props}", "--oma", "--lattice", "wang",
             "--budgets", "10", "100", "--aggregation", "images"),
        _inv("proposals-json", "proposals", *G, "--proposals", "{props}", "--json", gen5k=True),
        _inv("proposals-ordering-random", "proposals", *G, "--proposals", "{props}", "--ordering", "random", "--seed",
             "7", "--no-dedup", "--budgets", "1", "10", "100"),
        _inv("proposals-keep-crowd-pixel", "proposals", *G, "--proposals", "{props}", "--keep-crowd",
             "--box-convention", "pixel-inclusive", "--budgets", "10", "100"),
        _inv("proposals-store", "proposals", *G, "--proposals", "{props}", "--store", P, "--budgets", "1", "10",
             "100", "1000", gen5k=True),
        _inv("proposals-store-coco-json", "proposals", "--store", P, "--protocol", "coco", "--budgets", "1", "10",
             "100", "--json", gen5k=True),
        _inv("proposals-store-hosang", "proposals", "--store", P, "--budgets", "10", "100", gen5k=True),
        _inv("proposals-coco-two-budgets-error", "proposals", "--store", P, "--protocol", "coco", "--budgets", "1",
             "100"),
        _inv("proposals-gt-only-error", "proposals", *G),
        _inv("proposals-nothing-error", "proposals"),
        _inv("proposals-bad-run-error", "proposals", "--store", P, "--run", "nope"),
        # add-proposals and repeatability
        _inv("add-proposals", "add-proposals", P, "--run", "plain", "--proposals", "{props}", gen5k=True),
        _inv("add-proposals-flip", "add-proposals", P, "--run", "flipped", "--proposals", "{tmp}/flipped.csv",
             "--perturbation", "flip", "--reference", "proposals", gen5k=True),
        _inv("add-proposals-scale", "add-proposals", P, "--run", "scaled", "--proposals", "{tmp}/scaled.csv",
             "--perturbation", "scale:1.1", "--reference", "proposals", gen5k=True),
        _inv("add-proposals-ordering-given", "add-proposals", P, "--run", "given", "--proposals", "{tmp}/flipped.csv",
             "--ordering", "given", "--no-dedup"),
        _inv("add-proposals-exists-error", "add-proposals", P, "--run", "plain", "--proposals", "{props}"),
        _inv("add-proposals-bad-reference-error", "add-proposals", P, "--run", "flip2", "--proposals",
             "{tmp}/flipped.csv", "--perturbation", "flip", "--reference", "nope"),
        _inv("add-proposals-bad-perturbation-error", "add-proposals", P, "--run", "x", "--proposals", "{props}",
             "--perturbation", "scale:big"),
        _inv("add-proposals-scale-without-level-error", "add-proposals", P, "--run", "x", "--proposals", "{props}",
             "--perturbation", "scale"),
        _inv("repeatability", "repeatability", P, "--runs", "flipped", "scaled", gen5k=True),
        _inv("repeatability-json", "repeatability", P, "--runs", "flipped", "scaled", "--json", gen5k=True),
        _inv("repeatability-trapezoid", "repeatability", P, "--runs", "flipped", "scaled", "--method", "trapezoid"),
        _inv("repeatability-empty-bins-zero", "repeatability", P, "--runs", "scaled", "--empty-bins", "zero",
             "--top-n", "100", "--json"),
        _inv("repeatability-touching-gt", "repeatability", P, "--runs", "flipped", "--touching-gt"),
        _inv("repeatability-not-perturbed-error", "repeatability", P, "--runs", "plain"),
        _inv("repeatability-bad-run-error", "repeatability", P, "--runs", "nope"),
        _inv("sql-proposal-recall", "sql", P, QUERY["proposal-recall"], gen5k=True),
        _inv("sql-repeatability", "sql", P, QUERY["repeatability"], gen5k=True),
        _inv("sql-proposal-ranks-csv", "sql", P, QUERY["proposal-ranks"], "--format", "csv"),
        # baseline proposals
        _inv("baseline-uniform-out", "baseline", *G, "--kind", "uniform", "--per-image", "50", "--out",
             "{tmp}/uniform.parquet", files=("{tmp}/uniform.parquet",), gen5k=True),
        _inv("baseline-gaussian-out", "baseline", *G, "--kind", "gaussian", "--per-image", "20", "--seed", "3",
             "--out", "{tmp}/gaussian.parquet", files=("{tmp}/gaussian.parquet",)),
        _inv("baseline-sliding-window-out", "baseline", *G, "--kind", "sliding-window", "--per-image", "30", "--out",
             "{tmp}/sw.parquet", files=("{tmp}/sw.parquet",), gen5k=True),
        _inv("baseline-uniform-store", "baseline", *G, "--kind", "uniform", "--per-image", "50", "--store", P,
             gen5k=True),
        _inv("baseline-gaussian-store", "baseline", *G, "--kind", "gaussian", "--per-image", "50", "--store", P,
             "--run", "gauss", gen5k=True),
        _inv("baseline-sliding-window-store", "baseline", *G, "--kind", "sliding-window", "--per-image", "50",
             "--store", P),
        _inv("baseline-store-exists-error", "baseline", *G, "--kind", "uniform", "--per-image", "50", "--store", P),
        _inv("baseline-store-overwrite-seed", "baseline", *G, "--kind", "uniform", "--per-image", "50", "--store", P,
             "--seed", "5", "--overwrite"),
        _inv("baseline-params", "baseline", *G, "--kind", "gaussian", "--per-image", "10", "--params",
             "{tmp}/gaussian-params.json", "--out", "{tmp}/gaussian-params.parquet",
             files=("{tmp}/gaussian-params.parquet",)),
        _inv("baseline-no-target-error", "baseline", *G, "--kind", "uniform"),
        _inv("proposals-store-baselines", "proposals", "--store", P, "--run", "gauss", "--budgets", "1", "10", "50",
             gen5k=True),
        _inv("proposals-store-sliding-window-coco", "proposals", "--store", P, "--run", "sliding-window",
             "--protocol", "coco", "--budgets", "1", "10", "50"),
        # demo
        _inv("demo", "demo", "--store", "{tmp}/demo", gen5k=True),
        _inv("demo-again", "demo", "--store", "{tmp}/demo"),
        # plot: the message and exit code; the figure only as non-empty
        _inv("plot-pr", "plot", S, "pr", "--out", "{tmp}/pr.png", files=("{tmp}/pr.png",), gen5k=True),
        _inv("plot-pr-categories", "plot", S, "pr", "--out", "{tmp}/pr-cats.png", "--categories", "1", "3", "--iou",
             "0.75", files=("{tmp}/pr-cats.png",)),
        _inv("plot-recall-iou", "plot", S, "recall-iou", "--out", "{tmp}/recall-iou.png", "--runs", "default",
             "shifted", files=("{tmp}/recall-iou.png",)),
        _inv("plot-ap-by-size", "plot", S, "ap-by-size", "--out", "{tmp}/ap-by-size.svg",
             files=("{tmp}/ap-by-size.svg",)),
        _inv("plot-compare", "plot", S, "compare", "--out", "{tmp}/compare.png", "--runs", "default", "shifted",
             files=("{tmp}/compare.png",), gen5k=True),
        _inv("plot-compare-one-run-error", "plot", S, "compare", "--out", "{tmp}/compare1.png"),
        _inv("plot-proposal-recall-iou", "plot", P, "proposal-recall-iou", "--out", "{tmp}/prop-recall.png",
             "--runs", "proposals", "gauss", "--budget", "10", files=("{tmp}/prop-recall.png",), gen5k=True),
        _inv("plot-ar-budget", "plot", P, "ar-budget", "--out", "{tmp}/ar-budget.pdf",
             files=("{tmp}/ar-budget.pdf",)),
        _inv("plot-bad-run-error", "plot", S, "pr", "--out", "{tmp}/bad.png", "--runs", "nope"),
        # analyze (MATLAB CocoEval.analyze)
        _inv("analyze", "analyze", *GD),
        _inv("analyze-store-run-json", "analyze", S, "--run", "shifted", "--json"),
        _inv("sql-analyze-summary", "sql", S, QUERY["analyze-summary"]),
        _inv("plot-analyze-supercategory", "plot", S, "analyze", "--supercategory", "animal", "--out",
             "{tmp}/analyze.png", files=("{tmp}/analyze.png",)),
        # Borji & Iranmanesh's error diagnosis
        _inv("diagnose", "diagnose", *GD),
        _inv("diagnose-store-paper-json", "diagnose", S, "--variant", "paper", "--json"),
        _inv("diagnose-gt-major-run", "diagnose", S, "--run", "shifted", "--duplicates", "gt_major"),
        _inv("diagnose-thresholds-error", "diagnose", *GD, "--background-threshold", "0.7"),
        _inv("plot-borji", "plot", S, "borji", "--out", "{tmp}/borji.png", files=("{tmp}/borji.png",)),
        # warnings: one line each on stderr, every time
        _inv("warning-gt-id-0-no-area", "coco", "--gt", "{tmp}/gt-warn.json", "--dt", "{dt}"),
        _inv("warning-gt-id-0-no-area-again", "coco", "--gt", "{tmp}/gt-warn.json", "--dt", "{dt}",
             "--keep-zero-id-quirk", "0", "--json"),
        _inv("warning-unknown-category", "coco", *GD[:2], "--dt", "{tmp}/dt-unknown-category.json", gen5k=True),
        _inv("warning-unknown-category-add-run", "add-run", S, "--run", "stray", "--dt",
             "{tmp}/dt-unknown-category.json"),
        # bad input: one line on stderr, exit 2 (argparse: usage and exit 2)
        _inv("error-missing-gt", "coco", "--gt", "{tmp}/missing.json", "--dt", "{dt}", gen5k=True),
        _inv("error-missing-dt", "coco", *G, "--dt", "{tmp}/missing.json"),
        _inv("error-empty-dt", "coco", *G, "--dt", "{tmp}/empty.json"),
        _inv("error-not-json-dt", "coco", *G, "--dt", "{tmp}/broken.json"),
        _inv("error-bad-run", "evaluate", S, "--run", "nope", gen5k=True),
        _inv("error-unknown-store", "evaluate", "{tmp}/no-such-store", gen5k=True),
        _inv("error-unknown-store-sql", "sql", "{tmp}/no-such-store", "SELECT 1"),
        _inv("error-unknown-store-add-run", "add-run", "{tmp}/no-such-store", "--run", "x", "--dt", "{dt}"),
        _inv("error-compare-bad-run", "compare", S, "default", "nope"),
        _inv("error-report-bad-run", "report", S, "--run", "nope"),
        _inv("error-add-run-missing-dt", "add-run", S, "--run", "x", "--dt", "{tmp}/missing.json"),
        _inv("error-proposals-missing-file", "proposals", *G, "--proposals", "{tmp}/missing.csv"),
        _inv("error-baseline-missing-gt", "baseline", "--gt", "{tmp}/missing.json", "--kind", "uniform", "--out",
             "{tmp}/x.parquet"),
        _inv("error-argparse-bad-choice", "coco", *GD, "--use-cats", "2"),
        _inv("error-argparse-bad-area-range", "coco", *GD, "--area-ranges", "small"),
        _inv("error-argparse-missing-option", "coco", *G),
        _inv("error-argparse-no-command"),
        # TIDE, confusion matrices, the upper bound, run tags and invariance (last: they add runs and a store)
        _inv("tide", "tide", *GD),
        _inv("tide-store-coco-mode-json", "tide", S, "--mode", "coco", "--json"),
        _inv("tide-run-thresholds", "tide", S, "--run", "shifted", "--pos-threshold", "0.6",
             "--background-threshold", "0.2", "--max-dets", "50"),
        _inv("plot-tide", "plot", S, "tide", "--out", "{tmp}/tide.png", files=("{tmp}/tide.png",)),
        _inv("confusion", "confusion", *GD),
        _inv("confusion-store-normalize-json", "confusion", S, "--iou", "0.75", "--score", "0.3", "--normalize",
             "--json"),
        _inv("confusion-run-lrp-thresholds", "confusion", S, "--run", "shifted", "--thresholds", "lrp"),
        _inv("confusion-score-and-thresholds-error", "confusion", S, "--score", "0.3", "--thresholds", "f1"),
        _inv("plot-confusion", "plot", S, "confusion", "--out", "{tmp}/confusion.png", files=("{tmp}/confusion.png",)),
        _inv("upper-bound", "upper-bound", S, "--classifier", "{tmp}/classifier.csv"),
        _inv("upper-bound-unit-score-per-class-json", "upper-bound", S, "--classifier", "{tmp}/classifier.csv",
             "--run", "uap-unit", "--unit-score", "--json"),
        _inv("upper-bound-exists-error", "upper-bound", S, "--classifier", "{tmp}/classifier.csv"),
        _inv("upper-bound-missing-rows-error", "upper-bound", S, "--classifier", "{tmp}/classifier-missing.csv",
             "--run", "uap-missing"),
        _inv("ingest-tags", "ingest", "coco", *GD, "--store", T, "--run", "orig", "--tag", "model=fake",
             "--tag", "perturbation=none"),
        _inv("add-run-tags", "add-run", T, "--run", "shift", "--dt", "{tmp}/dt-shifted.json", "--tag", "model=fake",
             "--tag", "perturbation=shift", "--tag", "level=2"),
        _inv("add-run-untagged", "add-run", T, "--run", "plain", "--dt", "{dt}"),
        _inv("add-run-bad-tag-error", "add-run", T, "--run", "x", "--dt", "{dt}", "--tag", "perturbation"),
        _inv("sql-run-tags", "sql", T, "SELECT * FROM run_tags ORDER BY ALL"),
        _inv("invariance", "invariance", T),
        _inv("invariance-baseline", "invariance", T, "--baseline", "none"),
        _inv("invariance-category", "invariance", T, "--category", "1", "--perturbation", "shift"),
        _inv("invariance-unknown-perturbation-error", "invariance", T, "--perturbation", "fog"),
        _inv("add-proposals-tag", "add-proposals", P, "--run", "tagged", "--proposals", "{tmp}/scaled.csv",
             "--perturbation", "scale:1.1", "--reference", "proposals", "--tag", "model=fake"),
        _inv("add-proposals-perturbation-tag-error", "add-proposals", P, "--run", "x", "--proposals", "{props}",
             "--tag", "perturbation=blur"),
        # segmentation (partition measures, SEISM) on small generated label maps (write_segmentation_files)
        _inv("segmentation", "segmentation", "--pred", "{tmp}/seg/pred", "--gt", "{tmp}/seg/gt"),
        _inv("segmentation-json-fb-contour", "segmentation", "--pred", "{tmp}/seg/pred", "--gt", "{tmp}/seg/gt",
             "--measures", "fop", "fr", "fb", "sc", "--fb-grid", "contour", "--fb-outliers", "complete", "--json"),
        _inv("segmentation-void-label", "segmentation", "--pred", "{tmp}/seg/pred", "--gt", "{tmp}/seg/gt",
             "--void-label", "0", "--measures", "pri", "voi", "bgm", "--json"),
        _inv("ingest-partitions", "ingest", "partitions", "--gt", "{tmp}/seg/gt", "--pred", "human={tmp}/seg/pred",
             "sweep={tmp}/seg/sweep", "--store", "{tmp}/part-store", "--shards", "2", "--quadtree"),
        _inv("evaluate-partitions-sweep", "evaluate", "{tmp}/part-store", "--protocol", "partitions", "--run", "sweep",
             "--measures", "fop", "fr", "pri", "sc"),
        _inv("sql-partition-dataset-measures", "sql", "{tmp}/part-store",
             "SELECT run, parameter, round(sc, 6) AS sc, round(pri, 6) AS pri, round(fr, 6) AS fr, "
             "round(fop, 6) AS fop "
             "FROM dataset_measures ORDER BY ALL"),
        _inv("segmentation-size-error", "segmentation", "--pred", "{tmp}/seg/pred-size", "--gt", "{tmp}/seg/gt"),
        _inv("segmentation-alpha-error", "segmentation", "--pred", "{tmp}/seg/pred-alpha", "--gt", "{tmp}/seg/gt"),
        _inv("segmentation-void-differs-error", "segmentation", "--pred", "{tmp}/seg/pred", "--gt",
             "{tmp}/seg/gt-void", "--void-label", "0"),
        _inv("segmentation-unknown-measure-error", "segmentation", "--pred", "{tmp}/seg/pred", "--gt", "{tmp}/seg/gt",
             "--measures", "fbt"),
    ]
    return [inv for inv in every if dataset in inv.datasets]


# -- input files ---------------------------------------------------------------------------------------------


def bundled_data() -> Path:
    from importlib import resources

    return Path(str(resources.files("evalengine.data")))


def generate_gen5k(folder: Path) -> None:
    """``folder/gt.json`` and ``folder/dt.json`` from benchmarks/generate.py (kept if already there)."""
    folder = Path(folder)
    if (folder / "gt.json").is_file() and (folder / "dt.json").is_file():
        return
    spec = importlib.util.spec_from_file_location("_evalengine_generate", GENERATOR)
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    tables = generate.generate(GEN5K["n_images"], GEN5K["n_classes"], GEN5K["gt_per_image"],
                               GEN5K["dets_per_image"], GEN5K["seed"])
    generate.write(folder, *tables)


def write_helper_files(gt_path: Path, dt_path: Path, tmp: Path) -> None:
    """Inputs derived from the dataset (plain json/csv, the same whatever evalengine does): a second detection
    run, image metadata, flipped and scaled proposals, a classifier table, a query file, broken inputs."""
    gt = json.loads(Path(gt_path).read_text())
    dt = json.loads(Path(dt_path).read_text())
    sizes = {image["id"]: (image["width"], image["height"]) for image in gt["images"]}
    image_ids = sorted(sizes)

    # a second run: every box 2 px to the right, every 7th detection dropped, scores lowered a little
    shifted = [dict(d, bbox=[round(d["bbox"][0] + 2.0, 2), *d["bbox"][1:]], score=round(d["score"] * 0.9, 4))
               for i, d in enumerate(dt) if i % 7 != 3]
    (tmp / "dt-shifted.json").write_text(json.dumps(shifted))

    weathers, cameras = ("sun", "rain", "fog"), ("cam0", "cam1", "cam2", "cam3")
    with open(tmp / "meta.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["image_id", "weather", "camera"])
        for image_id in image_ids:
            out.writerow([image_id, weathers[image_id % 3], cameras[(image_id // 3) % 4]])
    with open(tmp / "meta-duplicate.csv", "w", newline="") as handle:
        handle.write(f"image_id,weather\n{image_ids[0]},sun\n{image_ids[1]},rain\n{image_ids[0]},fog\n")
    with open(tmp / "meta-clash.csv", "w", newline="") as handle:
        handle.write(f"image_id,width\n{image_ids[0]},1\n")

    # proposals of perturbed images: the detections mirrored (continuous x' = W - x), scaled by 1.1
    with open(tmp / "flipped.csv", "w", newline="") as flipped, open(tmp / "scaled.csv", "w", newline="") as scaled:
        out_f, out_s = csv.writer(flipped), csv.writer(scaled)
        out_f.writerow(["image_id", "x1", "y1", "x2", "y2", "score"])
        out_s.writerow(["image_id", "x1", "y1", "x2", "y2", "score"])
        for d in dt:
            x, y, w, h = d["bbox"]
            width = sizes[d["image_id"]][0]
            out_f.writerow([d["image_id"], round(width - x - w, 2), y, round(width - x, 2), round(y + h, 2), d["score"]])
            out_s.writerow([d["image_id"], round(1.1 * x, 2), round(1.1 * y, 2), round(1.1 * (x + w), 2),
                            round(1.1 * (y + h), 2), d["score"]])

    # inputs that warn: ground truth with an annotation id 0 and one without area; detections of an unknown class
    warn_gt = dict(gt, annotations=[dict(a) for a in gt["annotations"]])
    warn_gt["annotations"][0]["id"] = 0
    del warn_gt["annotations"][1]["area"]
    (tmp / "gt-warn.json").write_text(json.dumps(warn_gt))
    stray = [dict(dt[i], category_id=999) for i in range(3)]
    (tmp / "dt-unknown-category.json").write_text(json.dumps(dt + stray))

    (tmp / "query.sql").write_text("-- per-size AP of the default run\n" + QUERY["ap"] + "\n")
    (tmp / "gaussian-params.json").write_text(json.dumps(
        {"gaussian_params": {"mean": [0.0, 0.3, 0.5, 0.5],  # log2 aspect, sqrt relative area, relative x, y
                             "covar": [[0.5, 0.0, 0.0, 0.0], [0.0, 0.02, 0.0, 0.0], [0.0, 0.0, 0.05, 0.01],
                                       [0.0, 0.0, 0.01, 0.05]]}}))
    # a classifier's labels of the ground truth (the upper bound): every 5th object called a person (a person: a
    # bicycle), scores spread over [0, 1); the same without its last 3 rows
    rows = [(a["id"], (2 if a["category_id"] == 1 else 1) if i % 5 == 0 else a["category_id"], (i * 7919 % 1000) / 1000)
            for i, a in enumerate(gt["annotations"])]
    for name, kept in (("classifier.csv", rows), ("classifier-missing.csv", rows[:-3])):
        with open(tmp / name, "w", newline="") as handle:
            out = csv.writer(handle)
            out.writerow(["gt_id", "category_id", "score"])
            out.writerows(kept)
    (tmp / "empty.json").write_text("[]")
    (tmp / "broken.json").write_text('[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3')
    write_segmentation_files(tmp / "seg")


def write_segmentation_files(folder: Path) -> None:
    """Label maps of three 24×32 images (seeded blocks): ``gt/<stem>.npy`` (2 annotators, label 0 on a border
    strip), ``pred/<stem>.png`` (8-bit grey), a two-parameter ``sweep/``; and broken copies: a map of another size,
    an RGBA PNG, annotators whose void pixels differ."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(15)
    for name in ("gt", "pred", "sweep/0.5", "sweep/1.5", "pred-size", "pred-alpha", "gt-void"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    for stem in ("a", "b", "c"):
        blocks = [np.kron(rng.integers(1, 5, (3, 4)), np.ones((8, 8), np.int64)) for _ in range(3)]
        annotators = np.stack(blocks[:2])
        annotators[:, :2, :] = 0  # the void strip of --void-label 0
        np.save(folder / "gt" / f"{stem}.npy", annotators)
        differs = annotators.copy()
        differs[1, 2, :] = 0
        np.save(folder / "gt-void" / f"{stem}.npy", differs)
        Image.fromarray(blocks[2].astype(np.uint8)).save(folder / "pred" / f"{stem}.png")
        Image.fromarray(blocks[2][:, :30].astype(np.uint8) if stem == "b" else blocks[2].astype(np.uint8)).save(
            folder / "pred-size" / f"{stem}.png")
        alpha = np.dstack([blocks[2].astype(np.uint8)] * 3 + [np.full((24, 32), 255, np.uint8)])
        Image.fromarray(alpha if stem == "c" else blocks[2].astype(np.uint8)).save(folder / "pred-alpha" / f"{stem}.png")
        np.save(folder / "sweep" / "0.5" / f"{stem}.npy", blocks[0])
        np.save(folder / "sweep" / "1.5" / f"{stem}.npy", blocks[2] // 2)


# -- running and normalising ---------------------------------------------------------------------------------


class Session:
    """A dataset's inputs in a temporary folder and the snapshots of its invocations, run in order."""

    def __init__(self, dataset: str, tmp, gen_dir=None):
        self.dataset = dataset
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.invocations = invocations(dataset)
        self._by_id = {inv.id: i for i, inv in enumerate(self.invocations)}
        self._done = {}
        if dataset == "sample":
            data = bundled_data()
            gt, dt = data / "instances_val2014_100.json", data / "instances_val2014_fakebbox100_results.json"
            folders = {"<DATA>": data}
        else:
            gen = Path(gen_dir) if gen_dir else self.tmp / "gen5k"
            generate_gen5k(gen)
            gt, dt = gen / "gt.json", gen / "dt.json"
            folders = {"<GEN>": gen, "<DATA>": bundled_data()}
        self.inputs = {"gt": gt, "dt": dt}
        write_helper_files(gt, dt, self.tmp)
        self.paths = {"tmp": str(self.tmp), "gt": str(gt), "dt": str(dt), "props": str(dt)}
        folders["<TMP>"] = self.tmp
        replacements = {}
        for token, folder in folders.items():
            for form in {str(folder), os.path.realpath(folder)}:
                replacements[form] = token
        self._replacements = sorted(replacements.items(), key=lambda kv: -len(kv[0]))  # the longest first
        self._evalengine_tmp = re.compile(re.escape(tempfile.gettempdir()) + r"/evalengine-[A-Za-z0-9_]+")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def normalise(self, text: str) -> str:
        for path, token in self._replacements:
            text = text.replace(path, token)
        text = self._evalengine_tmp.sub("<TMP-EVALENGINE>", text)
        text = re.sub(r"^(store written to .*)\(\d+(?:\.\d+)? s\)$", r"\1(<SECONDS> s)", text, flags=re.M)
        text = re.sub(r"^profile: .*$", "profile: <TIMINGS>", text, flags=re.M)
        return text

    def snapshot(self, id: str) -> str:
        """The snapshot text of invocation ``id``, running every earlier invocation first (once)."""
        position = self._by_id[id]
        for inv in self.invocations[:position + 1]:
            if inv.id not in self._done:
                self._done[inv.id] = self._record(inv)
        return self._done[id]

    def run_all(self) -> dict:
        return {inv.id: self.snapshot(inv.id) for inv in self.invocations}

    def _record(self, inv: Invocation) -> str:
        argv = inv.expand(self.paths)
        code, out, err = call(argv)
        parts = [f"$ {self.normalise(shlex.join(['evalengine', *argv]))}\n", f"exit code: {code}\n",
                 "--- stdout ---\n", _terminated(self.normalise(out)), "--- stderr ---\n", _terminated(self.normalise(err))]
        for template in inv.files:
            path = Path(template.format(**self.paths))
            parts.append(f"--- file {self.normalise(str(path))} ---\n")
            parts.append(_terminated(self.normalise(describe_file(path))))
        return "".join(parts)

    def inputs_text(self) -> str:
        """The input files (derived ones too) by size and SHA-256: a changed input explains changed outputs."""
        names = [self.inputs["gt"], self.inputs["dt"]] + sorted(
            p for p in self.tmp.iterdir() if p.is_file() and p.suffix in (".json", ".csv", ".sql")
            and p.name in HELPER_FILES)
        lines = [f"dataset: {self.dataset}"]
        for path in names:
            data = path.read_bytes()
            lines.append(f"{self.normalise(str(path))}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
        return "\n".join(lines) + "\n"


HELPER_FILES = {"dt-shifted.json", "gt-warn.json", "dt-unknown-category.json", "meta.csv", "meta-duplicate.csv", "meta-clash.csv", "flipped.csv", "scaled.csv",
                "query.sql", "gaussian-params.json", "empty.json", "broken.json", "classifier.csv",
                "classifier-missing.csv"}


def _terminated(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n\\ no newline at end\n"


# what a new interpreter ignores (python -W / PYTHONWARNINGS aside; DeprecationWarning is shown only in __main__)
DEFAULT_IGNORED = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def call(argv: list) -> tuple:
    """``evalengine.cli.main(argv)`` in-process: (exit code, stdout, stderr).

    Warnings are filtered as in a new interpreter (each distinct warning shown once per command, the default
    ignores of DeprecationWarning, ResourceWarning, … kept), whatever an earlier command or pytest did."""
    from evalengine.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        with warnings.catch_warnings():  # restores the filters and showwarning (main() replaces it)
            warnings.resetwarnings()  # a changed filter list also forgets which warnings were already shown
            warnings.simplefilter("default")
            for category in DEFAULT_IGNORED:
                warnings.filterwarnings("ignore", category=category)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(argv))
                except SystemExit as exc:  # argparse
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                except Exception as exc:  # noqa: BLE001 - an uncaught error is part of the behaviour
                    message = str(exc).splitlines()[0] if str(exc) else ""
                    print(f"uncaught {type(exc).__name__}: {message}", file=sys.stderr)
                    code = 1
    finally:
        if saved_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved_columns
    return code, out.getvalue(), err.getvalue()


def describe_file(path: Path) -> str:
    if not path.exists():
        return "missing\n"
    if path.suffix in (".png", ".pdf", ".svg"):
        return "figure, non-empty\n" if path.stat().st_size > 0 else "figure, EMPTY\n"
    if path.suffix == ".parquet":
        import polars as pl

        frame = pl.read_parquet(path)
        rows = hashlib.sha256(frame.write_csv().encode()).hexdigest()
        schema = ", ".join(f"{name}: {dtype}" for name, dtype in frame.schema.items())
        return f"parquet, {frame.height} rows; {schema}\nsha256 of the rows as CSV: {rows}\n"
    return path.read_text()


# -- the command -----------------------------------------------------------------------------------------------


def write_snapshots(dataset: str, out, gen_dir=None, only=None, log=sys.stderr) -> dict:
    """Run ``dataset``'s invocations and write ``out/<id>.txt`` for each (and ``out/_inputs.txt``); a full run
    removes ``.txt`` files of invocations no longer listed. Returns {id: seconds}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings = {}
    with tempfile.TemporaryDirectory(prefix="cli-snapshot-") as tmp:
        session = Session(dataset, Path(tmp) / "work", gen_dir)
        wanted = [inv.id for inv in session.invocations if only is None or inv.id in only]
        for id in wanted:
            started = time.perf_counter()
            text = session.snapshot(id)
            timings[id] = time.perf_counter() - started
            (out / f"{id}.txt").write_bytes(text.encode())
            print(f"{dataset} {id}: {text.splitlines()[1]} ({timings[id]:.1f} s)", file=log, flush=True)
        (out / "_inputs.txt").write_bytes(session.inputs_text().encode())
        if only is None:
            listed = {f"{id}.txt" for id in wanted} | {"_inputs.txt"}
            for stale in out.glob("*.txt"):
                if stale.name not in listed:
                    stale.unlink()
    return timings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=[*DATASETS, "all"], default="sample")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of the snapshot files (with --dataset all: OUT/sample and OUT/gen5k)")
    parser.add_argument("--gen-dir", type=Path, default=None,
                        help="gen5k input folder (gt.json, dt.json): reused if present, else generated there "
                             "(default: generated in the temporary folder)")
    parser.add_argument("--only", nargs="+", default=None, metavar="ID", help="only these invocations (and the "
                        "ones before them, which are run but not written)")
    parser.add_argument("--list", action="store_true", help="print the invocation ids and exit")
    args = parser.parse_args(argv)
    datasets = DATASETS if args.dataset == "all" else (args.dataset,)
    if not args.list and args.out is None:
        parser.error("--out is required (or --list)")
    if args.list:
        for dataset in datasets:
            for inv in invocations(dataset):
                print(f"{dataset} {inv.id}: evalengine {shlex.join(inv.argv)}")
        return 0
    import evalengine

    print(f"evalengine from {evalengine.__file__}", file=sys.stderr)
    for dataset in datasets:
        started = time.perf_counter()
        out = args.out / dataset if args.dataset == "all" else args.out
        timings = write_snapshots(dataset, out, args.gen_dir, set(args.only) if args.only else None)
        print(f"{dataset}: {len(timings)} snapshots in {out} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
