"""The confusion heat map draws the matrix it is given, and ``plot STORE tide|confusion`` write the figures."""

import numpy as np
import pytest

from evalengine import api, plots
from evalengine.cli import main
from tests.conftest import PACKAGE_DATA

GT, DT = PACKAGE_DATA / "instances_val2014_100.json", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return api.ingest_coco(GT, DT, tmp_path_factory.mktemp("diagnosis") / "store")


@pytest.mark.parametrize("normalize", [False, True])
def test_heat_map_cells_are_the_matrix(store, normalize):
    result = store.evaluate().slice(category_ids=[1, 3, 44, 47, 62]).confusion(0.5, 0.05)
    figure = plots.confusion_heatmap(result.matrix(), result.names, normalize)
    image = figure.axes[0].get_images()[0].get_array()
    counts = result.array()
    np.testing.assert_array_equal(image.mask, counts == 0)  # empty cells are blank
    np.testing.assert_array_equal(image.data[counts > 0], result.array(normalize)[counts > 0])
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels == ["person", "car", "bottle", "cup", "chair", "background"]
    written = {t.get_text() for t in figure.axes[0].texts}
    assert (f"{result.array(True)[0, 0]:.2f}" if normalize else str(counts[0, 0])) in written
    plots.close(figure)


@pytest.mark.parametrize("kind, extra", [("tide", []), ("confusion", []),
                                         ("confusion", ["--normalize", "--score", "0.3"])])
def test_plot_commands(tmp_path, store, kind, extra):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(store.path), kind, "--out", str(out), *extra]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
