"""The commands over a store: ``sql`` (the DuckDB views) and ``plot`` (figures)."""

from pathlib import Path

from evalengine import api
from evalengine.cli import options
from evalengine.errors import EvalEngineError


def _cmd_plot(args) -> str:
    from evalengine import plots

    store = api.open(args.store)
    if args.kind in ("proposal-recall-iou", "ar-budget"):
        runs = args.runs or [api.DEFAULT_PROPOSAL_RUN]
        evaluations = {run: store.evaluate_proposals(run) for run in runs}
        if args.kind == "ar-budget":
            figure = plots.ar_by_budget({run: ev.average_recall() for run, ev in evaluations.items()})
        else:
            figure = plots.proposal_recall_iou({run: ev.recall_iou_curve() for run, ev in evaluations.items()},
                                               args.budget)
        figure.savefig(args.out, dpi=120)
        return f"figure written to {args.out}"
    protocol = options.protocol(args)
    runs = args.runs or [api.DEFAULT_RUN]
    if args.kind == "pr":
        evaluation = store.evaluate(protocol, run=runs[0])
        names = dict(store.categories().select("category_id", "name").collect().iter_rows())
        figure = plots.pr_curves(evaluation.precision_recall(), names, args.categories, args.iou)
    elif args.kind == "recall-iou":
        figure = plots.recall_iou({run: store.evaluate(protocol, run=run).ap_table() for run in runs})
    elif args.kind == "ap-by-size":
        figure = plots.ap_by_size({run: store.evaluate(protocol, run=run).summary() for run in runs})
    else:
        if len(runs) < 2:
            raise EvalEngineError("plot compare needs two runs: --runs BASELINE OTHER")
        figure = plots.run_differences(store.compare(runs, protocol), runs[1])
    figure.savefig(args.out, dpi=120)
    return f"figure written to {args.out}"


def _cmd_sql(args) -> str:
    if (args.query is None) == (args.file is None):
        raise EvalEngineError("give either a query or --file FILE.sql")
    text = args.query if args.query is not None else options.read_text(args.file)
    frame = api.open(args.store).sql(text)
    if args.format == "parquet" and not args.out:
        raise EvalEngineError("--format parquet needs --out FILE")
    if args.out:
        {"csv": frame.write_csv, "json": frame.write_json, "parquet": frame.write_parquet,
         "table": lambda out: Path(out).write_text(api.report.table(frame) + "\n")}[args.format](args.out)
        return f"{frame.height} rows written to {args.out}"
    if args.format == "csv":
        return frame.write_csv().rstrip("\n")
    if args.format == "json":
        return frame.write_json()
    return api.report.table(frame)


def add_plot(sub) -> None:
    plot = options.store_command(sub, "plot", "figures: precision-recall, recall-IoU, AP by size, per-class run "
                                 "differences, proposal recall-IoU and AR-budget curves", _cmd_plot)
    plot.add_argument("kind", choices=["pr", "recall-iou", "ap-by-size", "compare", "proposal-recall-iou", "ar-budget"])
    plot.add_argument("--out", required=True, help="image file (.png, .pdf, .svg)")
    plot.add_argument("--runs", nargs="+", default=None, help="runs to draw (compare: baseline first)")
    plot.add_argument("--categories", type=int, nargs="+", default=None, help="pr: one curve per category id")
    plot.add_argument("--iou", type=float, default=0.5, help="pr with --categories: the IoU threshold")
    plot.add_argument("--budget", type=int, default=1000, help="proposal-recall-iou: proposals per image")
    options.protocol_args(plot)


def add_sql(sub) -> None:
    sql = options.store_command(sub, "sql", "query a store with SQL (DuckDB views of the sql/ folder)", _cmd_sql)
    sql.add_argument("query", nargs="?", default=None, help='e.g. "SELECT * FROM coco_summary"')
    sql.add_argument("--file", default=None, help="read the query from a .sql file")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument("--out", default=None, help="write the result to this file")
