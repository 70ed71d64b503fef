"""Segmented proposals (Pont-Tuset & Marques §2.3): ``evalengine proposals --iou-type segm`` end to end (mask JSON in,
recall, AR and achievable quality at MCG's 66 budgets out) against a plain peer computing only the best Jaccard per
object at every budget — pycocotools ``maskUtils.iou`` per image and a NumPy running maximum — on the masks of
:mod:`benchmarks.bench_mask_ingest` (ground-truth polygons; per image ``--dets-per-image`` compressed-RLE results
taken as proposals). Both run in processes of their own, timed in the same run, with their peak RSS (VmHWM).

``--boundary-f``: F̃b too (``--quality-measure jaccard boundary_f``), against a peer computing the best F̃b per
object as DAVIS ``db_eval_boundary`` does (dense ``seg2bmap`` and disc dilation, once per mask, then boolean ANDs
per pair), beside our Jaccard-only run.

    python benchmarks/bench_segmented_proposals.py --images 500 --dets-per-image 1000
"""

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_mask_ingest import mask_set  # noqa: E402
from generate import add_size_arguments  # noqa: E402

_PEAK = "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))"

# a peer's loop over images (proposals by descending score, non-crowd objects), the similarity ``m`` of each image
# put in by SIMILARITY, then the running best per budget and its mean at the last
_PEER = """
import json, sys, time
import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from evalengine.match.proposals import PONT_TUSET_BUDGETS
{imports}
t = time.perf_counter()
coco = COCO(sys.argv[1])
proposals = {{}}
for p in json.load(open(sys.argv[2])):
    proposals.setdefault(p["image_id"], []).append(p)
best = []
for image_id, mine in proposals.items():
    anns = [a for a in coco.imgToAnns[image_id] if not a["iscrowd"]]
    if not anns:
        continue
    mine.sort(key=lambda p: -p["score"])
    rles = [{{"size": p["segmentation"]["size"], "counts": p["segmentation"]["counts"].encode()}} for p in mine]
{similarity}
    running = np.maximum.accumulate(m, axis=0)
    best.append(running[np.minimum(np.array(PONT_TUSET_BUDGETS), len(mine)) - 1])
best = np.concatenate(best, axis=1)
print(best.mean(axis=1)[-1])
print(time.perf_counter() - t)
"""

PEER = _PEER.format(imports="", similarity="""\
    m = np.asarray(mask_utils.iou(rles, [coco.annToRLE(a) for a in anns], [0] * len(anns)))""")

FB_PEER = _PEER.format(imports="""\
from scipy.ndimage import binary_dilation
from skimage.morphology import disk
from evalengine.geometry.boundary_pr import seg2bmap""", similarity="""\
    h, w = rles[0]["size"]
    se = disk(np.ceil(0.008 * np.sqrt(h * h + w * w)))
    sides = []
    for masks in (mask_utils.decode(rles), mask_utils.decode([coco.annToRLE(a) for a in anns])):
        b = [seg2bmap(masks[:, :, i]) for i in range(masks.shape[2])]
        sides.append((b, [binary_dilation(x, se) for x in b], [int(x.sum()) for x in b]))
    (pb, pd, pn), (gb, gd, gn) = sides
    m = np.zeros((len(mine), len(anns)))
    for i in range(len(mine)):
        for j in range(len(anns)):
            p = 1.0 if pn[i] == 0 else (0.0 if gn[j] == 0 else (pb[i] & gd[j]).sum() / pn[i])
            r = (0.0 if gn[j] else 1.0) if pn[i] == 0 else (1.0 if gn[j] == 0 else (gb[j] & pd[i]).sum() / gn[j])
            m[i, j] = 0.0 if p + r == 0 else 2 * p * r / (p + r)""")


OURS = """
import sys, time, warnings
warnings.simplefilter('ignore')
t = time.perf_counter()
from evalengine.cli import main
main(["proposals", "--gt", sys.argv[1], "--proposals", sys.argv[2], "--iou-type", "segm", "--json", "--quiet",
      "--store", sys.argv[3], "--overwrite", *sys.argv[4:]])
print(time.perf_counter() - t)
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(code: str, *argv) -> tuple:
    """``(last printed lines, peak RSS in MB, CPU seconds)`` of ``code`` in a process of its own (CPU time: on a
    loaded machine the wall clock measures the others' work too)."""
    before = _cpu()
    done = subprocess.run([sys.executable, "-c", code + "\n" + _PEAK, *map(str, argv)], check=True,
                          capture_output=True, text=True)
    lines = done.stdout.split("\n")
    return lines[-4:-2], int(lines[-2]) / 1024, _cpu() - before


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--out", type=Path, default=HERE / "out", help="where the data are generated and kept")
    parser.add_argument("--boundary-f", action="store_true", help="F̃b too, against a DAVIS-style dense peer")
    args = parser.parse_args(argv)
    out = mask_set(args)
    gt, proposals = out / "gt_masks.json", out / "dt_masks.json"
    (payload, ours), ours_rss, ours_cpu = _timed(OURS, gt, proposals, out / "store_segprop")
    (peer_mean, peer), peer_rss, peer_cpu = _timed(PEER, gt, proposals)
    mean = json.loads(payload)["achievable"]["mean"][-1]
    print(f"{args.images} images, {args.dets_per_image} mask proposals per image ({proposals.stat().st_size / 2**20:.0f}"
          f" MB): evalengine {float(ours):.1f} s, CPU {ours_cpu:.1f} s (peak {ours_rss:.0f} MB; recall, AR and "
          f"achievable quality at 66 budgets), peer {float(peer):.1f} s, CPU {peer_cpu:.1f} s (peak {peer_rss:.0f} MB; "
          f"best Jaccard only); mean best Jaccard at "
          f"100000: {mean!r} vs {float(peer_mean)!r}")
    if args.boundary_f:
        (payload, ours_fb), fb_rss, fb_cpu = _timed(OURS, gt, proposals, out / "store_segprop", "--quality-measure",
                                                    "jaccard", "boundary_f")
        (peer_mean, peer), peer_rss, peer_cpu = _timed(FB_PEER, gt, proposals)
        mean = json.loads(payload)["achievable_boundary_f"]["mean"][-1]
        print(f"with F̃b: evalengine {float(ours_fb):.1f} s, CPU {fb_cpu:.1f} s (peak {fb_rss:.0f} MB; J and F̃b), "
              f"DAVIS-style peer {float(peer):.1f} s, CPU {peer_cpu:.1f} s (peak {peer_rss:.0f} MB; best F̃b only); "
              f"mean best F̃b at 100000: {mean!r} vs {float(peer_mean)!r}")


if __name__ == "__main__":
    main()
