import re

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


DEVICE = ("{name: %s, tf_device: '%s', kind: %s, peak_flops: %s, mem_bandwidth: 1, "
          "memory_bytes: %s, lanes: %s}")


def two_devices(tmp_path, second_tf="/device:CPU:1", kind="cpu", flops="1e9", memory="1e9",
                name="b", lanes="1", links=""):
    """A two-device cluster YAML; the keywords change its second device or add ``links``."""
    path = tmp_path / "c.yaml"
    path.write_text("name: x\ndevices:\n  - " + DEVICE % ("a", "/device:CPU:0", "cpu", 1e9, 1e9, 1)
                    + "\n  - " + DEVICE % (name, second_tf, kind, flops, memory, lanes)
                    + f"\n{links}default_link: {{bandwidth: 1, latency_s: 0}}\n")
    return path


@pytest.mark.parametrize("change,message", [
    ({"second_tf": "/device:CPU:0"}, "devices 'a' and 'b' are the same TF device"),
    ({"second_tf": "/job:localhost/replica:0/task:0/device:CPU:0"}, "same TF device"),
    ({"kind": "k8O"}, "unknown device kind 'k8O'; kinds: cpu, gpu, "),
    ({"flops": ".inf"}, "field 'peak_flops' = inf is not a finite number"),
    ({"memory": ".inf"}, "field 'memory_bytes' = inf is not a finite integer"),
    ({"memory": ".nan"}, "field 'memory_bytes' = nan is not a finite integer"),
    ({"memory": "1.0e+400"}, "'memory_bytes' = inf is not a finite integer"),
    ({"memory": str(2**64)}, "'memory_bytes' = 18446744073709551616 must be in [1, 2**50] "
                             "(bytes)"),
    ({"memory": "1e30"}, "'memory_bytes' = '1e30' must be in [1, 2**50] (bytes)"),
    ({"memory": "0"}, "'memory_bytes' = 0 must be in [1, 2**50]"),
    ({"memory": "0.5"}, "'memory_bytes' = 0.5 is not an integer"),
    ({"lanes": "2.5"}, "'lanes' = 2.5 is not an integer"),
    ({"lanes": "0"}, "'lanes' = 0 must be in [1, 1024] (ops at once)"),
    ({"lanes": "1000000000"}, "'lanes' = 1000000000 must be in [1, 1024]"),
    ({"flops": "[1, 2]"}, "'peak_flops' = [1, 2] is not a finite number"),
    ({"name": "''"}, "field 'name' = '' is not a non-empty string"),
    ({"name": "'gpu0,gpu1'"}, "device name 'gpu0,gpu1': use letters, digits"),
    ({"name": "x" * 100}, "device name '" + "x" * 27 + "..." + "x" * 28 + "': use letters"),
    ({"kind": "''"}, "field 'kind' = '' is not a non-empty string"),
    ({"links": "links: {a: 1}\n"}, "field 'links' must be a list, got a mapping"),
    ({"links": "links: [{devices: [a, a], bandwidth: 1, latency_s: 0}]\n"},
     "links[0]: field 'devices' names a device twice"),
])
def test_yaml_that_would_give_a_wrong_result_is_refused(tmp_path, change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_cluster(two_devices(tmp_path, **change))
    load_cluster(two_devices(tmp_path))  # the unchanged file is fine


@pytest.mark.parametrize("text,message", [
    (b"name: x\xff\ndevices: []\n", "not UTF-8 text (byte 0xff at offset 7)"),
    (b"a: &a [1, 2]\nname: *a\n", "line 2: aliases are not allowed (*a); write the value out"),
    (b"name: x\ndevices: [\n", "cannot read cluster YAML (line 3: "),
    (b"x" * (4 << 20) + b"\n", "over 4 MiB, too large for a cluster YAML"),
    (b"name: x\ndevices: []\n", "field 'devices' must be a non-empty list, got an empty list"),
])
def test_unreadable_yaml_says_why(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_bytes(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_cluster(path)


def test_a_cluster_holds_at_most_max_devices(tmp_path):
    from gplace.cluster_yaml import MAX_DEVICES
    path = tmp_path / "c.yaml"
    devices = "".join(f"  - {{name: d{i}, tf_device: '/device:CPU:{i}', kind: cpu, "
                      f"peak_flops: 1, mem_bandwidth: 1, memory_bytes: 1}}\n"
                      for i in range(MAX_DEVICES + 1))
    path.write_text(f"name: x\ndevices:\n{devices}default_link: {{bandwidth: 1, latency_s: 0}}\n")
    with pytest.raises(ConfigError, match=f"lists {MAX_DEVICES + 1} entries; gplace takes at "
                                          f"most {MAX_DEVICES}"):
        load_cluster(path)


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
    with pytest.raises(ConfigError, match=r"field .recv_cpu_s. = -1 must be in \[0, 10\] \(s\)"):
        load_cluster(path)


def test_half_flops_read_from_yaml_and_are_recorded_only_where_set(tmp_path):
    from gplace.cluster import cluster_from_dict
    path = two_devices(tmp_path, flops="1e9, half_flops: 8e9")
    cluster = load_cluster(path)
    assert [d.half_flops for d in cluster.devices] == [None, 8e9]
    records = cluster.summary()["devices"]
    assert "half_flops" not in records[0] and records[1]["half_flops"] == 8e9
    assert cluster_from_dict(cluster.summary(), "x") == cluster  # placement.json's round trip
    path = two_devices(tmp_path, flops="1e9, half_flops: 0")
    with pytest.raises(ConfigError, match=r"field .half_flops. = 0 must be in"):
        load_cluster(path)


def test_the_yaml_reader_knows_every_device_field():
    from dataclasses import fields
    from gplace.cluster import Device
    from gplace.cluster_yaml import DEVICE_FIELDS
    assert DEVICE_FIELDS == tuple(f.name for f in fields(Device))


def test_a_device_capped_twice_is_refused():
    from gplace.cluster import memory_caps
    with pytest.raises(ConfigError, match="gpu0 is capped twice"):
        memory_caps("gpu0=1GB,gpu0=2GB")
    with pytest.raises(ConfigError, match="every device is capped twice"):
        memory_caps("1GB,2GB")
