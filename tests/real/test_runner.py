"""The runner child's pieces that need no child process."""

from gplace.real.runner import session_config


def test_a_placement_session_sees_the_gpus_the_profiler_hides():
    job = {"threads": 1, "timeout_s": 60.0}
    local = session_config({**job, "target": ""})
    assert "GPU" not in local.device_count  # every device TF finds (the profiler's: none)
    assert local.use_per_session_threads and local.operation_timeout_in_ms == 60_000
    served = session_config({**job, "target": "grpc://127.0.0.1:1"})
    assert "GPU" not in served.device_count
    assert served.isolate_session_state and not served.use_per_session_threads
