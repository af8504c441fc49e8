"""An import with TensorFlow's graph framework alone (gplace.tfimport.use_framework_only, what
the CLI's second process does) gives the OpGraph of a full TensorFlow import, without Keras."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gplace.importer import load_graph

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = [ROOT / "gplace" / "examples" / "small_resnet.pb",
          ROOT / "datasets" / "corpus" / "rnn_loop_00.pb",      # while loops
          ROOT / "datasets" / "corpus" / "nmt_2l.pb"]


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_the_framework_alone_imports_the_same_graph(path, tmp_path):
    code = ("import sys; from gplace.tfimport import use_framework_only; use_framework_only(); "
            "from gplace.importer import load_graph; "
            f"load_graph({str(path)!r}).save({str(tmp_path / 'g.npz')!r}); "
            "print(sorted(m for m in ('keras', 'tensorflow._api') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    from gplace.graph import OpGraph
    lean, full = OpGraph.load(tmp_path / "g.npz"), load_graph(path)
    for name, value in vars(full).items():
        if name == "meta":
            for m in (lean.meta, full.meta):
                m["import"].pop("seconds")
            assert json.dumps(lean.meta, sort_keys=True) == json.dumps(full.meta, sort_keys=True)
        elif isinstance(value, np.ndarray):
            assert np.array_equal(getattr(lean, name), value), name
