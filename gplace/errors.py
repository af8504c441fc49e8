"""The errors gplace raises for bad input. The CLI prints them as one line and exits 2."""


class GplaceError(Exception):
    """Bad input or a request gplace cannot satisfy; the message says what to fix."""


class GraphError(GplaceError):
    """A graph file that cannot be read, or a graph that breaks an OpGraph invariant."""


class ConfigError(GplaceError):
    """A cluster, config or checkpoint file with a missing or wrong field."""
