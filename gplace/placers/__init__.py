"""Placers by name (DESIGN.md, "Placers"): ``get_placer(name, **config).place(problem,
measurer, budget)``. Importing this package registers every placer module below."""

from gplace.placers.base import (REGISTRY, History, Measurement, Measurer, PlaceResult, Placer,
                                 SimMeasurer, Tracker, get_placer, register)

__all__ = ["REGISTRY", "History", "Measurement", "Measurer", "PlaceResult", "Placer",
           "SimMeasurer", "Tracker", "get_placer", "register"]
