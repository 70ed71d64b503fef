from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PACKAGE_DATA = Path(__file__).parent.parent / "evalengine" / "data"


@pytest.fixture
def data_dir() -> Path:
    return DATA
