import numpy as np
import pytest

from gplace.errors import GraphError
from gplace.graph import OpGraph


def diamond():
    return OpGraph.from_lists([1, 2, 3, 4], [10, 20, 30, 40],
                              [(0, 1), (0, 2), (1, 3), (2, 3)], control_edges=[(1, 2)])


def test_counts_and_summary():
    g = diamond().validate()
    s = g.summary()
    assert (s["ops"], s["edges"], s["control_edges"], s["groups"]) == (4, 4, 1, 4)
    assert s["flops"] == 10.0
    assert g.edge_bytes.tolist() == [10, 10, 20, 30]
    assert repr(g) == "OpGraph('graph', 4 ops, 4 edges, 4 groups, 10 FLOPs)"


def test_topo_order_respects_control_edges():
    assert diamond().topo_order().tolist() == [0, 1, 2, 3]


def test_cycle_is_named():
    g = OpGraph.from_lists([1, 1, 1], [4, 4, 4], [(0, 1), (1, 2), (2, 1)], names=["a", "b", "c"])
    with pytest.raises(GraphError, match="cycle that is not a TF loop: .*b.*c"):
        g.validate()


def test_back_edges_are_dropped_from_the_scheduling_view():
    g = OpGraph.from_lists([1, 1], [4, 4], [(0, 1), (1, 0)])
    g = g.replace(edge_back=np.array([False, True]))
    assert g.validate().topo_order().tolist() == [0, 1]


def test_validate_names_the_bad_field():
    g = diamond().replace(flops=np.array([1.0, -2.0, 3.0, 4.0]))
    with pytest.raises(GraphError, match=r"flops\[1\]"):
        g.validate()


def test_save_load_round_trip(tmp_path):
    g = diamond()
    g.save(tmp_path / "g.npz")
    h = OpGraph.load(tmp_path / "g.npz")
    assert h.summary() == g.summary()
    assert np.array_equal(h.ctrl_src, g.ctrl_src) and h.meta == g.meta


def test_load_rejects_other_files(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(GraphError, match="not a gplace graph file"):
        OpGraph.load(tmp_path / "x.npz")


def test_output_bytes_with_ops_without_outputs_at_the_end():
    g = diamond()
    g = g.replace(out_ptr=np.array([0, 1, 2, 3, 3]), out_dtype=g.out_dtype[:3],
                  out_bytes=g.out_bytes[:3], out_rank=g.out_rank[:3], dim_ptr=g.dim_ptr[:4],
                  out_dims=g.out_dims[:3])
    assert g.output_bytes.tolist() == [10, 20, 30, 0]
