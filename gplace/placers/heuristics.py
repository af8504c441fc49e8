"""The classic placement heuristics; importing this module registers them all.

Each spends no samples (``PlaceResult.samples == 0``) and is deterministic. A unit (colocation
group) is never split: list schedulers fix a unit's device with its first op, the others vote.

* ``single``: the fastest single device whose memory fits, by simulating each one
  (infeasible, smallest shortfall, when none fits).
* ``chunks``: the topological order cut into one contiguous chunk per device, sized by device
  speed in best-device time; a unit goes where most of its ops' time went.
* ``expert``: a hand placement: forward "layers" (non-gradient ops with an input) cut into
  contiguous equal-cost pipeline stages over the accelerators, counting each layer's gradient
  ops (``gradients/<op>_grad/...``, TF's tf.gradients naming) with it and putting them on its
  device; other ops join the neighbour they exchange the most bytes with; the host CPU gets only
  units that fit no accelerator.
* ``heft``: HEFT (Topcuoglu et al., IEEE TPDS 2002): upward rank with mean costs and mean
  communication, ops by decreasing rank each on its earliest-finish device (insertion-free).
* ``m-topo``: Baechi m-TOPO (Jeon et al., SoCC 2020): topological order fills accelerator after
  accelerator to an even share of the total memory need, within capacity.
* ``m-etf``: Baechi m-ETF: list scheduling of the ready (op, device) pair with the earliest
  start (transfers cost latency + bytes / bandwidth, once per TF1 loop iteration that reads
  them), only where the unit's memory fits.
* ``m-sct``: Baechi m-SCT: m-ETF plus SCT's favourite-child rule, favourites by a greedy
  matching on transfer time in place of SCT's LP.

Memory estimates and the op-level view: :mod:`gplace.placers.heuristics_view`.
"""

from gplace.placers.heuristics_list import Heft, MEtf, MSct
from gplace.placers.heuristics_static import Chunks, Expert, MTopo, SingleDevice

HEURISTICS = ("single", "expert", "chunks", "heft", "m-topo", "m-etf", "m-sct")

__all__ = ["HEURISTICS", "SingleDevice", "Chunks", "Expert", "MTopo", "Heft", "MEtf", "MSct"]
