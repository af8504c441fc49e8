"""GNNPolicy's forward without gradients returns the last scores again only for the same
features object and the same weights; anything else computes them afresh."""

import copy

import torch

from gplace.gnn.policy import FeatureTensors, GNNPolicy
from tests.gnn.test_policy import problem, tensors


def fresh(policy: GNNPolicy, f: FeatureTensors):
    with torch.no_grad():
        return copy.deepcopy(policy)(f)  # a copy holds no cached scores


def test_the_same_features_and_weights_return_the_same_scores():
    torch.manual_seed(0)
    policy, f = GNNPolicy(hidden_channels=16, lean=True), tensors(problem())
    with torch.no_grad():
        first = policy(f)
        assert policy(f) is first
        assert policy(FeatureTensors(*f)) is not first  # another features object


def test_a_weight_update_computes_them_again():
    torch.manual_seed(0)
    policy, f = GNNPolicy(hidden_channels=16, lean=True), tensors(problem())
    opt = torch.optim.Adam(policy.parameters(), lr=0.1)
    with torch.no_grad():
        before = policy(f)
    scores = policy(f)  # with gradients: never from the cache
    assert scores.s.requires_grad and scores is not before
    (scores.s.square().sum() + scores.w.square().sum()).backward()
    opt.step()
    with torch.no_grad():
        after = policy(f)
    assert after is not before and not torch.equal(after.w, before.w)
    assert torch.equal(after.s, fresh(policy, f).s) and torch.equal(after.w, fresh(policy, f).w)
