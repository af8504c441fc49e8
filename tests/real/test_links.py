"""The transfer benchmark on local-procs: interleaved variants, a positive link fit."""

import numpy as np


def test_benchmark_fits_a_link_and_the_step_overhead(procs):
    from gplace.real.links import LinkBenchConfig, benchmark
    devs = [f"/job:worker/replica:0/task:{i}/device:CPU:0" for i in range(2)]
    cfg = LinkBenchConfig(sizes=(4 << 10, 1 << 20, 4 << 20), repeats=5, warmup=1)
    link, overhead = benchmark(procs.target, devs[0], devs[1], cfg)
    assert link.bandwidth > 0 and link.latency_s >= 0 and len(link.extra_s) == 3
    assert link.extra_s[-1] > link.extra_s[0]  # 4 MiB costs more to send than 4 KiB
    assert 0 < overhead.one_task_s < 1 and 0 < overhead.two_task_s < 1
    assert np.all(np.isfinite(link.residual_rel))
