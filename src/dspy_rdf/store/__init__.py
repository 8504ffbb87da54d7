"""Trace stores: one named graph per trace, in an embedded pyoxigraph store on disk or on any SPARQL 1.1 server.

:func:`open_store` takes a directory (embedded, the default) or an ``http(s)://`` URL (remote). Both implement
:class:`~dspy_rdf.store.base.TraceStore`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dspy_rdf.store.base import (
    DEFAULT_STORE,
    STATS,
    STORE_ENV,
    EncodedTrace,
    PutReport,
    SparqlJson,
    StoreError,
    StoreLockedError,
    TraceStore,
    check_trace_iri,
    encode_traces,
    term_json,
    term_value,
)
from dspy_rdf.store.embedded import EmbeddedStore

__all__ = [
    "DEFAULT_STORE",
    "STATS",
    "STORE_ENV",
    "EmbeddedStore",
    "EncodedTrace",
    "PutReport",
    "RemoteStore",
    "SparqlJson",
    "StoreError",
    "StoreLockedError",
    "TraceStore",
    "check_trace_iri",
    "default_store_target",
    "encode_traces",
    "open_store",
    "term_json",
    "term_value",
]


def default_store_target() -> str:
    """The store to use when none is given: ``$DSPY_RDF_STORE``, else ``.dspy-rdf/store``."""
    return os.environ.get(STORE_ENV) or str(DEFAULT_STORE)


_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_SCHEME_WITHOUT_COLON = re.compile(r"(?i)(https?)//+")
_SCHEME_LIKE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/*")
_DRIVE = re.compile(r"[A-Za-z]:")
_HOST_PORT = re.compile(r"(?:[^/@]*@)?[A-Za-z0-9.-]*(?:\[[0-9A-Fa-f:.]*\])?:[0-9]+\Z")


def _url_lookalike(target: str) -> str | None:
    """What a store target that reads as a URL probably meant (``did you mean http://...?``: ``HTTP:/host/ds``,
    ``http//host/ds``, ``host:7878``, ``127.0.0.1:7878/ds``), without credentials; None for a plain path.

    What stands before the first ``/`` decides: a first segment with a ``:`` in it (a scheme, or a port) is taken
    for a URL, so ``./localhost:7878`` or an absolute path still names such a directory (``C:`` too)."""
    missing_colon = _SCHEME_WITHOUT_COLON.match(target)
    first = target.partition("/")[0]
    if missing_colon:
        meant = f"{missing_colon.group(1).lower()}://{target[missing_colon.end():]}"
    elif ":" not in first or _DRIVE.fullmatch(first):
        return None
    elif _HOST_PORT.match(first):
        meant = f"http://{target}"
    elif (scheme := _SCHEME_LIKE.match(target)) and scheme.group(1).lower() in ("http", "https"):
        meant = f"{scheme.group(1).lower()}://{target[scheme.end():]}"
    else:
        return "a store is an http(s):// SPARQL server or a directory"
    scheme_part, _, rest = meant.partition("://")
    authority, slash, path = rest.partition("/")
    return f"did you mean {scheme_part}://{authority.rpartition('@')[2]}{slash}{path}?"


def _refuse_url_lookalike(target: str) -> None:
    """Refuse a target that would make a new store directory but reads as a misspelt URL or a ``host:port``: an
    existing store of that name is opened as ever."""
    meant = _url_lookalike(target)
    if meant is None or (Path(target) / "CURRENT").is_file():
        return
    first = target.partition("/")[0]
    shown = "***@" + target.split("@", 1)[1] if "@" in first else target
    raise StoreError(f"the store {shown!r} looks like a URL, not a directory: {meant} (for a directory of that name, write ./{shown})")


def open_store(target: str | Path | None = None, *, read_only: bool = False, create: bool = True) -> TraceStore:
    """Open a store: an ``http(s)://`` URL (the scheme in any case) is a remote SPARQL 1.1 server, a path a directory
    (embedded; made when missing unless ``create`` is False, for commands that only change what is stored). Text
    that looks like a URL of another scheme, or like a misspelt URL or a ``host:port`` where no store is yet, is refused,
    never taken for a new directory."""
    if isinstance(target, Path):
        return EmbeddedStore(target, read_only=read_only, create=create)
    target = target or default_store_target()
    url = _URL.match(target)
    if url:
        scheme = url.group(1).lower()
        if scheme not in ("http", "https"):
            raise StoreError(f"{target.split('?')[0]!r} is a {scheme}:// URL; a store is an http(s):// SPARQL server or a directory")
        from dspy_rdf.store.remote import RemoteStore  # httpx is imported only for a remote store

        return RemoteStore(scheme + target[len(url.group(1)):])
    _refuse_url_lookalike(target)
    return EmbeddedStore(target, read_only=read_only, create=create)


def __getattr__(name: str) -> object:
    if name == "RemoteStore":  # imported on first use: it needs httpx
        from dspy_rdf.store.remote import RemoteStore

        return RemoteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
