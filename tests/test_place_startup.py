"""`gplace place` starts fast and places as before: the placements and placed.pb of the example
and two corpus graphs are the ones below (a change that means to move placements updates them),
a first run (graph imported) and a second (read from the cache) write the same files byte for
byte, and the default cluster is chosen without starting TensorFlow where it would see one
device. The hashes were first
checked against the pipeline that imported TensorFlow and torch_geometric for every run (commit
6d3c614); they were made again when TF1 loops came to be simulated per iteration (commit
18cd6d0), with each shipped policy since (commits a63242c, c4b5fc6), and when zero-shot began to
hill-climb on its estimate (gplace.gnn.infer.polish), when that estimate began to queue
transfers on their links (FinetuneConfig.estimate_contention), and when ops that run no kernel
came to cost their host time (gplace.cost.host_ops) and the untrained network's rollouts to
look ahead at their transfers (gplace.gnn.features.LOOKAHEAD), with the policy trained under
those estimates."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"
CORPUS = ROOT / "datasets" / "corpus"

# (model, options) -> sha256 prefixes of the placement (op -> device) and of placed.pb
GOLDEN = {
    ("example", "--cluster post-4gpu"): ("d1bf82b41d1dd3ea", "e4e3363ce0e71c9d"),
    ("example", "--cluster post-4gpu --finetune 50 --seed 3"): ("c283090cd2870d12",
                                                                 "1f455a2315b11f2b"),
    ("lstm_lm_2l_h256", "--cluster post-4gpu --finetune 30"): ("8365228573dbcb18",
                                                               "58beceea24e08548"),
    ("nmt_2l", "--cluster hetero"): ("09b3b5f2750947c5", "89b2ef113d181fc1"),
}


def model_path(name: str) -> Path:
    return EXAMPLE if name == "example" else CORPUS / f"{name}.pb"


def digests(out: Path) -> tuple[str, str, str]:
    """sha256 prefixes of the placement (placement.json's op -> device map, which holds no
    float), of placed.pb and of the whole placement.json (its figures' last digits too)."""
    mapping = json.loads((out / "placement.json").read_text())["placement"]
    return (hashlib.sha256(json.dumps(mapping, sort_keys=True).encode()).hexdigest()[:16],
            *(hashlib.sha256((out / f).read_bytes()).hexdigest()[:16]
              for f in ("placed.pb", "placement.json")))


def place_twice(tmp_path, name, options):
    """The files of a first placement (OpGraph imported) and a second (read from the cache)."""
    env_code = (f"import os, sys; os.environ['GPLACE_CACHE_DIR'] = {str(tmp_path / 'c')!r}; "
                "from gplace.cli import main; sys.exit(main(sys.argv[1:]))")
    runs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        subprocess.run([sys.executable, "-c", env_code, "place", str(model_path(name)),
                        *options.split(), "--out", str(out), "--json"],
                       check=True, capture_output=True)
        runs.append(digests(out))
    return runs


def _case(name, options, marks=()):
    return pytest.param(name, options, marks=marks, id=f"{name} {options}")


@pytest.mark.parametrize("name,options", [
    _case("example", "--cluster post-4gpu"),
    _case("example", "--cluster post-4gpu --finetune 50 --seed 3", pytest.mark.slow),
    _case("lstm_lm_2l_h256", "--cluster post-4gpu --finetune 30", pytest.mark.slow),
    _case("nmt_2l", "--cluster hetero", pytest.mark.slow)])
def test_the_files_are_byte_identical_to_before(tmp_path, name, options):
    first, again = place_twice(tmp_path, name, options)
    assert first == again  # the same files, byte for byte
    assert first[:2] == GOLDEN[(name, options)]


def test_the_default_cluster_needs_tensorflow_only_when_it_may_see_more_than_a_cpu():
    from gplace.cluster import tf_sees_one_device
    from gplace.tfimport import tensorflow
    if tf_sees_one_device():  # the quick check, against what TensorFlow itself lists
        tf = tensorflow()
        assert len(tf.config.list_physical_devices()) == 1
