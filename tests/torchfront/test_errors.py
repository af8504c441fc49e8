"""Input gplace cannot import fails with one GraphError line; the CLI exits 2 with it."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest
import torch
import torch.nn.functional as F

import gplace
from gplace.errors import GraphError


def save(module, args, path):
    torch.export.save(torch.export.export(module, args), path)
    return path


class MaskedGCN(torch.nn.Module):
    """GCNConv with its default self-loops: a boolean-mask selection, whose output size
    depends on the data; torch.export takes it, the joint graph cannot."""

    def __init__(self):
        super().__init__()
        from torch_geometric.nn import GCNConv
        self.conv = GCNConv(8, 4)

    def forward(self, x, edge_index, y):
        return F.cross_entropy(self.conv(x, edge_index), y)


class TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


def test_data_dependent_shapes_are_one_graph_error(tmp_path):
    path = save(MaskedGCN(), (torch.randn(10, 8), torch.randint(0, 10, (2, 30)),
                              torch.randint(0, 4, (10,))), tmp_path / "masked.pt2")
    with pytest.raises(GraphError, match="cannot derive the backward") as e:
        gplace.load_graph(path)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_a_forward_that_is_not_a_scalar_loss_is_refused(tmp_path):
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "logits.pt2")
    with pytest.raises(GraphError, match="one scalar floating-point loss.*shape \\[2, 4\\]"):
        gplace.load_graph(path)


def test_a_pickled_payload_is_refused_without_trust(tmp_path, rewrite_pt2):
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "p.pt2")
    pickled = rewrite_pt2(path, tmp_path / "pickled.pt2", "model_weights_config.json",
                          lambda data: data.replace(b'"use_pickle": false',
                                                    b'"use_pickle": true', 1))
    with pytest.raises(GraphError, match="stored pickled.*--trust-pt2"):
        gplace.load_graph(pickled)


def test_a_member_beyond_tensors_is_refused(tmp_path, rewrite_pt2):
    import io
    import pickle
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "p.pt2")

    def an_object(_: bytes) -> bytes:
        buffer = io.BytesIO()
        torch.save({"x": pickle.loads(pickle.dumps(zipfile.ZipInfo("x")))}, buffer)
        return buffer.getvalue()
    evil = rewrite_pt2(path, tmp_path / "evil.pt2", ".pt", an_object)
    with pytest.raises(GraphError, match="holds objects beyond tensors"):
        gplace.load_graph(evil)


def test_not_an_archive_is_one_line(tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(GraphError, match="not a torch.export archive"):
        gplace.load_graph(bad)


def test_the_cli_prints_one_line_and_exits_2(tmp_path):
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "logits.pt2")
    out = subprocess.run([sys.executable, "-m", "gplace", "inspect", str(path)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("gplace")]
    assert len(lines) == 1 and "scalar floating-point loss" in lines[0]
    assert "Traceback" not in out.stderr


@torch.library.custom_op("gplace_test::triple", mutates_args=())
def triple(x: torch.Tensor) -> torch.Tensor:
    return x * 3


triple.register_fake(lambda x: torch.empty_like(x))
triple.register_autograd(lambda ctx, grad: grad * 3)


class CustomOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return F.cross_entropy(triple(self.fc(x)), y)


def test_a_custom_op_another_process_has_not_registered_is_named(tmp_path):
    """The CLI's process has not imported the op's library: its one line names the op, not
    torch's "check the warnings above" (warnings it does not show). Its own cache folder: a
    graph imported before, by a process that had the op, would be read from the cache."""
    import os
    path = save(CustomOp(), (torch.randn(2, 4), torch.tensor([0, 2])), tmp_path / "custom.pt2")
    out = subprocess.run([sys.executable, "-m", "gplace", "inspect", str(path)],
                         capture_output=True, text=True, timeout=180,
                         env={**os.environ, "GPLACE_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1
    assert "it calls torch.ops.gplace_test.triple, a custom op this process has not " \
        "registered" in out.stderr
    assert gplace.load_graph(path).num_ops > 0  # here it is registered: it imports


def test_torch_options_for_a_tensorflow_model_are_refused(capsys):
    from gplace.cli import main
    assert main(["inspect", "gplace/examples/small_resnet.pb", "--optimizer", "adam"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "apply to PyTorch (.pt2) models only" in err[0]
    assert main(["inspect", "gplace/examples/torch/cnn.pt2", "--optimizer", " "]) == 2
    assert "--optimizer is empty" in capsys.readouterr().err  # not sgd in silence


def test_the_cli_inspects_a_pt2_with_its_optimizer(pt2, capsys):
    import json
    from gplace.cli import main
    assert main(["inspect", str(pt2("gnn")), "--optimizer", "adam", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["import"]["optimizer"] == "adam"
    assert summary["top_op_types"]["ResourceApplyAdam"] == 4


class DictBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, batch):
        return (self.fc(batch["x"]).squeeze(-1) - batch["y"]).square().mean()


class NoParameters(torch.nn.Module):
    def forward(self, x):
        return x.square().mean()


class LossInADict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x):
        return {"loss": self.fc(x).square().mean()}


def test_a_batch_that_is_not_positional_tensors_is_one_line(tmp_path):
    path = save(DictBatch(), ({"x": torch.randn(3, 4), "y": torch.randn(3)},),
                tmp_path / "dict.pt2")
    with pytest.raises(GraphError, match="argument 0 of the forward is of type dict"):
        gplace.load_graph(path)


def test_a_program_with_nothing_to_train_is_one_line(tmp_path):
    path = save(NoParameters(), (torch.randn(3, 4),), tmp_path / "none.pt2")
    with pytest.raises(GraphError, match="no parameter .* takes a gradient"):
        gplace.load_graph(path)


def test_a_loss_returned_in_a_dict_or_a_one_tuple_is_the_loss(tmp_path):
    """The Hugging Face habit ({"loss": loss}) and (loss,): one scalar leaf, taken as it."""
    path = save(LossInADict(), (torch.randn(3, 4),), tmp_path / "dictloss.pt2")
    graph = gplace.load_graph(path)
    assert any(n.startswith("optimizer/") or "fc.weight" in n for n in graph.names.tolist())


def _with_member(path, out, name, data, replace=None):
    """A copy of the archive at ``path`` with the member ``name`` added, or replacing the
    member whose name ends with ``replace``."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        prefix = src.namelist()[0].split("/")[0]
        for info in src.infolist():
            if not (replace and info.filename.endswith(replace)):
                dst.writestr(info, src.read(info.filename))
        dst.writestr(f"{prefix}/{name}", data)
    return out


def test_compiled_code_in_an_archive_is_refused_without_trust(tmp_path):
    """torch.export.load extracts and opens an AOTInductor shared library: code, refused."""
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "p.pt2")
    aoti = _with_member(path, tmp_path / "aoti.pt2", "data/aotinductor/model/model.so",
                        b"\x7fELF")
    with pytest.raises(GraphError, match="model.so.*compiled code or pickled objects"):
        gplace.load_graph(aoti)


def test_an_opaque_constant_is_refused_without_trust(tmp_path):
    """A constant stored as an opaque object is unpickled by torch.export.load."""
    import json
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "p.pt2")
    config = {"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False,
                                  "use_pickle": False}}}
    evil = _with_member(path, tmp_path / "opaque.pt2",
                        "data/constants/model_constants_config.json",
                        json.dumps(config), replace="model_constants_config.json")
    with pytest.raises(GraphError, match="'evil' is stored pickled or as an object"):
        gplace.load_graph(evil)


def test_a_size_expression_that_is_not_arithmetic_is_refused(tmp_path, rewrite_pt2):
    """torch.export.load evaluates every expr_str with sympy.sympify, which runs Python."""
    import json
    program = torch.export.export(TwoOutputs(), (torch.randn(2, 4),),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    path = tmp_path / "dynamic.pt2"
    torch.export.save(program, path)
    # a dynamic batch's expressions (Symbol('s0', ...)) are taken
    from gplace.torchfront.program import check_archive
    check_archive(path)
    def inject(data: bytes) -> bytes:
        text = data.decode()
        start = text.index('"expr_str": "') + len('"expr_str": "')
        end = text.index('"', start)
        return (text[:start] + "__import__('os').getcwd()" + text[end:]).encode()
    evil = rewrite_pt2(path, tmp_path / "evil.pt2", "models/model.json", inject)
    with pytest.raises(GraphError, match="size expression .* is not arithmetic"):
        gplace.load_graph(evil)


def test_a_member_named_twice_is_refused(tmp_path):
    """Python's zipfile reads the last copy of a name, torch's reader may read the first."""
    path = save(TwoOutputs(), (torch.randn(2, 4),), tmp_path / "p.pt2")
    twice = tmp_path / "twice.pt2"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(twice, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info.filename))
        first = src.infolist()[0]
        dst.writestr(first.filename.upper(), src.read(first.filename))
    with pytest.raises(GraphError, match="names a member twice"):
        gplace.load_graph(twice)


def test_extra_files_are_taken(tmp_path):
    path = tmp_path / "extra.pt2"
    torch.export.save(torch.export.export(TwoOutputs(), (torch.randn(2, 4),)), path,
                      extra_files={"notes/readme.txt": "hello"})
    from gplace.torchfront.program import check_archive
    check_archive(path)
