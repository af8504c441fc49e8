"""Placers by name (DESIGN.md, "Placers"): ``get_placer(name, seed=...).place(problem,
measurer, budget)``. Importing this package registers every placer module below."""

from gplace.placers import heuristics, optimal, post_table, search  # noqa: F401  (registration)
from gplace.measure import Measurement, Measurer
from gplace.placers.base import REGISTRY, History, PlaceResult, Placer, Tracker, get_placer, register
from gplace.sim.measurer import SimMeasurer

__all__ = ["REGISTRY", "History", "Measurement", "Measurer", "PlaceResult", "Placer",
           "SimMeasurer", "Tracker", "get_placer", "register"]
