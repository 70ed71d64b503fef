"""``evalengine fsck``: check a store and repair what can be repaired (:func:`evalengine.api.check_store`)."""

from evalengine import api
from evalengine.cli import options
from evalengine.errors import StoreError


def _cmd_fsck(args) -> str:
    findings = api.check_store(args.store, repair=args.repair)
    if findings.is_empty():
        return f"{args.store}: no problems found"
    if args.json:
        print(findings.write_json())
    else:
        print(api.report.table(findings))
    removable = findings.filter(findings["repair"] == "remove").height
    if args.repair and removable == findings.height:
        return f"{args.store}: {removable} problem(s) repaired"
    if args.repair:
        raise StoreError(f"{args.store}: {findings.height - removable} problem(s) cannot be repaired here (see above)")
    hint = f"; `evalengine fsck {args.store} --repair` removes {removable} of them" if removable else ""
    raise StoreError(f"{args.store}: {findings.height} problem(s) found{hint}")


def add_fsck(sub) -> None:
    fsck = options.store_command(
        sub, "fsck", "check a store (every table readable, no leftovers of interrupted writes) and repair it",
        _cmd_fsck)
    fsck.add_argument("--repair", action="store_true",
                      help="remove leftovers of interrupted writes, run folders and match tables the manifest does "
                           "not list, unfinished match tables (made again by the next evaluate)")
    fsck.add_argument("--json", action="store_true", help="the problems as JSON rows")
