"""Placers by name (DESIGN.md, "Placers"): ``get_placer(name, seed=...).place(problem,
measurer, budget)``. Importing this package registers every placer module below."""

from gplace.placers import heuristics, post_table, search  # noqa: F401  (registration)
from gplace.placers.base import (REGISTRY, History, Measurement, Measurer, PlaceResult, Placer,
                                 SimMeasurer, Tracker, get_placer, register)

__all__ = ["REGISTRY", "History", "Measurement", "Measurer", "PlaceResult", "Placer",
           "SimMeasurer", "Tracker", "get_placer", "register"]
