import numpy as np
import pytest

from gplace.cluster import load_cluster, preset_names
from gplace.errors import ConfigError


def test_presets_load_with_datasheet_figures():
    assert {"post-2gpu", "post-4gpu", "hdp-8gpu", "nvlink-8gpu", "hetero", "local"} <= set(preset_names())
    post = load_cluster("post-4gpu")
    assert [d.kind for d in post.devices] == ["xeon-e5"] + ["k80"] * 4
    assert post.devices[1].peak_flops == 8.73e12 / 2 and post.devices[1].mem_bandwidth == 240e9
    k40 = load_cluster("hdp-8gpu").devices[1]
    assert (k40.peak_flops, k40.mem_bandwidth, k40.memory_bytes) == (4.29e12, 288e9, 12 * 10**9)


def test_link_table_pairs_buses_and_default():
    h = load_cluster("hetero")
    t = h.link_table()
    v0, v1, k0, k1, cpu = (h.device_index(n) for n in ("v100-0", "v100-1", "k80-0", "k80-1", "cpu"))
    assert t.bandwidth[v0, v1] == 45e9 and t.channel[v0, v1] != t.channel[v1, v0]  # duplex pair
    assert t.channel[k0, k1] == t.channel[k1, k0]  # one shared bus
    assert t.bandwidth[cpu, v0] == 12e9 and t.channel[cpu, v0] >= 0
    assert (np.diag(t.channel) == -1).all() and t.num_channels == len(t.channel_names)


def test_device_index_accepts_names_and_tf_strings():
    c = load_cluster("post-2gpu")
    assert c.device_index("gpu1") == 2
    assert c.device_index("/job:localhost/replica:0/task:0/device:GPU:1") == 2
    assert c.device_index("/device:GPU:0") == 1
    with pytest.raises(ConfigError, match="gpu0, gpu1"):
        c.device_index("tpu")


def test_local_cluster_is_this_machines_cpu():
    local = load_cluster("local")
    assert local.devices[0].kind == "cpu" and local.devices[0].lanes >= 1


@pytest.mark.parametrize("text,field", [
    ("name: x\ndevices: []\ndefault_link: {bandwidth: 1, latency_s: 0}", "devices"),
    ("name: x\ndevices:\n  - {name: a, tf_device: t, kind: cpu, peak_flops: 1, mem_bandwidth: 1}\n"
     "default_link: {bandwidth: 1, latency_s: 0}", "memory_bytes"),
    ("name: x\ndevices:\n  - {name: a, tf_device: t, kind: cpu, peak_flops: 1, mem_bandwidth: 1,"
     " memory_bytes: 1, colour: red}\ndefault_link: {bandwidth: 1, latency_s: 0}", "colour"),
    ("name: x\ndevices:\n  - {name: a, tf_device: t, kind: cpu, peak_flops: 1, mem_bandwidth: 1,"
     " memory_bytes: 1}\nlinks: [{devices: [a, b], bandwidth: 1, latency_s: 0}]\n"
     "default_link: {bandwidth: 1, latency_s: 0}", "'b'"),
    ("name: x\ndevices:\n  - {name: a, tf_device: t, kind: cpu, peak_flops: -1, mem_bandwidth: 1,"
     " memory_bytes: 1}\ndefault_link: {bandwidth: 1, latency_s: 0}", "peak_flops"),
])
def test_bad_yaml_names_file_and_field(tmp_path, text, field):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_cluster(path)
    assert "c.yaml" in str(e.value) and field in str(e.value)


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="hdp-8gpu.*post-2gpu"):
        load_cluster("post-3gpu")


DEVICE = "{name: %s, tf_device: '%s', kind: %s, peak_flops: %s, mem_bandwidth: 1, memory_bytes: %s}"


def two_devices(tmp_path, second_tf="/device:CPU:1", kind="cpu", flops="1e9", memory="1e9"):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\ndevices:\n  - " + DEVICE % ("a", "/device:CPU:0", "cpu", 1e9, 1e9)
                    + "\n  - " + DEVICE % ("b", second_tf, kind, flops, memory)
                    + "\ndefault_link: {bandwidth: 1, latency_s: 0}\n")
    return path


@pytest.mark.parametrize("change,message", [
    ({"second_tf": "/device:CPU:0"}, "devices 'a' and 'b' are the same TF device"),
    ({"second_tf": "/job:localhost/replica:0/task:0/device:CPU:0"}, "same TF device"),
    ({"kind": "k8O"}, "unknown device kind 'k8O'; kinds: cpu, gpu, "),
    ({"flops": ".inf"}, "field 'peak_flops' = inf is not a finite number"),
    ({"memory": ".inf"}, "field 'memory_bytes' = inf is not a finite integer"),
    ({"memory": ".nan"}, "field 'memory_bytes' = nan is not a finite integer"),
    ({"memory": "1.0e+400"}, "'memory_bytes' = inf is not a finite integer"),
])
def test_yaml_that_would_give_a_wrong_result_is_refused(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_cluster(two_devices(tmp_path, **change))
    load_cluster(two_devices(tmp_path))  # the unchanged file is fine


def test_every_preset_loads():
    from gplace.cluster import preset_names
    for name in preset_names():
        if name != "local":
            assert load_cluster(name).num_devices >= 1


def test_receive_cpu_reads_from_yaml_into_the_link_table(tmp_path):
    path = two_devices(tmp_path)
    path.write_text(path.read_text().replace(
        "default_link: {bandwidth: 1, latency_s: 0}",
        "default_link: {bandwidth: 1, latency_s: 0, recv_cpu_s: 2.0e-4, "
        "recv_cpu_s_per_byte: 1.0e-9}"))
    cluster = load_cluster(path)
    table = cluster.link_table()
    assert table.recv_cpu_s.tolist() == [[0.0, 2e-4], [2e-4, 0.0]]
    assert table.recv_cpu_s_per_byte.tolist() == [[0.0, 1e-9], [1e-9, 0.0]]
    assert cluster.summary()["default_link"]["recv_cpu_s"] == 2e-4
    path.write_text(path.read_text().replace("recv_cpu_s: 2.0e-4", "recv_cpu_s: -1"))
    with pytest.raises(ConfigError, match="field 'recv_cpu_s' = -1 must be >= 0"):
        load_cluster(path)
