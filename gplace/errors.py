"""The errors gplace raises for bad input. The CLI prints them as one line and exits 2."""


class GplaceError(Exception):
    """Bad input or a request gplace cannot satisfy; the message says what to fix."""


class GraphError(GplaceError):
    """A graph file that cannot be read, or a graph that breaks an OpGraph invariant."""


class ConfigError(GplaceError):
    """A cluster, config or checkpoint file with a missing or wrong field."""


def check_whole(name: str, value, low: int, high: int) -> None:
    """A ConfigError unless ``value`` is a whole number (not a bool) in [low, high]."""
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not low <= value <= high:
        raise ConfigError(f"{name} = {value!r} must be a whole number in [{low:,}, {high:,}]")


def tf_error_message(text: str) -> str:
    """The informative line of a TensorFlow error (TF 2.x opens with "Graph execution error:")."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    for k, line in enumerate(lines):
        if line.startswith("From /job:") and line.endswith(":") and k + 1 < len(lines):
            return f"{line} {lines[k + 1]}"[:300]  # a remote task's error: its message follows
        if not line.startswith(("Graph execution error", "Detected at node", "File ",
                                "Traceback", "Node: ")) and any(c.isalnum() for c in line):
            return line[:300]  # (not a "=====" banner line)
    return lines[0][:300] if lines else ""
