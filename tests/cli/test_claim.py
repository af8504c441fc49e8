"""--out is claimed by one run at a time (gplace.cli.checks.claim_output)."""

import subprocess
import sys

import pytest

from gplace.cli.checks import claim_output
from gplace.errors import ConfigError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def test_a_second_claim_of_a_folder_is_refused_until_the_first_ends(tmp_path):
    out = tmp_path / "out"
    first = claim_output(out)
    with pytest.raises(ConfigError, match="another gplace run is writing"):
        claim_output(tmp_path / "." / "out")  # the same folder, spelt otherwise
    other = claim_output(tmp_path / "other")  # another folder is free
    first.close()
    claim_output(out).close()
    other.close()
    assert not out.exists()  # a claim writes nothing


def test_a_killed_run_leaves_the_folder_free(tmp_path):
    code = ("import sys, os; from pathlib import Path; from gplace.cli.checks import "
            "claim_output; c = claim_output(Path(sys.argv[1])); print('held', flush=True); "
            "os.kill(os.getpid(), 9)")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True,
                       text=True)
    assert p.stdout.strip() == "held" and p.returncode == -9
    claim_output(tmp_path / "out").close()


def test_place_into_a_folder_another_run_holds_is_one_line_and_exit_2(tmp_path):
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from gplace.cli."
         "checks import claim_output; c = claim_output(Path(sys.argv[1])); print('held', "
         "flush=True); time.sleep(60)", str(tmp_path / "out")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = subprocess.run([sys.executable, "-m", "gplace", "place",
                            str(root / "gplace" / "examples" / "small_resnet.pb"), "--out",
                            str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()
        holder.wait()
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("gplace place: error: --out") and "another gplace run" in lines[0]
