"""The commands over a store: ``sql`` (the DuckDB views) and ``plot`` (figures).

Their ``--out`` writes a new file outside the store (``--force`` replaces an existing one), through a temporary file
beside it renamed into place: a failure leaves nothing.
"""

from pathlib import Path

from evalengine import api
from evalengine.cli import options
from evalengine.errors import EvalEngineError, first_line


def _target(args, store) -> Path:
    """The file ``--out`` names, checked before anything runs: not inside the store (symbolic links followed), not
    a folder, in a folder that exists, new unless ``--force``."""
    target = Path(args.out).resolve()
    if isinstance(store.path, Path) and target.is_relative_to(store.path.resolve()):
        raise EvalEngineError(f"{args.out}: inside the store {store.path} (write results outside it)")
    if target.is_dir():
        raise EvalEngineError(f"{args.out}: is a folder (give a file name)")
    if not target.parent.is_dir():
        raise EvalEngineError(f"{args.out}: no folder {target.parent} to write into")
    if target.exists() and not args.force:
        raise EvalEngineError(f"{args.out}: already exists (--force replaces it)")
    if args.command == "plot":
        from evalengine.plots import figure_formats

        kind, formats = target.suffix.lstrip(".").lower() or "png", figure_formats()
        if kind not in formats:
            raise EvalEngineError(f"{args.out}: no figure format .{kind} (one of {', '.join(sorted(formats))})")
    return target


def _write(args, target: Path, write) -> None:
    """``write(path)`` a temporary file beside ``target`` renamed onto it (:func:`api.replace_file`: a failure
    leaves nothing)."""
    try:
        api.replace_file(target, write)
    except OSError as exc:
        raise EvalEngineError(f"{args.out}: cannot write ({exc.strerror or first_line(exc)})") from exc


def _cmd_plot(args) -> str:
    from evalengine import plots

    store = api.open(args.store)
    target = _target(args, store)
    if args.kind in ("proposal-recall-iou", "ar-budget", "quality-budget", "quality-histogram"):
        runs = args.runs or [api.DEFAULT_PROPOSAL_RUN]
        if args.iou_type not in api.PROPOSAL_IOU_TYPES:
            raise EvalEngineError(f"plot {args.kind}: --iou-type is bbox or segm for proposals, not {args.iou_type}")
        protocol = (api.ProposalProtocol(api.PONT_TUSET_BUDGETS, iou_type="segm") if args.iou_type == "segm"
                    else api.ProposalProtocol())
        evaluations = {run: store.evaluate_proposals(run, protocol) for run in runs}
        if args.kind == "quality-budget":
            figure = plots.achievable_by_budget({run: ev.achievable_quality() for run, ev in evaluations.items()})
        elif args.kind == "quality-histogram":
            if args.budget not in protocol.budgets:
                raise EvalEngineError(f"plot quality-histogram: budget {args.budget} is not one of "
                                      f"{list(protocol.budgets)}")
            figure = plots.best_quality_histogram({run: ev.gt_matches().collect() for run, ev in evaluations.items()},
                                                  args.budget)
        elif args.kind == "ar-budget":
            figure = plots.ar_by_budget({run: ev.average_recall() for run, ev in evaluations.items()})
        else:
            figure = plots.proposal_recall_iou({run: ev.recall_iou_curve() for run, ev in evaluations.items()},
                                               args.budget)
        return _save(args, target, figure)
    runs = args.runs or [api.DEFAULT_RUN]
    if args.kind == "density":
        result = api.box_density(store, runs[0], args.grid, args.density_kind, args.score_threshold)
        return _save(args, target, plots.box_density(result.predicted, result.ground_truth, result.difference(),
                                                     f"{result.kind}, run '{result.run}'"))
    if args.kind in ("tide", "confusion"):
        return _save(args, target, _diagnosis_figure(args, store, runs))
    protocol = options.protocol(args)
    if args.kind == "borji":
        diagnosis = api.borji(store, runs[0], variant=args.variant, protocol=api.BorjiProtocol(coco=protocol))
        figure = plots.borji_diagnosis(diagnosis.table(("AP", "AP50")), diagnosis.error_counts())
    elif args.kind == "pr":
        evaluation = store.evaluate(protocol, run=runs[0])
        names = dict(store.categories().select("category_id", "name").collect().iter_rows())
        figure = plots.pr_curves(evaluation.precision_recall(), names, args.categories, args.iou)
    elif args.kind == "recall-iou":
        figure = plots.recall_iou({run: store.evaluate(protocol, run=run).ap_table() for run in runs})
    elif args.kind in ("lrp", "pr-optimal"):
        points = store.evaluate(protocol, run=runs[0]).operating_points(args.iou)
        names = dict(store.categories().select("category_id", "name").collect().iter_rows())
        draw = plots.lrp_curves if args.kind == "lrp" else plots.pr_operating_points
        figure = draw(points, names, args.categories)
    elif args.kind == "analyze":
        if args.categories and (len(args.categories) > 1 or args.supercategory is not None):
            raise EvalEngineError("plot analyze: one category (--categories ID) or one --supercategory, not more")
        result = api.analyze(store, run=runs[0]).result
        rows, name = api.analyze_scope(result, args.categories[0] if args.categories else None, args.supercategory)
        figure = plots.analyze_pr(rows, name)
    elif args.kind == "ap-by-size":
        figure = plots.ap_by_size({run: store.evaluate(protocol, run=run).summary() for run in runs})
    else:
        if len(runs) < 2:
            raise EvalEngineError("plot compare needs two runs: --runs BASELINE OTHER")
        figure = plots.run_differences(store.compare(runs, protocol), runs[1])
    return _save(args, target, figure)


def _diagnosis_figure(args, store, runs: list):
    """TIDE's error bars (one bar per run) or the confusion heat map of the first run."""
    from evalengine import plots

    if args.kind == "tide":
        return plots.tide_errors({run: api.tide(store, run).result for run in runs})
    result = api.confusion(store, args.iou, args.score, run=runs[0])
    return plots.confusion_heatmap(result.matrix(), result.names, args.normalize)


def _save(args, target: Path, figure) -> str:
    """Write the figure in the format its file's suffix names (PNG without one), then close it."""
    from evalengine import plots

    kind = target.suffix.lstrip(".").lower() or "png"  # one of the formats (checked by _target)
    try:
        _write(args, target, lambda path: figure.savefig(path, dpi=120, format=kind))
    finally:
        plots.close(figure)
    return f"figure written to {args.out}"


def _cmd_sql(args) -> str:
    if (args.query is None) == (args.file is None):
        raise EvalEngineError("give either a query or --file FILE.sql")
    if args.format == "parquet" and not args.out:
        raise EvalEngineError("--format parquet needs --out FILE")
    text = args.query if args.query is not None else options.read_text(args.file)
    store = api.open(args.store)
    target = _target(args, store) if args.out else None
    frame = store.sql(text, allow_external=args.allow_external)
    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested()] if args.format == "csv" else []
    if nested:  # Polars refuses them with a traceback
        raise EvalEngineError(f"--format csv: column {nested[0]} holds lists or structs (use json or parquet)")
    if target:
        _write(args, target, {"csv": frame.write_csv, "json": frame.write_json, "parquet": frame.write_parquet,
                              "table": lambda out: Path(out).write_text(api.report.table(frame) + "\n")}[args.format])
        return f"{frame.height} rows written to {args.out}"
    if args.format == "csv":
        return frame.write_csv().rstrip("\n")
    if args.format == "json":
        return frame.write_json()
    return api.report.table(frame)


def _out_args(parser, help: str, required: bool) -> None:
    parser.add_argument("--out", required=required, default=None, help=help)
    parser.add_argument("--force", action="store_true", help="replace the --out file if it exists")


def add_plot(sub) -> None:
    plot = options.store_command(sub, "plot", "figures: precision-recall, recall-IoU, AP by size, per-class run "
                                 "differences, LRP and its components against the score threshold, precision-recall "
                                 "with the LRP- and F1-optimal points, proposal recall-IoU and AR-budget curves, segmented proposals' "
                                 "achievable quality (--iou-type segm) against the budget and its histogram, "
                                 "COCO analyze's stacked PR areas, Borji's cumulative error diagnosis, TIDE's errors, "
                                 "the confusion heat map, box density maps", _cmd_plot)
    plot.add_argument("kind", choices=["pr", "recall-iou", "ap-by-size", "compare", "lrp", "pr-optimal",
                                       "proposal-recall-iou", "ar-budget", "quality-budget", "quality-histogram", "analyze", "borji", "tide", "confusion",
                                       "density"])
    _out_args(plot, "image file (.png, .pdf, .svg), outside the store", required=True)
    plot.add_argument("--runs", nargs="+", default=None, help="runs to draw (compare: baseline first)")
    plot.add_argument("--categories", type=int, nargs="+", default=None,
                      help="pr, lrp, pr-optimal: one curve per category id; analyze: the category drawn")
    plot.add_argument("--supercategory", default=None, help="analyze: the mean over this supercategory's categories "
                                                           "(default: over all categories)")
    plot.add_argument("--iou", type=float, default=0.5,
                      help="pr with --categories, lrp, pr-optimal, confusion: the IoU threshold (one of the "
                           "protocol's)")
    plot.add_argument("--score", type=options.number, default=0.05,
                      help="confusion: keep detections with score >= this (default 0.05)")
    plot.add_argument("--normalize", action="store_true", help="confusion: row fractions instead of counts")
    plot.add_argument("--budget", type=int, default=1000,
                      help="proposal-recall-iou, quality-histogram: proposals per image")
    plot.add_argument("--variant", choices=api.BORJI_VARIANTS, default="borji_ref", help="borji: the diagnosis' variant")
    plot.add_argument("--density-kind", choices=api.DENSITY_KINDS, default="occupancy",
                      help="density: occupancy (cells a box covers) or center (the cell of its centre)")
    plot.add_argument("--grid", type=options.positive_int, default=100, help="density: cells per side (default 100)")
    plot.add_argument("--score-threshold", type=options.number, default=None,
                      help="density: count detections with score >= this (default: all)")
    options.matching_args(plot.add_argument_group(
        "COCO protocol", "pr, recall-iou, ap-by-size, compare, lrp, pr-optimal, borji: what is matched; "
        "proposal-recall-iou, ar-budget, quality-budget, quality-histogram: --iou-type bbox or segm"))


def add_sql(sub) -> None:
    sql = options.store_command(sub, "sql", "query a store with SQL (DuckDB views of the sql/ folder)", _cmd_sql)
    sql.add_argument("query", nargs="?", default=None, help='e.g. "SELECT * FROM coco_summary"')
    sql.add_argument("--file", default=None, help="read the query from a .sql file")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    _out_args(sql, "write the result to this file, outside the store", required=False)
    sql.add_argument("--allow-external", action="store_true",
                     help="DuckDB's full power: any statement, any file or URL, extensions, settings (default: one "
                          "SELECT or WITH statement that reads the store only)")
