"""Run tags: ``KEY=VALUE`` labels of a run (the model, the perturbation of its images, its level, …), kept in the
store's ``runs`` table as a list of ``{key, value}`` sorted by key (SQL: the ``runs`` view's ``tags`` map and the
``run_tags`` view).

A run is tagged when it is added (``ingest coco|voc --tag``, ``add-run --tag``, ``add-proposals --tag``). A perturbed
proposal run of the repeatability machinery (Hosang et al. §3) is also tagged with its ``perturbation`` kind, its
``level`` and its ``reference`` run, so that every perturbation run is described one way.
A store written before tags existed reads as having none.
"""

import polars as pl

from evalengine import schema
from evalengine.errors import InputError
from evalengine.store.paths import check_name

MAX_VALUE = 200  # characters of a tag's value
DERIVED = ("perturbation", "level", "reference")  # a perturbed proposal run's tags, from its description


def check_tags(tags: dict) -> dict:
    """``tags`` if every key follows the name rule and every value is one line of 1 to 200 printable characters."""
    for key, value in tags.items():
        check_name("tag", key)
        if not isinstance(value, str) or not 0 < len(value) <= MAX_VALUE or not value.isprintable():
            raise InputError(f"tag {key}: the value {value!r} is not allowed: use 1 to {MAX_VALUE} printable "
                             "characters on one line")
    return tags


def parse_tags(texts) -> dict:
    """``--tag KEY=VALUE`` options as a dict (each key once), checked by :func:`check_tags`."""
    tags = {}
    for text in texts or ():
        key, equals, value = text.partition("=")
        if not equals or not key or not value:
            raise InputError(f"--tag {text!r}: expected KEY=VALUE (e.g. --tag perturbation=blur)")
        if key in tags:
            raise InputError(f"--tag {key}: given twice ({key}={tags[key]}, {text})")
        tags[key] = value
    return check_tags(tags)


def tag_list(tags: dict | None) -> list:
    """The stored form of ``tags``: ``[{"key", "value"}]`` sorted by key."""
    return [{"key": key, "value": value} for key, value in sorted(check_tags(tags or {}).items())]


def proposal_tags(run: str, description: dict, given: dict | None = None) -> dict:
    """The tags of proposal run ``run``: the ``given`` ones (``add-proposals --tag``) and, for a perturbed run, its kind,
    level and reference from its manifest description. Those three keys are the perturbation's own: given for any
    proposal run, they are a located error (an unperturbed run tagged with a perturbation would enter the invariance
    table with no homographies to measure its repeatability by)."""
    given = check_tags(given or {})
    reserved = [key for key in DERIVED if key in given]
    if reserved:
        raise InputError(f"proposal run '{run}': tag {reserved[0]}={given[reserved[0]]} is not allowed: a proposal "
                         f"run's {', '.join(DERIVED)} tags come from its perturbation (add-proposals --perturbation "
                         "or --homographies, and --reference)")
    perturbation = description.get("perturbation")
    if not perturbation:
        return given
    level = perturbation.get("level")
    return {**given, "perturbation": perturbation["kind"], "reference": perturbation["reference"],
            **({} if level is None else {"level": format(level, "g")})}


def with_tags(runs: pl.DataFrame) -> pl.DataFrame:
    """A runs table with its ``tags`` column (empty for a store written before tags), in :data:`schema.RUNS`."""
    if "tags" not in runs.columns:
        runs = runs.with_columns(pl.lit([], dtype=schema.RUNS["tags"]).alias("tags"))
    return runs.select(list(schema.RUNS)).cast(schema.RUNS)


def run_tags(layout) -> dict:
    """``{run: {key: value}}`` of every run of an opened store (detection and proposal runs)."""
    runs = with_tags(layout.read("runs"))
    return {run: {tag["key"]: tag["value"] for tag in tags}
            for run, tags in runs.select("run", "tags").iter_rows()}
