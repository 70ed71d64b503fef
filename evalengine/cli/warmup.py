"""``evalengine warmup``: compile the numba kernels once, after install, and cache them (numba's ``cache=True``: the
``.nbi`` index and ``.nbc`` code files beside the modules, or under ``NUMBA_CACHE_DIR``), so that no later command
pays the 20–40 s. It runs the commands most runs use on the bundled samples (COCO boxes, masks and mask boundaries;
proposals; LRP; TIDE; VOC) and says how many of the cacheable kernels are now compiled; the others (families such
as keypoints, OpenImages or partitions) compile, once, on first use."""

import importlib
import json
import pkgutil
import tempfile
from importlib import resources
from pathlib import Path

import evalengine

SAMPLE_GT, SAMPLE_DT = "instances_val2014_100.json", "instances_val2014_fakebbox100_results.json"


def workloads(gt: Path, dt: Path, folder: Path) -> list:
    """The command lines run on the bundled sample (their output is not shown); mask results are the ground truth's
    non-crowd masks, written to ``folder``."""
    annotations = json.loads(gt.read_text())["annotations"]
    masks = folder / "masks.json"
    masks.write_text(json.dumps([{"image_id": a["image_id"], "category_id": a["category_id"], "score": 1 / (1 + n),
                                  "segmentation": a["segmentation"]}
                                 for n, a in enumerate(annotations) if not a.get("iscrowd")]))
    files = ["--gt", str(gt), "--dt", str(dt), "--quiet"]
    mask_files = ["--gt", str(gt), "--dt", str(masks), "--quiet"]
    return [["coco", *files], ["coco", *mask_files, "--iou-type", "segm"],
            ["coco", *mask_files, "--iou-type", "boundary"],
            ["proposals", "--gt", str(gt), "--proposals", str(dt), "--oma", "--quiet", "--store", str(folder / "p")],
            ["lrp", *files[:-1]], ["tide", *files[:-1]], ["voc", "--sample", "--quiet"]]


def cacheable_kernels() -> list:
    """Every numba kernel of evalengine compiled with ``cache=True``, as ``(module, dispatcher)``; not those inlined
    into their callers (``inline="always"``), which are compiled, and cached, as part of them."""
    found = []
    for info in pkgutil.walk_packages(evalengine.__path__, "evalengine."):
        if info.name.endswith("__main__"):  # importing it would run the command
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # a module of an optional dependency (plots without matplotlib)
            continue
        found += [(info.name, value) for value in vars(module).values()
                  if type(getattr(value, "_cache", None)).__name__ == "FunctionCache"
                  and value.targetoptions.get("inline") != "always"
                  and getattr(value, "__module__", None) == info.name]
    return found


def _cmd_warmup(args) -> str:
    from evalengine.cli import build_parser

    data = resources.files("evalengine.data")
    with resources.as_file(data / SAMPLE_GT) as gt, resources.as_file(data / SAMPLE_DT) as dt, \
            tempfile.TemporaryDirectory(prefix="evalengine-warmup-") as tmp:
        for argv in workloads(gt, dt, Path(tmp)):
            command = build_parser(argv).parse_args(argv)
            command.func(command)
    kernels = cacheable_kernels()
    compiled = [module for module, kernel in kernels if kernel.signatures]
    later = sorted({module.removeprefix("evalengine.") for module, kernel in kernels if not kernel.signatures})
    return (f"warmup: {len(compiled)} of {len(kernels)} cached numba kernels compiled; later runs reuse them. "
            f"Compiled on first use: {', '.join(later) or 'none'}")


def add_warmup(sub) -> None:
    warmup = sub.add_parser("warmup", help="compile and cache the numba kernels once (after install)")
    warmup.set_defaults(func=_cmd_warmup)
