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


def test_the_first_update_at_those_weights_gets_their_graph_once():
    torch.manual_seed(0)
    policy, f = GNNPolicy(hidden_channels=16, lean=True), tensors(problem())
    with torch.no_grad():
        detached = policy(f)
    assert not detached.s.requires_grad
    first, second = policy(f), policy(f)  # the kept graph, then a fresh one
    assert first.s.requires_grad and second.s.requires_grad
    assert torch.equal(first.s, detached.s) and torch.equal(second.s, detached.s)
    grads = []
    for scores in (first, second):
        policy.zero_grad()
        (scores.s.square().sum() + scores.w.sum()).backward()
        grads.append([p.grad.clone() for p in policy.parameters()])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_inference_mode_and_frozen_weights_keep_no_graph():
    torch.manual_seed(0)
    policy, f = GNNPolicy(hidden_channels=16, lean=True), tensors(problem())
    with torch.inference_mode():
        policy(f)
    assert policy._last[1] is None
    policy.requires_grad_(False)
    with torch.no_grad():
        policy(FeatureTensors(*f))
    assert policy._last[1] is None


def test_weights_changed_and_restored_in_place_are_computed_again():
    """A swap and back (as an EMA validation does) leaves equal values but a kept graph whose
    saved weights were overwritten: it is not handed out."""
    torch.manual_seed(0)
    policy, f = GNNPolicy(hidden_channels=16, lean=True), tensors(problem())
    with torch.no_grad():
        before = policy(f)
        saved = [p.clone() for p in policy.parameters()]
        for p, q in zip(policy.parameters(), saved):
            p.add_(1.0)
            p.copy_(q)
        assert policy(f) is not before
    scores = policy(f)
    (scores.s.sum() + scores.w.sum()).backward()  # no stale graph: no in-place error
