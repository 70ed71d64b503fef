"""The package's layout reads as its data flow: no module imports from a layer above its own, and none grows past
~400 lines (DESIGN.md: io → store → geometry → match → engine → metrics → evaluation → sql / api / cli)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "evalengine"
# layer of each top-level module or package; a module may import from its own layer and the ones below
LAYERS = {
    "errors": 0, "arrow": 0, "schema": 0, "progress": 0, "numeric": 0, "kernel_cache": 0, "kernel_loading": 0,
    "io": 1, "baselines": 1,
    "store": 2,
    "geometry": 3,
    "match": 4,
    "engine": 5,
    "metrics": 6,
    "evaluation": 7,
    "sql": 8,
    "api": 9, "plots": 9,
    "cli": 10, "compat": 10,
}


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def _layer(parts) -> int:
    return LAYERS[parts[0]]


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalengine"):
            names = node.module.split(".")[1:] or [alias.name for alias in node.names]
            yield from ([names] if node.module != "evalengine" else [[alias.name] for alias in node.names])
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".")[1:] for alias in node.names if alias.name.startswith("evalengine."))


def test_no_module_imports_from_a_higher_layer():
    upward = []
    for path in _modules():
        own = path.relative_to(PACKAGE).with_suffix("").parts
        for imported in _imports(path):
            if imported and imported[0] in LAYERS and _layer(imported) > _layer(own):
                upward.append(f"{'/'.join(own)} imports evalengine.{'.'.join(imported)}")
    assert upward == []


def test_every_module_has_a_layer_and_stays_small():
    for path in _modules():
        assert path.relative_to(PACKAGE).parts[0].removesuffix(".py") in LAYERS | {"data": 0}, path
        assert len(path.read_text().splitlines()) <= 400, path


def test_every_package_ships():
    """pyproject lists every package (a wheel built from it would otherwise lack one: editable installs hide that)."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set()
