"""Reading a cluster YAML (gplace.cluster): every field checked at the boundary.

``cluster_fields`` turns a parsed YAML record into plain, checked field values, which
gplace.cluster builds its Cluster from (this module knows the fields, not the classes).

A field gets a ConfigError that names the file, the device or link, the field, its value (cut
short: a hostile value may be megabytes or nested without end) and what is accepted: the
kinds of DEVICE_KINDS, numbers in RANGES (finite, integers where counted), non-empty names.
The loader refuses YAML aliases, so a file of a few hundred bytes cannot expand to billions of
nodes, and files over MAX_YAML_BYTES; a cluster holds at most MAX_DEVICES devices.
"""

from __future__ import annotations

import math
import numbers
import re
import reprlib
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from gplace.errors import ConfigError

# gplace.cluster.Device's fields (tests/test_cluster.py checks that they agree).
DEVICE_FIELDS = ("name", "tf_device", "kind", "peak_flops", "mem_bandwidth", "memory_bytes",
                 "launch_overhead_s", "lanes", "half_flops")
# The cost model picks op costs (and measured profiles) by a device's kind, so a misspelt kind
# would silently fall back to the default roofline: the YAML must use one of these. "gpu" is the
# generic kind (the roofline with the YAML's figures). "cpu" is this machine's CPU, the kind
# `gplace profile` measures: a profile beside the model (<name>.profile.json.gz) gives its op
# times, whatever the YAML's figures; without one it is the roofline with them too. The others
# are the kinds of the presets. A new kind of device goes here with its preset.
DEVICE_KINDS = ("cpu", "gpu", "a100", "epyc", "k40", "k80", "v100", "xeon-e5")

MAX_DEVICES = 256      # the simulator keeps (devices, devices) link tables and channels
MAX_LINK_PAIRS = 4 * MAX_DEVICES**2  # ordered device pairs all ``links`` entries list together
MAX_YAML_BYTES = 4 << 20  # a cluster of MAX_DEVICES devices is ~50 KB of YAML
# The accepted range of every number, inclusive, with its unit. Outside it a figure is a typo
# (or an attack on int64 byte counts and float64 times), not a device: an H200 has ~1e15 FLOP/s,
# 4.8e12 B/s and 1.5e11 B; the ranges leave orders of magnitude on both sides.
RANGES: dict[str, tuple[float, float, str]] = {
    "peak_flops": (1.0, 1e18, "FLOP/s"),
    "half_flops": (1.0, 1e18, "FLOP/s"),
    "mem_bandwidth": (1.0, 1e18, "bytes/s"),
    "memory_bytes": (1, 2**50, "bytes"),
    "launch_overhead_s": (0.0, 1.0, "s"),
    "lanes": (1, 1024, "ops at once"),
    "bandwidth": (1.0, 1e18, "bytes/s"),
    "latency_s": (0.0, 10.0, "s"),
    "recv_cpu_s": (0.0, 10.0, "s"),
    "recv_cpu_s_per_byte": (0.0, 1.0, "s/byte"),
}
_DEVICE_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # no ',' or '=': --memory-limit gpu0=8GB,...
_SHOW = reprlib.Repr()  # a hostile value may be huge or deeply nested: show its start only
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlist = _SHOW.maxdict = 4
_SHOW.maxlevel = 2


class _NoAliasLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses aliases (``*name``, ``<<: *name``): a few hundred bytes of
    nested aliases expand to billions of nodes (the "billion laughs"), and a cluster file needs
    none."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"aliases are not allowed (*{event.anchor[:40]}); write the value "
                            f"out", event.start_mark)
        return super().compose_node(parent, index)


def read_yaml(path: Path) -> Any:
    """The parsed YAML of a cluster file; a ConfigError naming the file and the problem."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_YAML_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read cluster YAML ({e.strerror or e})") from None
    if len(data) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: over {MAX_YAML_BYTES >> 20} MiB, too large for a cluster "
                          f"YAML")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {data[e.start]:#04x} at offset "
                          f"{e.start}); a cluster YAML is UTF-8") from None
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: cannot read cluster YAML ({_yaml_error(e)})") from None


def _yaml_error(e: yaml.YAMLError) -> str:
    """'line 3: found ...' from a YAML error (its own text spans lines and quotes the file)."""
    mark = getattr(e, "problem_mark", None)
    text = str(e).strip()
    problem = getattr(e, "problem", None) or (text.splitlines()[0] if text else type(e).__name__)
    return f"line {mark.line + 1}: {problem}" if mark is not None else problem


def _show(value: Any) -> str:
    return _SHOW.repr(value)


def _number(record: dict, key: str, kind: type, where: str, default: Any = ...) -> Any:
    """record[key] as a finite ``kind`` (int or float) in RANGES[key]; a ConfigError that names
    the field, the value and the range otherwise. Numeric strings count ('8e9': YAML 1.1 reads
    an exponent without a dot as a string)."""
    if key not in record:
        if default is ...:
            raise ConfigError(f"{where}: missing field {key!r}")
        return default
    value = record[key]
    what = "a finite integer" if kind is int else "a finite number"
    try:
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
            raise ValueError  # numpy's scalars are Real: a Cluster built from arrays
        number = int(value) if isinstance(value, numbers.Integral) else float(value)
        if isinstance(value, str) and kind is int and value.strip().lstrip("+-").isdigit():
            number = int(value)
        if not math.isfinite(number):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: field {key!r} = {_show(value)} is not {what}") from None
    if kind is int and number != int(number):
        raise ConfigError(f"{where}: field {key!r} = {_show(value)} is not an integer")
    low, high, unit = RANGES[key]
    if not low <= number <= high:
        raise ConfigError(f"{where}: field {key!r} = {_show(value)} must be in "
                          f"[{_bound(low)}, {_bound(high)}] ({unit})")
    return int(number) if kind is int else float(number)


def _bound(x: float) -> str:
    """2**50 for a large power of two, else the shortest float text."""
    if isinstance(x, int) and x >= 2**20 and x & (x - 1) == 0:
        return f"2**{x.bit_length() - 1}"
    return f"{x:g}"


def _text(record: dict, key: str, where: str, default: Any = ...) -> str:
    """record[key], a non-empty string."""
    if key not in record:
        if default is ...:
            raise ConfigError(f"{where}: missing field {key!r}")
        return default
    value = record[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: field {key!r} = {_show(value)} is not a non-empty string")
    return value


def _flag(record: dict, key: str, where: str, default: bool) -> bool:
    value = record.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: field {key!r} = {_show(value)} is not true or false")
    return value


def _check_keys(record: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_kind(record)}")
    unknown = sorted(set(map(str, record)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field {_show(unknown[0])}; fields: "
                          f"{', '.join(sorted(allowed))}")
    return record


def _kind(value: Any) -> str:
    if isinstance(value, (dict, list, str)) and not value:
        return {dict: "an empty mapping", list: "an empty list", str: "an empty string"}[
            type(value)]
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value),
                                                                  type(value).__name__)


def _list(record: dict, key: str, where: str, limit: int, empty: bool) -> list:
    """record[key], a list of at most ``limit`` entries (absent: [] where ``empty``)."""
    value = record.get(key) if empty else record.get(key, None)
    if value is None and empty:
        return []
    if not isinstance(value, list) or (not value and not empty):
        raise ConfigError(f"{where}: field {key!r} must be a {'' if empty else 'non-empty '}"
                          f"list, got {_kind(value) if value is not None else 'nothing'}")
    if len(value) > limit:
        raise ConfigError(f"{where}: field {key!r} lists {len(value):,} entries; gplace "
                          f"takes at most {limit:,}")
    return value


def _device_fields(record: Any, where: str) -> dict[str, Any]:
    _check_keys(record, set(DEVICE_FIELDS), where)
    where = f"{where} ({_show(record.get('name', '?'))})"
    name = _text(record, "name", where)
    if not _DEVICE_NAME.fullmatch(name):
        raise ConfigError(f"{where}: device name {_show(name)}: use letters, digits and "
                          f"_ . + - only, at most 64 (no ',' or '=': --memory-limit "
                          f"gpu0=8GB,gpu1=4GB names devices)")
    dev = dict(
        name=name, tf_device=_text(record, "tf_device", where), kind=_text(record, "kind", where),
        peak_flops=_number(record, "peak_flops", float, where),
        mem_bandwidth=_number(record, "mem_bandwidth", float, where),
        memory_bytes=_number(record, "memory_bytes", int, where),
        launch_overhead_s=_number(record, "launch_overhead_s", float, where, 5e-6),
        lanes=_number(record, "lanes", int, where, 1),
        half_flops=_number(record, "half_flops", float, where, None))
    if dev["kind"] not in DEVICE_KINDS:
        raise ConfigError(f"{where}: unknown device kind {_show(dev['kind'])}; kinds: "
                          f"{', '.join(DEVICE_KINDS)} (cpu or gpu for any other device)")
    return dev


def _link_fields(record: Any, where: str, names: list[str], default: bool = False
                 ) -> dict[str, Any]:
    allowed = ({"bandwidth", "latency_s", "recv_cpu_s", "recv_cpu_s_per_byte"}
               | (set() if default else {"devices", "shared"}))
    _check_keys(record, allowed, where)
    devs = () if default else record.get("devices")
    if not default:
        if not isinstance(devs, list) or len(devs) < 2:
            raise ConfigError(f"{where}: field 'devices' must list two or more device names")
        for n in devs:
            if n not in names:
                raise ConfigError(f"{where}: field 'devices' names unknown device {_show(n)}; "
                                  f"devices: {_show_names(names)}")
        if len(set(devs)) < len(devs):
            raise ConfigError(f"{where}: field 'devices' names a device twice")
    return dict(devices=tuple(devs), bandwidth=_number(record, "bandwidth", float, where),
                latency_s=_number(record, "latency_s", float, where),
                shared=False if default else _flag(record, "shared", where, False),
                recv_cpu_s=_number(record, "recv_cpu_s", float, where, 0.0),
                recv_cpu_s_per_byte=_number(record, "recv_cpu_s_per_byte", float, where, 0.0))


def _show_names(names: list[str], limit: int = 12) -> str:
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def cluster_fields(record: Any, where: str) -> dict[str, Any]:
    """The checked fields of a cluster from parsed YAML: name, description, devices and links
    (lists of field dicts) and default_link; errors name ``where`` and the field."""
    _check_keys(record, {"name", "description", "devices", "links", "default_link"}, where)
    devs = _list(record, "devices", where, MAX_DEVICES, empty=False)
    devices = [_device_fields(d, f"{where}: devices[{i}]") for i, d in enumerate(devs)]
    names = [d["name"] for d in devices]
    dup = sorted(n for n, c in Counter(names).items() if c > 1)
    if dup:
        raise ConfigError(f"{where}: field 'devices' repeats the name {dup[0]!r}")
    _check_tf_devices(devices, where)
    entries = _list(record, "links", where, MAX_LINK_PAIRS, empty=True)
    links = [_link_fields(l, f"{where}: links[{i}]", names) for i, l in enumerate(entries)]
    pairs = sum(len(l["devices"]) * (len(l["devices"]) - 1) for l in links)
    if pairs > MAX_LINK_PAIRS:
        raise ConfigError(f"{where}: field 'links' lists {pairs:,} device pairs in all; gplace "
                          f"takes at most {MAX_LINK_PAIRS:,}")
    if "default_link" not in record:
        raise ConfigError(f"{where}: missing field 'default_link'")
    default = _link_fields(record["default_link"], f"{where}: default_link", names, True)
    description = record.get("description") or ""
    if not isinstance(description, str):
        raise ConfigError(f"{where}: field 'description' = {_show(description)} is not a "
                          f"string")
    return dict(name=_text(record, "name", where), devices=devices, links=links,
                default_link=default, description=description)


def same_tf_device(a: str, b: str) -> bool:
    """'/device:GPU:0' and '/job:localhost/replica:0/task:0/device:GPU:0' name one device."""
    a, b = a.lower(), b.lower()
    return a.startswith("/") and (b.endswith(a) or a.endswith(b)) and "device:" in a


def _check_tf_devices(devices: list[dict[str, Any]], where: str) -> None:
    """Each device its own TF device: equal strings, or one a suffix of the other."""
    for i, a in enumerate(devices):
        for b in devices[:i]:
            if a["tf_device"] == b["tf_device"] or same_tf_device(a["tf_device"], b["tf_device"]):
                raise ConfigError(f"{where}: devices {b['name']!r} and {a['name']!r} are the "
                                  f"same TF device {_show(a['tf_device'])}; each device needs "
                                  f"its own tf_device")
