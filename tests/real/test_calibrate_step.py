"""What gplace calibrate runs of a graph file: the imported step, as place --measure real and
gplace profile run it, so a TF1 graph written with its Saver is not refused for the Saver's file
ops, and a .pbtxt is profiled like a .pb."""

import pytest

from gplace.calibrate import GraphSource, _runnable, profile_pinned
from gplace.real.safety import UnsafeOpError, check_safe
from gplace.tfimport import tensorflow

from tests.importer.test_step import tf1_step


@pytest.fixture(scope="module")
def saver_step(tmp_path_factory):
    tf = tensorflow()
    folder = tmp_path_factory.mktemp("calibrate_step")
    gd = tf1_step(saver=True)
    tf.io.write_graph(gd, str(folder), "tf1.pbtxt", as_text=True)
    return gd, folder / "tf1.pbtxt"


def test_the_step_is_checked_not_the_savers_file_ops(saver_step):
    gd, path = saver_step
    with pytest.raises(UnsafeOpError):  # the whole file: SaveV2 / RestoreV2 write and read files
        check_safe(gd)
    step, fetch = _runnable(path, "tf1", allow_unsafe=False, fetch="train_op")
    kinds = {n.op for n in step.node}
    assert fetch == "train_op" and not kinds & {"SaveV2", "RestoreV2", "MergeV2Checkpoints"}


def test_the_pinned_profile_of_a_pbtxt_times_the_step(saver_step, tmp_path):
    _, path = saver_step
    profile = profile_pinned(GraphSource("tf1", path), 0, tmp_path, fetch="train_op")
    assert "train_op" in profile.op_names and "save/SaveV2" not in profile.op_names
    assert profile.step_time_s > 0 and profile.meta["pinned_core"] == 0
