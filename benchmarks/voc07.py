"""The toolbox's VOC07 test annotations (shared/testdata/hosang_detection_proposals) as a COCO ground truth.

Boxes are 1-based inclusive pixels (x1, y1, x2, y2) → COCO continuous [x1 − 1, y1 − 1, x2 − x1 + 1, y2 − y1 + 1];
``difficult`` and ``truncated`` are kept as annotation fields; image ids are the VOC numbers.
"""

import argparse
import json
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "shared" / "testdata" / "hosang_detection_proposals" / \
    "voc07_test_annotations.json"


def voc07_coco(source: Path = SOURCE) -> dict:
    data = json.loads(Path(source).read_text())
    images = [{"id": int(entry["im"]), "file_name": f"{entry['im']}.jpg", "width": entry["img_size"][0],
               "height": entry["img_size"][1]} for entry in data["impos"]]
    annotations = []
    for category_id, objects in enumerate(data["per_class_pos"], start=1):
        for obj in objects:
            x1, y1, x2, y2 = obj["box"]
            w, h = x2 - x1 + 1, y2 - y1 + 1
            annotations.append({"id": len(annotations) + 1, "image_id": int(obj["im"]), "category_id": category_id,
                                "bbox": [x1 - 1, y1 - 1, w, h], "area": w * h, "iscrowd": 0,
                                "difficult": int(obj["difficult"]), "truncated": int(obj["trunc"])})
    categories = [{"id": i, "name": name} for i, name in enumerate(data["classes"], start=1)]
    return {"images": images, "annotations": annotations, "categories": categories}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    coco = voc07_coco()
    Path(args.out).write_text(json.dumps(coco))
    print(f"{args.out}: {len(coco['images'])} images, {len(coco['annotations'])} boxes")
