"""The ``density`` command: where a stored run's boxes fall in the image against the ground truth's (Borji &
Iranmanesh Fig. 12; :mod:`evalengine.metrics.box_density`)."""

from evalengine import api
from evalengine.cli import options


def _cmd_density(args) -> str:
    store = api.open(args.store)
    with options.phases(args).phase("density", total=store.layout.n_shards, unit="shards") as advance:
        result = api.box_density(store, args.run, args.grid, args.kind, args.score_threshold, on_shard_done=advance)
    return api.box_density_output(result, args.json, store.path)


def add_density(sub) -> None:
    parser = options.store_command(sub, "density", "box density maps: where a run's detections fall in the image "
                                                   "(normalised coordinates) against the ground truth", _cmd_density)
    parser.add_argument("--run", default=api.DEFAULT_RUN, help="the stored run")
    parser.add_argument("--kind", choices=api.DENSITY_KINDS, default="occupancy",
                        help="occupancy: every cell a box's interior meets; center: the cell of its centre")
    parser.add_argument("--grid", type=options.positive_int, default=100, help="cells per side (default 100)")
    parser.add_argument("--score-threshold", type=options.number, default=None,
                        help="count detections with score >= this (default: all)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (it shows only on a terminal)")
    parser.add_argument("--json", action="store_true",
                        help='print {"run", "kind", "grid", "score_threshold", "n_predicted", "n_ground_truth", '
                             '"predicted", "ground_truth", "difference"}')
