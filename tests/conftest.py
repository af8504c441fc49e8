import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TESTDATA = SHARED / "testdata" / "tf-grappler"


@pytest.fixture
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"{TESTDATA} is absent (it ships with the team's shared folder, not the repo)")
    return TESTDATA
