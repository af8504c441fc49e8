"""Placers by name (DESIGN.md, "Placers"): ``get_placer(name, seed=...).place(problem,
measurer, budget)``. Importing this package registers every placer module below."""

from gplace.placers import post_table, search  # noqa: F401  (registration)
from gplace.placers.base import (REGISTRY, History, Measurement, Measurer, PlaceResult, Placer,
                                 SimMeasurer, Tracker, get_placer, register)

try:  # the heuristics module is written alongside; register it when present
    from gplace.placers import heuristics  # noqa: F401
except ImportError:
    pass

__all__ = ["REGISTRY", "History", "Measurement", "Measurer", "PlaceResult", "Placer",
           "SimMeasurer", "Tracker", "get_placer", "register"]
