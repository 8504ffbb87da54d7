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


def open_store(target: str | Path | None = None, *, read_only: bool = False, create: bool = True) -> TraceStore:
    """Open a store: an ``http(s)://`` URL (the scheme in any case) is a remote SPARQL 1.1 server, a path a directory
    (embedded; made when missing unless ``create`` is False, for commands that only change what is stored). Text
    that looks like a URL of another scheme is refused, never taken for a directory."""
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
    return EmbeddedStore(target, read_only=read_only, create=create)


def __getattr__(name: str) -> object:
    if name == "RemoteStore":  # imported on first use: it needs httpx
        from dspy_rdf.store.remote import RemoteStore

        return RemoteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
