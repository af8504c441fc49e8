"""A corpus of graphs to learn from: the ``datasets/`` corpus (manifest.yaml with families and
splits, measured CPU profiles) or any folder of .pb / .pbtxt / SavedModel graphs and PyTorch
``.pt2`` programs (forward returning the loss, as ``gplace place`` reads them) a user collected.

Imported graphs are cached in the user cache (gplace.opgraph_cache, as ``gplace place`` caches
them), so a second pass costs milliseconds per graph; the experts and heuristic placements
searched on them are cached beside the graphs (gplace.gnn.cache). A folder
without a manifest puts every graph in the ``train`` split with its file name as family; graphs
without a ``<name>.profile.json.gz`` beside them get estimated (roofline) costs, and
:func:`describe` says which.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from gplace.errors import ConfigError, GplaceError
from gplace.graph import OpGraph

GRAPH_SUFFIXES = (".pb", ".pbtxt")
TORCH_SUFFIX = ".pt2"


@dataclass(frozen=True)
class CorpusGraph:
    name: str
    family: str
    split: str            # train | validation | test
    path: Path            # the graph file or SavedModel directory
    profile: Path | None  # measured CostProfile beside it, if any
    ops: int | None = None  # the op count the manifest lists (None: unknown until imported)
    unknown_dim: int = 1    # the size its unknown dimensions are imported with
    optimizer: str | None = None  # a PyTorch program's: the optimizer its step updates with
    trust: bool = False     # ... and whether it is loaded without gplace's checks


def find_manifest(directory: Path) -> tuple[Path, Path] | None:
    """(manifest, corpus dir) for ``datasets/`` or ``datasets/corpus/``; None for a plain folder."""
    for manifest in (directory / "manifest.yaml", directory.parent / "manifest.yaml"):
        if manifest.is_file():
            data = _read_manifest(manifest)
            corpus = (manifest.parent / data.get("corpus_dir", ".")).resolve()
            if corpus == directory.resolve() or manifest.parent == directory:
                return manifest, corpus
    return None


def list_corpus(directory: str | Path, unknown_dim: int = 1, optimizer: str = "sgd",
                trust: bool = False) -> list[CorpusGraph]:
    """The corpus' graphs, each to be imported with its unknown dimensions (a None batch)
    sized ``unknown_dim``, a PyTorch program's step with the updates of ``optimizer`` (a
    gplace.torchfront.optim spec), loaded without gplace's checks if ``trust``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"{directory}: corpus folder not found")
    found = find_manifest(directory)
    graphs = _from_manifest(*found) if found else _from_folder(directory)
    if not graphs:
        raise ConfigError(f"{directory}: no graphs found (expected a manifest.yaml or "
                          f"{', '.join((*GRAPH_SUFFIXES, TORCH_SUFFIX))} files or SavedModel "
                          "folders)")
    return [replace(g, unknown_dim=unknown_dim, optimizer=optimizer if is_torch(g.path) else None,
                    trust=trust and is_torch(g.path)) for g in graphs]


def is_torch(path: Path) -> bool:
    return Path(path).suffix.lower() == TORCH_SUFFIX


def left_aside(directory: str | Path) -> list[str]:
    """What a folder corpus (no manifest) holds that pretraining does not read, as phrases
    for the log: folders that are not SavedModels (it does not look inside), and graph files
    whose bytes another file repeats (the same graph would count twice)."""
    directory = Path(directory)
    if find_manifest(directory) is not None:
        return []
    notes, seen = [], {}
    for path in sorted(directory.iterdir()):
        if path.is_dir() and not path.name.startswith(".") and \
                not (path / "saved_model.pb").exists():
            notes.append(f"{path.name}/ is a folder, not a SavedModel: its graphs are not read")
        elif (path.suffix in GRAPH_SUFFIXES or is_torch(path)) and path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest in seen:
                notes.append(f"{path.name} holds the same bytes as {seen[digest]}: that graph "
                             "counts twice")
            seen.setdefault(digest, path.name)
    return notes


def _read_manifest(manifest: Path) -> dict:
    try:
        data = yaml.safe_load(manifest.read_text())
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"{manifest}: not valid YAML{at} "
                          f"({getattr(e, 'problem', None) or 'syntax error'})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{manifest}: cannot read it ({e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("graphs", []), list):
        raise ConfigError(f"{manifest}: expected a mapping with a 'graphs:' list")
    return data


MANIFEST_FIELDS = ("name", "family", "split", "graph")


def _from_manifest(manifest: Path, corpus: Path) -> list[CorpusGraph]:
    rows = _read_manifest(manifest).get("graphs", [])
    out = []
    for i, row in enumerate(rows, 1):
        missing = [k for k in MANIFEST_FIELDS if not isinstance(row, dict) or not row.get(k)]
        if missing:
            name = row.get("name", "?") if isinstance(row, dict) else "?"
            raise ConfigError(f"{manifest}: graph row {i} ({name}) has no "
                              f"{', '.join(repr(k + ':') for k in missing)}; every row needs "
                              f"{', '.join(MANIFEST_FIELDS)}")
        path = corpus / row["graph"]
        if not path.exists():
            continue  # listed but not built here yet: `python -m datasets.build` makes it
        profile = corpus / row["profile"] if row.get("profile") else None
        out.append(CorpusGraph(row["name"], row["family"], row["split"], path,
                               profile if profile and profile.exists() else None,
                               int(row["ops"]) if row.get("ops") is not None else None))
    return out


def _from_folder(directory: Path) -> list[CorpusGraph]:
    """The folder's graph files, SavedModels and PyTorch programs, named by the file name
    before its first dot (the name its profile, cached experts and seeds are found by); a
    ConfigError where two files would share a name."""
    out, seen = [], {}
    for path in sorted(directory.iterdir()):
        is_saved_model = path.is_dir() and (path / "saved_model.pb").exists()
        program = is_torch(path) and path.is_file()
        if path.suffix in GRAPH_SUFFIXES or is_saved_model or program:
            name = path.name if is_saved_model else path.name.split(".")[0]
            if name in seen:
                raise ConfigError(f"{directory}: {seen[name]} and {path.name} both name the "
                                  f"graph {name!r} (the name before the first dot keys its "
                                  "profile and its cached experts); rename one")
            seen[name] = path.name
            profile = directory / f"{name}.profile.json.gz"
            out.append(CorpusGraph(name, name, "train", path, profile if profile.exists() else None))
    return out


def load_corpus_graph(entry: CorpusGraph) -> OpGraph:
    """The imported graph, through gplace.opgraph_cache (the user cache, keyed by the file's
    content, the importer's version and the size of unknown dimensions or a program's
    optimizer), as ``gplace place --unknown-dim`` (``--optimizer``) imports it."""
    from gplace.opgraph_cache import load_graph
    if entry.optimizer is not None:
        return load_graph(entry.path, name=entry.name, optimizer=entry.optimizer,
                          trust=entry.trust)
    return load_graph(entry.path, entry.unknown_dim, name=entry.name)


def importable(entries: list[CorpusGraph], progress=None) -> tuple[
        list[CorpusGraph], list[tuple[CorpusGraph, str]]]:
    """(the graphs that import, (graph, why not) for the others). ``progress(done, total)``,
    if given, is called after each graph."""
    good, bad = [], []
    for k, e in enumerate(entries, 1):
        why = import_error(e)
        (good.append(e) if why is None else bad.append((e, why)))
        if progress is not None:
            progress(k, len(entries))
    return good, bad


@functools.lru_cache(maxsize=None)
def import_error(entry: CorpusGraph) -> str | None:
    """None if the graph imports, else the one line that says why not."""
    try:
        load_corpus_graph(entry)
    except GplaceError as e:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def describe(entries: list[CorpusGraph]) -> str:
    measured = sum(e.profile is not None for e in entries)
    splits = {s: sum(e.split == s for e in entries) for s in ("train", "validation", "test")}
    return (f"{len(entries)} graph{'s' * (len(entries) != 1)} "
            f"({', '.join(f'{n} {s}' for s, n in splits.items() if n)}); "
            f"{measured} with measured CPU profiles, {len(entries) - measured} with estimated costs")
