"""The shapes both engines validate with: which files, and each shapes directory parsed once per process.

A shapes directory holds the LinkML-generated shapes (``dspy.shacl.ttl``), the hand-written rules
(``dspy.rules.ttl``; any other ``*.ttl`` file is read too) and the class hierarchy (``dspy.classes.ttl``, N-Triples
from ``gen-owl``), which SHACL needs so that ``sh:class dspy:LMPart`` accepts an ``LMToolCallPart``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import rdflib
from rdflib.namespace import RDFS

from dspy_rdf.resources import shapes_dir

__all__ = ["CLASSES_FILE", "RULES_FILE", "RULES_NAMESPACE", "SHAPES_FILE", "STORE_SELECT", "Shapes", "load_shapes", "shape_files", "subclass_closure"]

SHAPES_FILE = "dspy.shacl.ttl"
"""The LinkML-generated shapes (never edited by hand)."""
RULES_FILE = "dspy.rules.ttl"
"""The hand-written cross-node integrity rules (SHACL-SPARQL)."""
CLASSES_FILE = "dspy.classes.ttl"
"""The ``rdfs:subClassOf`` hierarchy of the schema's classes."""
RULES_NAMESPACE = "https://w3id.org/lmodel/dspy/rules/"
STORE_SELECT = RULES_NAMESPACE + "storeSelect"
"""The predicate of a rule's store form (see ``shapes/dspy.rules.ttl``)."""


@dataclass(frozen=True)
class Shapes:
    """The shapes graph (every shape file of a directory), the class hierarchy, and where they were read from."""

    graph: rdflib.Graph
    classes: rdflib.Graph
    directory: Path
    files: tuple[Path, ...]


def shape_files(directory: Path) -> list[Path]:
    """The shape files of a directory: every ``*.ttl`` but the class hierarchy, sorted by name."""
    return sorted(p for p in directory.glob("*.ttl") if p.name != CLASSES_FILE)


def load_shapes(directory: str | Path | None = None) -> Shapes:
    """The shapes of ``directory`` (default: the package's), parsed once per process and directory."""
    return _load(str(Path(directory).resolve() if directory is not None else shapes_dir().resolve()))


@lru_cache(maxsize=8)
def _load(directory: str) -> Shapes:
    root = Path(directory)
    files = shape_files(root)
    if not files:
        raise FileNotFoundError(f"{root}: no shape files (*.ttl) in this directory")
    graph = rdflib.Graph()
    for path in files:
        graph.parse(path, format="turtle")
    classes = rdflib.Graph()
    if (root / CLASSES_FILE).exists():
        classes.parse(root / CLASSES_FILE, format="nt")
    return Shapes(graph=graph, classes=classes, directory=root, files=tuple(files))


def subclass_closure(graph: rdflib.Graph) -> Callable[[str], frozenset[str]]:
    """A function from a class IRI to the class and all its subclasses (``rdfs:subClassOf`` in ``graph``), cached."""
    children: dict[str, set[str]] = {}
    for sub, sup in graph.subject_objects(RDFS.subClassOf):
        children.setdefault(str(sup), set()).add(str(sub))

    @lru_cache(maxsize=None)
    def closure(cls: str) -> frozenset[str]:
        out = {cls}
        todo = [cls]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in out:
                    out.add(child)
                    todo.append(child)
        return frozenset(out)

    return closure
