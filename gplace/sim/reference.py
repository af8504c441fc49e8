"""The reference simulator: a plain Python event loop, written to be obviously right.

Semantics; :mod:`gplace.sim.fast` must give the same floats:

* Tasks are ops and transfers, taken from one heap in order of (ready time, key). An op's key
  is its topological rank (``OpGraph.topo_order``); a transfer of output ``j`` to device ``d``
  has key ``ops + j * devices + d``. Keys are unique, so the order is total.
* Taking an op: it starts on the lane of its device that frees first (lowest lane on ties) at
  max(ready, lane free) and ends ``cost`` later. Ops leave the heap in nondecreasing ready time
  (a task's successors become ready no earlier than it ends), so this is exactly a device that
  serves its ready ops first-ready-first-served, ties by topological rank.
* When an op ends, each of its outputs is sent once to every other device that consumes it;
  the transfer is ready when the op ends. Taking a transfer: its channel (one per ordered pair,
  or a shared bus, see :mod:`gplace.cluster`) carries it from max(ready, channel free) for
  bytes / bandwidth, FIFO by ready time; it arrives ``latency`` after that. An output read
  inside a TF1 loop is sent once per iteration (``cost.transfer_repeats``: r sends), and its
  transfer stands for all of them: r times the channel time, the latency and the receive CPU.
* Where the link charges the receiver CPU (``Link.recv_cpu_s``, ``recv_cpu_s_per_byte``), an
  arrived transfer is then a receive task, ready at its arrival, with key
  ``ops + outputs * devices + j * devices + d``: it takes the receiving device's lane that frees
  first, as an op does, for ``recv_cpu_s + recv_cpu_s_per_byte * bytes``, and the tensor is
  usable when it ends (its memory is held from the arrival). Where that time is 0 (no receive
  cost, or a per-byte cost only and an empty tensor) the arrival readies the consumers
  directly.
* A data input is available at the producer's end (same device) or at the transfer's arrival;
  a control input at the producer's end, plus the link latency across devices (no bytes, no
  channel; once per run of the successor, ``OpCosts.runs``). An op is ready when its last input is available.
* Memory per device: parameters of its ops throughout; each output from its op's start until
  the last of: the op's end, its local consumers' ends, its transfers' arrivals; each received
  tensor from arrival until its last consumer there ends; scratch (temp) bytes while the op
  runs. At equal times frees come before allocations. peak > memory_bytes is an OOM.
"""

from __future__ import annotations

import heapq

import numpy as np

from gplace.cost import transfer_repeats
from gplace.problem import PlacementProblem
from gplace.sim.records import SimResult, Transfers


def simulate_reference(problem: PlacementProblem, placement: np.ndarray) -> SimResult:
    """Simulates one step of the (units,) ``placement``."""
    return simulate_ops_reference(problem, problem.expand(placement))


def simulate_ops_reference(problem: PlacementProblem, op_device: np.ndarray) -> SimResult:
    """Simulates one step with ``op_device[o]`` the device of op ``o``."""
    g, cluster = problem.graph, problem.cluster
    n, nd = g.num_ops, cluster.num_devices
    dev = [int(x) for x in op_device]
    cost = problem.costs.time_s
    links = cluster.link_table()
    rank = {int(op): r for r, op in enumerate(g.topo_order())}
    out_owner = np.repeat(np.arange(n), np.diff(g.out_ptr))
    n_out = int(g.out_ptr[-1]) if n else 0
    recv_base = n + n_out * nd  # receive tasks' keys start here
    repeat = transfer_repeats(g, problem.costs.runs)
    runs = np.ones(n) if problem.costs.runs is None else problem.costs.runs.astype(np.float64)

    consumers, ctrl_succ, pending = forward_edges(g)

    ready = [0.0] * n
    heap: list[tuple[float, int]] = []
    for o in range(n):
        if pending[o] == 0:
            heapq.heappush(heap, (0.0, rank[o]))
    op_of_rank = {r: o for o, r in rank.items()}
    lane_free = [[0.0] * cluster.devices[d].lanes for d in range(nd)]
    channel_free = [0.0] * links.num_channels
    start, end = [0.0] * n, [0.0] * n
    busy = [0.0] * nd
    transfers: list[tuple] = []
    sent: set[tuple[int, int]] = set()

    def input_available(op: int, t: float) -> None:
        ready[op] = max(ready[op], t)
        pending[op] -= 1
        if pending[op] == 0:
            heapq.heappush(heap, (ready[op], rank[op]))

    done = 0
    while heap:
        t, key = heapq.heappop(heap)
        if key < n:  # an op
            o = op_of_rank[key]
            d = dev[o]
            start[o], end[o] = _take_lane(lane_free[d], t, cost[o, d])
            busy[d] += cost[o, d]
            done += 1
            for j in range(int(g.out_ptr[o]), int(g.out_ptr[o + 1])):
                for c in consumers.get(j, []):
                    if dev[c] == d:
                        input_available(c, end[o])
                    elif (j, dev[c]) not in sent:
                        sent.add((j, dev[c]))
                        heapq.heappush(heap, (end[o], n + j * nd + dev[c]))
            for c in ctrl_succ.get(o, []):
                input_available(c, end[o] if dev[c] == d
                                else end[o] + links.latency_s[d, dev[c]] * runs[c])
        elif key >= recv_base:  # the receipt of output j on device dd
            j, dd = divmod(key - recv_base, nd)
            src = dev[int(out_owner[j])]
            _, usable = _take_lane(lane_free[dd], t,
                                   _receive_s(links, src, dd, g.out_bytes[j]) * repeat[j])
            for c in consumers[j]:
                if dev[c] == dd:
                    input_available(c, usable)
        else:  # a transfer of output j to device dd
            j, dd = divmod(key - n, nd)
            src = dev[int(out_owner[j])]
            ch = links.channel[src, dd]
            begin = max(t, channel_free[ch])
            finish = begin + g.out_bytes[j] / links.bandwidth[src, dd] * repeat[j]
            channel_free[ch] = finish
            arrive = finish + links.latency_s[src, dd] * repeat[j]
            transfers.append((j, src, dd, begin, finish, arrive, int(g.out_bytes[j])))
            if _receive_s(links, src, dd, g.out_bytes[j]) > 0:  # a receive task, as fast's
                heapq.heappush(heap, (arrive, recv_base + j * nd + dd))
                continue
            for c in consumers[j]:
                if dev[c] == dd:
                    input_available(c, arrive)
    assert done == n, f"only {done} of {n} ops ran: the graph has a cycle"

    peak = _peak_memory(problem, dev, start, end, transfers, consumers)
    capacity = np.array([d.memory_bytes for d in cluster.devices], np.int64)
    cols = list(zip(*transfers)) if transfers else [[]] * 7
    return SimResult(
        step_time_s=float(max(end)) if n else 0.0, busy_s=np.array(busy), peak_bytes=peak,
        oom=bool((peak > capacity).any()), op_device=np.array(dev, np.int64),
        op_start_s=np.array(start), op_end_s=np.array(end),
        transfers=Transfers(*(np.array(c, dtype=t) for c, t in zip(cols, [np.int64] * 3 + [np.float64] * 3 + [np.int64]))))


def forward_edges(g) -> tuple[dict[int, list[int]], dict[int, list[int]], list[int]]:
    """(consumers[j]: ops reading output j over forward data edges, one entry per edge;
    ctrl_succ[o]: forward control successors of op o; pending[o]: forward in-edges of o)."""
    consumers: dict[int, list[int]] = {}
    pending = [0] * g.num_ops
    for e in range(g.num_edges):
        if not g.edge_back[e]:
            j = int(g.out_ptr[g.edge_src[e]] + g.edge_src_out[e])
            consumers.setdefault(j, []).append(int(g.edge_dst[e]))
            pending[int(g.edge_dst[e])] += 1
    ctrl_succ: dict[int, list[int]] = {}
    for e in range(g.num_control_edges):
        if not g.ctrl_back[e]:
            ctrl_succ.setdefault(int(g.ctrl_src[e]), []).append(int(g.ctrl_dst[e]))
            pending[int(g.ctrl_dst[e])] += 1
    return consumers, ctrl_succ, pending


def _receive_s(links, src: int, dst: int, nbytes) -> float:
    """CPU a transfer of ``nbytes`` takes on the receiver's lane (the fast simulator's
    arithmetic: a receive task runs exactly when this is above 0)."""
    return links.recv_cpu_s[src, dst] + links.recv_cpu_s_per_byte[src, dst] * nbytes


def _take_lane(lanes: list[float], t: float, duration: float) -> tuple[float, float]:
    """Runs work of ``duration`` ready at t on the lane that frees first (lowest on ties);
    returns its (start, end)."""
    lane = lanes.index(min(lanes))
    start = max(t, lanes[lane])
    lanes[lane] = start + duration
    return start, lanes[lane]


def _peak_memory(problem: PlacementProblem, dev: list[int], start: list[float], end: list[float],
                 transfers: list[tuple], consumers: dict[int, list[int]]) -> np.ndarray:
    """Peak bytes per device by a sweep over alloc / free events (frees first at equal times)."""
    g, nd = problem.graph, problem.cluster.num_devices
    events: list[list[tuple[float, int, int]]] = [[] for _ in range(nd)]  # (time, 0 free|1 alloc, bytes)
    arrivals: dict[int, dict[int, float]] = {}  # output -> {receiving device: arrival}
    for (j, src, dd, begin, finish, arrive, nbytes) in transfers:
        arrivals.setdefault(j, {})[dd] = arrive
    for o in range(g.num_ops):
        d = dev[o]
        temp = int(problem.costs.temp_bytes[o, d])
        events[d] += [(start[o], 1, temp), (end[o], 0, -temp)]
        for j in range(int(g.out_ptr[o]), int(g.out_ptr[o + 1])):
            nbytes = int(g.out_bytes[j])
            free_at = {d: end[o]}  # device -> when the copy there can go
            for dd, arrive in arrivals.get(j, {}).items():
                free_at[d] = max(free_at[d], arrive)
                free_at[dd] = arrive
            for c in consumers.get(j, []):
                free_at[dev[c]] = max(free_at[dev[c]], end[c])
            for dd, t_free in free_at.items():
                t_alloc = start[o] if dd == d else arrivals[j][dd]
                events[dd] += [(t_alloc, 1, nbytes), (t_free, 0, -nbytes)]
    peak = np.zeros(nd, np.int64)
    for d in range(nd):
        live = high = 0
        for _, _, delta in sorted(events[d]):
            live += delta
            high = max(high, live)
        params = sum(int(g.param_bytes[o]) for o in range(g.num_ops) if dev[o] == d)
        peak[d] = params + high
    return peak
