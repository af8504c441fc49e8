"""The GNN policy: any device count, an untrained net that is HEFT, checkpoints that round-trip
and refuse bad files."""

import numpy as np
import pytest
import torch

from gplace.cluster import load_cluster
from gplace.errors import ConfigError
from gplace.gnn.features import LOOKAHEAD, neighbour_transfer_s, problem_features
from gplace.gnn.learn import ProblemState, greedy
from gplace.gnn.policy import FeatureTensors, GNNPolicy, upgraded
from gplace.gnn.schedule import DYN_FEATURES
from gplace.graph import OpGraph
from gplace.problem import PlacementProblem


def problem(cluster="post-2gpu"):
    edges = [(i, i + 1) for i in range(9)] + [(0, 5), (2, 8)]
    g = OpGraph.from_lists([1e9 * (1 + i % 3) for i in range(10)], [4096] * 10, edges,
                           group=[0, 0, 1, 2, 3, 4, 5, 6, 7, 7], param_bytes=[1 << 20] * 10)
    return PlacementProblem.build(g, load_cluster(cluster))


def tensors(p):
    return FeatureTensors.from_numpy(problem_features(p))


def test_features_are_finite_and_shaped():
    p = problem()
    f = problem_features(p)
    assert f.unit_x.shape[0] == p.num_units == f.pair_x.shape[0]
    assert f.pair_x.shape[1] == p.num_devices == f.device_x.shape[0]
    assert f.edge_index.shape[0] == 2 and f.edge_index.shape[1] == f.edge_attr.shape[0]
    for a in f:
        assert np.isfinite(a).all()
    # the best-device flag marks at least one device per unit
    assert (f.pair_x[:, :, 3].max(1) == 1).all()


def test_one_network_serves_any_number_of_devices():
    torch.manual_seed(0)
    policy = GNNPolicy(hidden_channels=16, num_layers=2)
    for cluster, devices in (("post-2gpu", 3), ("post-4gpu", 5), ("hdp-8gpu", 9)):
        p = problem(cluster)
        scores = policy(tensors(p))
        assert scores.s.shape == (p.num_units, devices)
        assert scores.w.shape == (p.num_units, DYN_FEATURES)


def test_an_untrained_network_schedules_by_the_units_finish_time():
    """Zero-initialized heads, w0 on the unit finish-time feature and look0 on the lookahead:
    the greedy rollout is the list scheduler that takes, for each unit, the device where all
    of its work ends first, less the transfers to its neighbours' fastest devices."""
    from gplace.gnn.schedule import GREEDY, build_sched, rollout
    torch.manual_seed(3)
    for cluster in ("post-2gpu", "hetero"):
        p = problem(cluster)
        w = np.zeros((p.num_units, DYN_FEATURES))
        w[:, 7] = -1.0
        s = -10.0 * problem_features(p).pair_x[..., LOOKAHEAD].astype(np.float64)
        rule = rollout(build_sched(p), s, w, GREEDY)
        net = greedy(GNNPolicy(hidden_channels=16), ProblemState(p))
        assert np.array_equal(net, rule.placements[0])


def test_checkpoint_round_trip_gives_the_same_placement(tmp_path):
    torch.manual_seed(1)
    policy = GNNPolicy(hidden_channels=24, num_layers=2).eval()
    with torch.no_grad():  # move away from the HEFT start so that the check means something
        for q in policy.parameters():
            q.add_(0.3 * torch.randn_like(q))
    p = problem("post-4gpu")
    f = tensors(p)
    policy.save(tmp_path / "p.pt", meta={"steps": 7})
    loaded, meta = GNNPolicy.load(tmp_path / "p.pt")
    assert meta == {"steps": 7} and loaded.kwargs == policy.kwargs
    assert torch.equal(loaded(f).s, policy(f).s) and torch.equal(loaded(f).w, policy(f).w)
    state = ProblemState(p)
    assert np.array_equal(greedy(loaded, state), greedy(policy, state))


@pytest.mark.parametrize("content,message", [
    (b"\x00garbage" * 10, "not a PyTorch policy checkpoint"),
    (b"", "the policy checkpoint is empty"),
    (None, "a file of another kind"),
    ("version", "format version 99"),
])
def test_bad_checkpoints_get_clear_errors(tmp_path, content, message):
    path = tmp_path / "bad.pt"
    if content is None:
        torch.save({"weights": torch.zeros(2)}, path)
    elif content == "version":
        GNNPolicy(hidden_channels=8).save(path)
        record = torch.load(path, weights_only=True)
        record["format_version"] = 99
        torch.save(record, path)
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        GNNPolicy.load(path)


def test_the_order_is_an_argument_of_dispatch_policies_only(tmp_path):
    """Rank-order checkpoints (the shipped one) keep their arguments; an unknown order is a
    one-line error."""
    assert "order" not in GNNPolicy().kwargs and GNNPolicy().order == "rank"
    assert GNNPolicy(order="dispatch").kwargs["order"] == "dispatch"
    with pytest.raises(ConfigError, match="order 'fifo'"):
        GNNPolicy(order="fifo")
    carried = GNNPolicy(order="dispatch")
    carried.set_order("rank")  # the same weights, the other order: the arguments follow
    assert carried.order == "rank" and "order" not in carried.kwargs


def test_truncated_checkpoint(tmp_path):
    GNNPolicy(hidden_channels=8).save(tmp_path / "p.pt")
    data = (tmp_path / "p.pt").read_bytes()
    (tmp_path / "p.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match="not a PyTorch policy checkpoint"):
        GNNPolicy.load(tmp_path / "p.pt")


def test_identical_gpus_get_positions():
    from gplace.gnn.features import twin_positions
    p = problem("post-4gpu")              # cpu + 4 identical K80s
    position, twins = twin_positions(p)
    assert position.tolist() == [0, 0, 1, 2, 3] and twins.tolist() == [1, 4, 4, 4, 4]
    f = problem_features(p)
    assert not np.array_equal(f.device_x[1], f.device_x[2])  # twins are told apart


def test_pyg_leaves_no_generated_module_in_the_temp_folder():
    import os
    import sys
    GNNPolicy(hidden_channels=8, num_layers=1)  # PyG's GINEConv: renders its propagate module
    files = [m.__file__ for n, m in sys.modules.items()
             if n.startswith("torch_geometric.") and "_propagate" in n]
    assert files and not any(os.path.exists(f) for f in files)


def test_the_lookahead_charges_the_cheapest_transfer_to_any_fastest_device_of_a_neighbour():
    """A heavy op (fastest on either of two identical GPUs) feeds a light one: the light one's
    transfer is free on either GPU (a tie is no reason to pin the neighbour to the first) and
    costs a latency and its bytes over the link from the CPU."""
    g = OpGraph.from_lists([1e12, 1e3], [8_000_000, 4], [(0, 1)])
    p = PlacementProblem.build(g, load_cluster("post-2gpu"))  # cpu, gpu0, gpu1 (k80s)
    t = neighbour_transfer_s(p)
    links = p.cluster.link_table()
    assert t[1, 1] == t[1, 2] == 0.0
    assert t[1, 0] == pytest.approx(links.latency_s[0, 1] + 8e6 / links.bandwidth[0, 1])
    f = problem_features(p).pair_x[..., LOOKAHEAD]
    assert f[1, 0] > 0 and f[1, 1] == f[1, 2] == 0.0


def test_a_checkpoint_from_before_the_lookahead_places_as_it_did():
    """upgraded(): an older state_dict (no look0, four pair features) loads with the lookahead
    weighed 0, so the scores do not depend on it."""
    torch.manual_seed(0)
    now = GNNPolicy(hidden_channels=8, num_layers=1).eval()
    old = {k: v for k, v in now.state_dict().items() if k != "look0"}
    old["pair_head.0.weight"] = old["pair_head.0.weight"][:, :-1]
    again = GNNPolicy(hidden_channels=8, num_layers=1).eval()
    again.load_state_dict(upgraded(old))
    assert float(again.look0.detach()) == 0.0
    f = problem_features(problem("hetero"))
    moved = f._replace(pair_x=f.pair_x.copy())
    moved.pair_x[..., LOOKAHEAD] += np.random.default_rng(0).random(moved.pair_x.shape[:2])
    with torch.no_grad():
        a = again(FeatureTensors.from_numpy(f)).s
        b = again(FeatureTensors.from_numpy(moved)).s
        assert torch.equal(a, b)
        assert not torch.equal(now(FeatureTensors.from_numpy(f)).s,
                               now(FeatureTensors.from_numpy(moved)).s)
    current = now.state_dict()
    assert upgraded(current) is current  # a state_dict with the lookahead is left as it is
