"""PASCAL VOC test inputs written from plain data: an ``Annotations/`` folder of XML files and a folder of devkit
result files, and the Padilla tools' text format converted to them."""

from pathlib import Path


def write_annotations(folder: Path, images: dict, sizes: dict | None = None) -> Path:
    """``images``: ``{stem: [(name, x1, y1, x2, y2, difficult), …]}`` as ``<stem>.xml`` files (corners written with
    ``repr``: integers stay integers)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, objects in images.items():
        width, height = (sizes or {}).get(stem, (500, 375))
        parts = [f"<annotation>\n  <filename>{stem}.jpg</filename>\n  <size><width>{width}</width>"
                 f"<height>{height}</height><depth>3</depth></size>\n"]
        for name, x1, y1, x2, y2, difficult in objects:
            parts.append(f"  <object>\n    <name>{name}</name>\n    <pose>Unspecified</pose>\n"
                         f"    <truncated>0</truncated>\n    <difficult>{int(difficult)}</difficult>\n"
                         f"    <bndbox><xmin>{x1!r}</xmin><ymin>{y1!r}</ymin><xmax>{x2!r}</xmax><ymax>{y2!r}</ymax>"
                         "</bndbox>\n  </object>\n")
        parts.append("</annotation>\n")
        (folder / f"{stem}.xml").write_text("".join(parts))
    return folder


def write_results(folder: Path, detections: dict, prefix: str = "comp4_det_test") -> Path:
    """``detections``: ``{class: [(stem, score, x1, y1, x2, y2), …]}`` as ``<prefix>_<class>.txt`` files, lines in
    list order."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in detections.items():
        (folder / f"{prefix}_{name}.txt").write_text("".join(" ".join([row[0], *map(repr, row[1:])]) + "\n"
                                                             for row in rows))
    return folder


def padilla_to_voc(gts: Path | None, dets: Path, out: Path, box: str = "xywh") -> tuple:
    """The Padilla tools' per-image text files (``class x y w h`` / ``class score x y w h``, or ``x1 y1 x2 y2`` with
    ``box="xyxy"``; files in name order, lines in order) as ``(Annotations folder, results folder)``. Their boxes'
    corners ``(x, y, x + w, y + h)`` are read with the devkit's +1 rule, so they are written as the devkit's
    inclusive corners unchanged. Without ``gts``, the images are those of the detection files, without objects."""
    def corners(values):
        x, y, a, b = (float(v) for v in values)
        x1, y1, x2, y2 = (x, y, x + a, y + b) if box == "xywh" else (x, y, a, b)
        return tuple(int(v) if v.is_integer() else v for v in (x1, y1, x2, y2))

    images, results = {}, {}
    for path in sorted(gts.glob("*.txt")) if gts else ():
        images[path.stem] = [(line.split()[0], *corners(line.split()[1:5]), False)
                             for line in path.read_text().splitlines() if line.strip()]
    for path in sorted(dets.glob("*.txt")):
        images.setdefault(path.stem, [])
        for line in path.read_text().splitlines():
            if line.strip():
                fields = line.split()
                results.setdefault(fields[0], []).append((path.stem, float(fields[1]), *corners(fields[2:6])))
    return write_annotations(out / "Annotations", images), write_results(out / "results", results)
