"""Where the schema and the generated artifacts live, in a checkout and in an installed wheel."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["jsonld_context_path", "schema_path", "shapes_dir"]

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _locate(name: str) -> Path:
    # A wheel carries schema/ and shapes/ inside the package (pyproject's force-include); a checkout has them
    # at the top level.
    packaged = Path(str(resources.files("dspy_rdf"))) / name
    return packaged if packaged.exists() else _REPO_ROOT / name


def schema_path() -> Path:
    """Path of the LinkML schema ``dspy.yaml``."""
    return _locate("schema") / "dspy.yaml"


def shapes_dir() -> Path:
    """Directory of the generated SHACL shapes and class hierarchy."""
    return _locate("shapes")


def jsonld_context_path() -> Path:
    """Path of the LinkML-generated JSON-LD context."""
    return _locate("schema") / "dspy.context.jsonld"
