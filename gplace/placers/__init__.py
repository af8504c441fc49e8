"""Placers by name: ``get_placer(name, seed=...).place(problem,
measurer, budget)``. Importing this package registers the cheap heuristics; the other placers
(some import torch, seconds) register when a name is first looked up (gplace.placers.base)."""

from gplace.placers import heuristics  # noqa: F401  (registration)
from gplace.measure import Measurement, Measurer
from gplace.placers.base import REGISTRY, History, PlaceResult, Placer, Tracker, get_placer, register
from gplace.sim.measurer import SimMeasurer

__all__ = ["REGISTRY", "History", "Measurement", "Measurer", "PlaceResult", "Placer",
           "SimMeasurer", "Tracker", "get_placer", "register"]
