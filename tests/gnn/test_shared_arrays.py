"""The problems of one graph share their cluster-independent arrays, and sharing changes no
result: training reads them and leaves them as they were."""

import shutil
from pathlib import Path

import numpy as np
import torch

from gplace.gnn.learn import LearnConfig
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.pretrain import PretrainConfig, ProblemPool, run_pretrain
from gplace.gnn.shared_arrays import ArrayPool

EXAMPLE = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"


def test_equal_arrays_come_back_as_one_copy():
    pool = ArrayPool()
    a = np.arange(1000, dtype=np.int64)
    assert pool.get(a) is a
    assert pool.get(a.copy()) is a
    b = a.copy()
    b[-1] += 1
    assert pool.get(b) is b                                       # other contents
    assert pool.get(a.astype(np.float64)) is not a                # other dtype
    zeros = np.zeros(200)
    assert pool.get(zeros) is zeros and pool.get(-zeros) is not zeros  # equal, other bits
    f = np.asfortranarray(a.reshape(10, 100).astype(np.float64))
    c = np.ascontiguousarray(f)
    assert pool.get(f) is f and pool.get(c) is c                  # other layout
    small = np.arange(10)
    assert pool.get(small.copy()) is not pool.get(small)          # small: not looked up
    assert pool.get(3) == 3
    assert pool.kept_bytes < pool.offered_bytes


def _corpus(tmp_path) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    shutil.copy(EXAMPLE, d / "small_resnet.pb")
    return d


def _config(corpus, **kw):
    return PretrainConfig(**{**dict(
        corpus=str(corpus), clusters=("post-2gpu", "post-4gpu"), random_clusters=1,
        max_steps=3, val_every=3, problems_per_step=2, hidden_channels=16, num_layers=2,
        expert_budget=0, ema_decay=0.0, learn=LearnConfig(samples=4, ppo_epochs=2)), **kw})


def _arrays(state):
    out = [*state.numpy_features, *state.sched, *state.measurer.sim.arrays]
    return [a for a in out if isinstance(a, np.ndarray)]


def test_the_problems_of_a_graph_share_its_import_and_arrays(tmp_path):
    pool = ProblemPool(_config(_corpus(tmp_path)), "train", search=False)
    states = [pool.state(i) for i in range(len(pool))]
    assert len(states) == 3 and len({id(s.problem.graph) for s in states}) == 1
    first, other = states[0], states[2]  # post-2gpu and a random cluster
    assert other.numpy_features.unit_types is first.numpy_features.unit_types
    assert other.features.unit_types.data_ptr() == first.features.unit_types.data_ptr()
    assert other.sched.pred_op is first.sched.pred_op
    assert other.measurer.sim.arrays.cons_op is first.measurer.sim.arrays.cons_op
    assert other.numpy_features.pair_x is not first.numpy_features.pair_x  # per cluster
    assert pool.arrays.kept_bytes < 0.6 * pool.arrays.offered_bytes


def test_sharing_changes_no_result_and_training_writes_no_shared_array(tmp_path, monkeypatch):
    corpus = _corpus(tmp_path)
    snapshots = []
    real_share = ArrayPool.share

    def share_and_snapshot(self, state):
        state = real_share(self, state)
        snapshots.append((_arrays(state), [a.copy() for a in _arrays(state)]))
        return state

    monkeypatch.setattr(ArrayPool, "share", share_and_snapshot)
    shared = run_pretrain(_config(corpus), tmp_path / "shared.pt", tmp_path / "r1",
                          progress=False)
    assert snapshots and all(np.array_equal(a, b) for live, kept in snapshots
                             for a, b in zip(live, kept))
    monkeypatch.setattr(ArrayPool, "share", lambda self, state: state)
    apart = run_pretrain(_config(corpus), tmp_path / "apart.pt", tmp_path / "r2",
                         progress=False)
    sa, sb = (GNNPolicy.load(p)[0].state_dict() for p in (shared, apart))
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_what_no_problem_holds_is_freed(tmp_path):
    """The search processes drop each problem after its search: its graph and arrays go too."""
    import gc
    import weakref
    pool = ProblemPool(_config(_corpus(tmp_path)), "train", search=False)
    graph, unit_types = (weakref.ref(x) for x in (pool.state(0).problem.graph,
                                                  pool.state(0).numpy_features.unit_types))
    pool.state(1)
    pool.states.clear()
    gc.collect()
    assert graph() is None and unit_types() is None and len(pool.graphs) == 0
    again = pool.state(2)  # built anew, and shared as before
    assert again.numpy_features.unit_types is pool.state(0).numpy_features.unit_types
