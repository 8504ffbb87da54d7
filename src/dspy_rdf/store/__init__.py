"""Trace stores: one named graph per trace, in an embedded pyoxigraph store on disk or on any SPARQL 1.1 server.

:func:`open_store` takes a directory (embedded, the default) or a URL, whose scheme picks the store: ``http`` and
``https`` are a SPARQL 1.1 server (remote). Every store implements :class:`~dspy_rdf.store.base.TraceStore`. Another
store plugs in the way the remote one does, by its URL scheme: :func:`register_store` from Python, or an entry point
of the ``dspy_rdf.stores`` group (see :mod:`dspy_rdf.plugins`); then ``--store scheme://...`` opens it everywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dspy_rdf.plugins import STORES_GROUP, load_plugin, plugin_names
from dspy_rdf.store.base import (
    DEFAULT_STORE,
    QUIET_STATS,
    STATS,
    STORE_ENV,
    EncodedTrace,
    PutReport,
    SparqlEngine,
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
    "QUIET_STATS",
    "STATS",
    "STORE_ENV",
    "EmbeddedStore",
    "EncodedTrace",
    "PutReport",
    "RemoteStore",
    "SparqlEngine",
    "SparqlJson",
    "StoreError",
    "StoreLockedError",
    "StoreOpener",
    "TraceStore",
    "check_trace_iri",
    "default_store_target",
    "encode_traces",
    "open_store",
    "register_store",
    "store_schemes",
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


def _shown_url(url: str) -> str:
    """A URL as an error shows it: no query, no credentials."""
    scheme, _, rest = url.split("?")[0].partition("://")
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{'***@' if '@' in authority else ''}{authority.rpartition('@')[2]}{slash}{path}"


def _refuse_url_lookalike(target: str) -> None:
    """Refuse a target that would make a new store directory but reads as a misspelt URL or a ``host:port``: an
    existing store of that name is opened as ever."""
    meant = _url_lookalike(target)
    if meant is None or (Path(target) / "CURRENT").is_file():
        return
    first = target.partition("/")[0]
    shown = "***@" + target.split("@", 1)[1] if "@" in first else target
    raise StoreError(f"the store {shown!r} looks like a URL, not a directory: {meant} (for a directory of that name, write ./{shown})")


class StoreOpener(Protocol):
    """What opens a store for the URLs of one scheme: called with the whole URL as given (credentials included),
    ``read_only`` for the commands that only read, ``create`` False for those that only change what is stored."""

    def __call__(self, url: str, *, read_only: bool, create: bool) -> TraceStore: ...


def _open_remote(url: str, *, read_only: bool, create: bool) -> TraceStore:
    from dspy_rdf.store.remote import RemoteStore  # httpx is imported only for a remote store

    scheme, _, rest = url.partition("://")
    return RemoteStore(f"{scheme.lower()}://{rest}")


_OPENERS: dict[str, StoreOpener] = {"http": _open_remote, "https": _open_remote}


def register_store(scheme: str, opener: StoreOpener | Callable[..., TraceStore]) -> None:
    """Open the URLs of ``scheme`` (``scheme://...``, any case) with ``opener``, as ``http`` opens a SPARQL server."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        raise ValueError(f"{scheme!r} is not a URL scheme")
    _OPENERS[scheme.lower()] = opener


def store_schemes() -> list[str]:
    """The URL schemes a store can be opened with: the built-in ones, those registered, those of installed plugins."""
    return sorted(set(_OPENERS) | {name.lower() for name in plugin_names(STORES_GROUP)})


def _opener(scheme: str) -> StoreOpener | None:
    if scheme not in _OPENERS:
        found = load_plugin(STORES_GROUP, scheme)
        if found is None:
            return None
        _OPENERS[scheme] = found
    return _OPENERS[scheme]


def open_store(target: str | Path | None = None, *, read_only: bool = False, create: bool = True) -> TraceStore:
    """Open a store: a URL is opened by the store of its scheme (``http(s)``: a SPARQL 1.1 server; others as
    registered), a path is a directory (embedded; made when missing unless ``create`` is False, for commands that
    only change what is stored). A URL of no known scheme, or text that looks like a misspelt URL or a ``host:port``
    where no store is yet, is refused, never taken for a new directory."""
    if isinstance(target, Path):
        return EmbeddedStore(target, read_only=read_only, create=create)
    target = target or default_store_target()
    url = _URL.match(target)
    if url:
        scheme = url.group(1).lower()
        opener = _opener(scheme)
        if opener is None:
            others = [f"{name}://" for name in store_schemes() if name not in ("http", "https")]
            also = f" or a URL of {', '.join(others)}" if others else ""
            raise StoreError(f"{_shown_url(target)!r} is a {scheme}:// URL; a store is an http(s):// SPARQL server or a directory{also}")
        store = opener(target, read_only=read_only, create=create)
        if not isinstance(store, TraceStore):
            raise StoreError(f"the store for {scheme}:// URLs gave a {type(store).__name__}, not a TraceStore")
        return store
    _refuse_url_lookalike(target)
    return EmbeddedStore(target, read_only=read_only, create=create)


def __getattr__(name: str) -> object:
    if name == "RemoteStore":  # imported on first use: it needs httpx
        from dspy_rdf.store.remote import RemoteStore

        return RemoteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
