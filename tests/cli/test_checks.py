"""The argument checks that run before TensorFlow and torch are imported: each bad value gets
one line naming the flag."""

import argparse
import os
from pathlib import Path

import pytest

from gplace.cli import checks
from gplace.errors import ConfigError, GplaceError


@pytest.mark.parametrize("text", ["0", "4294967295"])
def test_seed_in_range(text):
    assert checks.seed(text) == int(text)


@pytest.mark.parametrize("text, message", [("-1", "out of range"), ("4294967296", "out of range"),
                                           ("1.5", "not an integer")])
def test_seed_out_of_range_or_not_an_integer(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        checks.seed(text)


def test_output_dir_may_be_created_but_not_be_a_file(tmp_path):
    assert checks.output_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checked, not created
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match=r"^--out .*f: exists and is not a folder"):
        checks.output_dir(tmp_path / "f")
    with pytest.raises(ConfigError, match=r"is a file, not a folder"):
        checks.output_dir(tmp_path / "f" / "sub")


def test_output_file_is_not_a_folder(tmp_path):
    assert checks.output_file(tmp_path / "policy.pt") == tmp_path / "policy.pt"
    with pytest.raises(ConfigError, match=r"^--out .*: is a folder; give a file name"):
        checks.output_file(tmp_path)


def test_unknown_cluster_lists_the_presets():
    assert checks.cluster_name(None) is None and checks.cluster_name("local") == "local"
    assert checks.cluster_name("post-2gpu") == "post-2gpu"
    with pytest.raises(ConfigError, match="post-4gpu"):
        checks.cluster_name("no-such-cluster")


def test_missing_model_names_the_file(tmp_path):
    with pytest.raises(GplaceError, match=r"missing\.pb: no such file"):
        checks.model_path(tmp_path / "missing.pb")


def test_calibrate_finds_corpus_names_in_the_clone_around_the_working_directory(tmp_path):
    from gplace.cli.calibrate_cmd import clone_root, resolve_graph
    here = Path(__file__).resolve().parents[2]
    assert clone_root(here / "gplace" / "cli") == here
    assert clone_root(tmp_path) is None
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)  # outside any clone: a name cannot be resolved, a path can
        with pytest.raises(ConfigError, match="need a gplace clone"):
            resolve_graph("quick_mlp", tmp_path)
        (tmp_path / "g.pb").write_bytes(b"")
        assert resolve_graph(str(tmp_path / "g.pb"), tmp_path)[0] == "g"
    finally:
        os.chdir(cwd)


def test_calibrate_writes_outside_the_committed_page_by_default():
    from gplace.cli import build_parser
    args = build_parser().parse_args(["calibrate", "--cluster", "local-procs"])
    assert Path(args.out).name != "calibration"
