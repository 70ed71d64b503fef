from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PACKAGE_DATA = Path(__file__).parent.parent / "evalengine" / "data"
# the bundled sample: COCO val2014's first 100 images and cocoapi's fake bbox results for them
SAMPLE_GT = PACKAGE_DATA / "instances_val2014_100.json"
SAMPLE_DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture
def data_dir() -> Path:
    return DATA
