"""Fixtures: the example programs exported into a temporary folder once per session, and their
imported steps (SGD) cached, so each test pays for an import at most once."""

from __future__ import annotations

import pytest

from gplace.examples.torch.build import export_example



@pytest.fixture(scope="session")
def pt2_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pt2")


@pytest.fixture(scope="session")
def pt2(pt2_dir):
    """name -> path of the example's .pt2, exported on first use."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = export_example(name, pt2_dir)
        return cache[name]
    return get


@pytest.fixture(scope="session")
def step_of(pt2):
    """(name, optimizer) -> (StepGraph, OpGraph), imported on first use."""
    from gplace.torchfront import load_step
    from gplace.torchfront.opgraph import to_op_graph
    cache: dict = {}

    def get(name: str, optimizer: str = "sgd"):
        key = (name, optimizer)
        if key not in cache:
            step = load_step(pt2(name), optimizer)
            cache[key] = step, to_op_graph(step, name)
        return cache[key]
    return get


