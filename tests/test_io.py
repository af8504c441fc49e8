"""gplace.io: atomic writes leave the old file or the new one, never half of one; a bad
checkpoint file gets one line that says what is wrong with it (without importing torch)."""

import os

import pytest

from gplace.errors import ConfigError
from gplace.io import atomic_write, atomic_write_bytes, atomic_write_text, read_checkpoint


def test_atomic_write_replaces_the_file_and_makes_missing_folders(tmp_path):
    path = tmp_path / "a" / "b" / "out.txt"
    atomic_write_text(path, "first")
    atomic_write_text(path, "second")
    assert path.read_text() == "second"
    assert os.listdir(path.parent) == ["out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "out.bin"
    atomic_write_bytes(path, b"old")

    def fail(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, fail, binary=True)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]


@pytest.mark.parametrize("content, message", [
    (None, r"no such policy checkpoint \(the shipped policy is .*gplace/checkpoints/policy\.pt\)"),
    (b"", r"the policy checkpoint is empty"),
    (b"not a zip archive at all", r"not a PyTorch policy checkpoint"),
])
def test_read_checkpoint_names_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "policy.pt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"^{path}: {message}"):
        read_checkpoint(path, "policy checkpoint")


def test_plain_json_writes_infinite_and_nan_floats_as_null():
    """JSON has no Infinity or NaN (JSON.parse refuses them): a step time of a placement that
    does not fit is null."""
    import json
    import numpy as np
    from gplace.io import plain_json
    text = plain_json({"t": float("inf"), "rows": [float("nan"), 1.5, (2, -float("inf"))],
                       "n": np.float64(np.inf)})
    assert text == '{"t": null, "rows": [null, 1.5, [2, null]], "n": null}'
    assert json.loads(text, parse_constant=lambda c: 1 / 0)["rows"][1] == 1.5


def test_a_pytorch_program_given_as_a_checkpoint_is_named(tmp_path):
    import zipfile
    path = tmp_path / "step.pt2"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("step/models/model.json", "{}")
    with pytest.raises(ConfigError, match=r"a torch.export program \(.pt2\), not a policy "
                                          r"checkpoint$"):
        read_checkpoint(path, "policy checkpoint")
