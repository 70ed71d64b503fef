"""The ``invariance`` command: AP per model and perturbation from the tagged runs of one or more stores (Borji &
Iranmanesh §6, Tables 4–6), with per-object changes against a baseline perturbation."""

from evalengine import api
from evalengine.cli import options
from evalengine.cli.options import STORE_HELP


def _cmd_invariance(args) -> str:
    result = api.invariance(args.stores, args.perturbation, args.model, **options.schedule(args))
    return api.invariance_output(result, args.json, args.baseline, args.category)


def add_invariance(sub) -> None:
    parser = sub.add_parser("invariance", help="AP per model and perturbation of runs tagged --tag perturbation=NAME")
    parser.add_argument("stores", nargs="+", metavar="STORE",
                        help=f"{STORE_HELP}; several: one per dataset variant (each run against its own ground truth)")
    parser.add_argument("--perturbation", nargs="+", default=None, metavar="NAME",
                        help="only these perturbations (tag values)")
    parser.add_argument("--model", nargs="+", default=None, metavar="NAME", help="only these models (tag values)")
    parser.add_argument("--category", type=int, default=None, metavar="ID",
                        help="the tables of one category instead of the class mean")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="also count each model's objects lost and gained against this perturbation")
    options.schedule_args(parser)
    parser.add_argument("--json", action="store_true",
                        help='print {"metrics": [long table rows], "untagged": [...][, "object_changes": [...]]}')
    parser.set_defaults(func=_cmd_invariance)
