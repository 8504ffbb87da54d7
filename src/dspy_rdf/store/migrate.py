"""Bring a store written by an earlier release to this release's trace keys (``dspy-rdf migrate``).

dspy-rdf 0.1.0 named each trace graph by a hash of the trace's JSON (``…sha256-<hex>``), which changed with the
path a trace took: a store dumped and loaded again, or one run recorded by two recorders, held the same execution
twice. This release names a program run by the execution it records and every other trace by its canonical content
(:mod:`dspy_rdf.canonical.identity`). :func:`migrate_store` reads each graph of the store, computes the IRI the trace has now,
writes the trace there (with this release's derived facts) and only then removes the old graph, so that a migration
stopped at any point loses nothing and running it again finishes it. Traces the old keys let in twice come to the
same new IRI: the first one written is kept and the others removed (``merged``). A trace already named by this
release's key but written with the derived facts of an earlier version (:data:`~dspy_rdf.rdf.writer.DERIVED_FACTS_VERSION`:
the facts the canned queries start from) is written again into its own graph, which adds the facts it lacks
(``refreshed``), unless the facts it lacks can be computed from its own triples (:data:`IN_PLACE_UPDATES`): then
SPARQL updates add them where the trace is, a few thousand traces at a time, none read back (``upgraded``: the
whole migration of 375,000 traces took 4 minutes, where writing each again takes about 7 ms a trace). Graphs that are current, and graphs not named by a dspy-rdf key at all, are left as they are.
Last, the store's ledger (:mod:`dspy_rdf.store.ledger`): one kept by an earlier release that covers every trace gains
this release's figures from a few queries over the triples (``ledger_upgraded``); one that does not cover every trace, or
has lost a maximum to removals, is built again by counting every trace (``ledger_traces``), so that the canned queries
that add up every execution, and ``stats``, read it instead of the triples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dspy_rdf.canonical.errors import RdfInputError, TraceInputError
from dspy_rdf.canonical.identity import LEGACY_KEY_PREFIX, key_of_iri
from dspy_rdf.rdf.formats import encode_trace
from dspy_rdf.store.base import EncodedTrace, TraceStore

__all__ = ["IN_PLACE_UPDATES", "MigrationReport", "migrate_store"]

_REFRESH_BATCH = 400
"""Traces given this release's derived facts in one write (about 100,000 triples of typical traces)."""

_IN_PLACE_BATCH = 5_000
"""Traces given the facts of a version in place by one call of the store, which sends them in updates of the size it
takes (:meth:`~dspy_rdf.store.TraceStore.add_facts_in_place`)."""


def _version_4_facts() -> str:
    from dspy_rdf.canonical.identity import order_key_sparql
    from dspy_rdf.rdf import vocab as v

    prefixes = f"PREFIX dspy: <{v.DSPY}>\nPREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    tools = (
        "INSERT { GRAPH ?g { ?g dspy:unanswered_tools ?name } }\n"
        "WHERE { SELECT DISTINCT ?g ?name WHERE {\n"
        "  VALUES ?g { {graphs} }\n"
        "  GRAPH ?g { ?g dspy:derived_facts_version ?version ; dspy:unanswered_tool_call_parts ?part . ?part rdfs:label ?label }\n"
        "  FILTER(?version = 3) BIND(STR(?label) AS ?name)\n"
        "} }"
    )
    # the version last: a migration stopped between the two finds the trace again, and adds what it lacks
    key = (
        "DELETE { GRAPH ?g { ?g dspy:derived_facts_version ?version } }\n"
        "INSERT { GRAPH ?g { ?g dspy:order_key ?key ; dspy:derived_facts_version 4 } }\n"
        "WHERE {\n"
        "  VALUES ?g { {graphs} }\n"
        "  GRAPH ?g { ?g dspy:derived_facts_version ?version } FILTER(?version = 3)\n"
        f"{order_key_sparql('?g', '?key')}\n"
        "}"
    )
    return prefixes + tools + " ;\n" + key + "\n"


IN_PLACE_UPDATES: dict[int, str] = {3: _version_4_facts()}
"""For a version of the derived facts, the SPARQL Update that brings a trace of that version to the next from its own
triples (``{graphs}``: the trace graphs it runs on), which ``migrate`` runs in place of writing each trace again:
version 4 added ``dspy:order_key`` (from the trace's IRI, as :func:`~dspy_rdf.canonical.identity.order_key` computes
it) and ``dspy:unanswered_tools`` (the names of the parts of ``dspy:unanswered_tool_call_parts``). Tests compare what
it leaves with what this release writes."""


@dataclass
class MigrationReport:
    """What :func:`migrate_store` did (or, with ``dry_run``, would do): ``moved`` pairs each old IRI with the IRI its
    trace has now; ``merged`` pairs each removed duplicate with the IRI of the copy that was kept; ``refreshed`` lists
    the traces given this release's derived facts in their own graph; ``current`` counts the graphs already as this
    release writes them, ``other`` lists the graphs named otherwise (left as they are), and ``failed`` the graphs that
    could not be read or written, with why (left as they are)."""

    moved: list[tuple[str, str]] = field(default_factory=list)
    merged: list[tuple[str, str]] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    upgraded: list[str] = field(default_factory=list)
    """The traces given the derived facts of a later version in place, from their own triples (:data:`IN_PLACE_UPDATES`)."""
    current: int = 0
    other: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    ledger_traces: int | None = None
    """The traces counted into a new ledger by reading each back (``None``: the ledger was current, or was upgraded;
    with ``dry_run``, ``-1``: it is not current)."""
    ledger_upgraded: int | None = None
    """The traces of an earlier release's ledger brought to this release's figures from a few queries over the triples (``None``: none)."""

    @property
    def examined(self) -> int:
        """How many graphs were looked at."""
        return len(self.moved) + len(self.merged) + len(self.refreshed) + len(self.upgraded) + self.current + len(self.other) + len(self.failed)


def migrate_store(
    store: TraceStore,
    *,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    ledger_progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Bring ``store`` to this release's trace keys, derived facts and ledger (see the module docstring); ``progress``
    is called with 1 for each graph examined, ``ledger_progress`` with 1 for each trace counted into the ledger.
    Nothing is redacted: each trace is written as it was stored."""
    from dspy_rdf.rdf.writer import stored_form

    report = MigrationReport()
    kept: set[str] = set()  # the new IRIs written, or found stored, in this migration
    upgradable = _upgrade_in_place(store, report, dry_run=dry_run, progress=progress)
    outdated = set(store.traces_with_outdated_facts()) - upgradable
    stale: list[EncodedTrace] = []  # traces to give this release's derived facts, written a batch at a time

    def refresh() -> None:
        refused = store.refresh(stale) if not dry_run else []
        gone = {iri for iri, _ in refused}
        report.failed.extend((iri, f"could not be written again: {why}") for iri, why in refused)
        report.refreshed.extend(item.iri for item in stale if item.iri not in gone)
        stale.clear()

    for iri in store.trace_iris():
        try:
            key = key_of_iri(iri)
            if key is None:
                report.other.append(iri)
                continue
            legacy = key.startswith(LEGACY_KEY_PREFIX)
            if iri in upgradable:  # counted by the step in place
                continue
            if not legacy and iri not in outdated:
                report.current += 1
                continue
            pairs = list(store.traces([iri]))
            if len(pairs) != 1:
                report.failed.append((iri, f"the graph holds {len(pairs)} traces, not one"))
                continue
            if not legacy:
                _, data = encode_trace(pairs[0][1], iri=iri)  # a trace that cannot be written fails alone
                stale.append(EncodedTrace(iri, data, data.count(b"\n")))
                if len(stale) >= _REFRESH_BATCH:
                    refresh()
                continue
            trace, base = pairs[0][1], iri[: -len(key)]
            new_iri = stored_form(trace, base=base, redactor=None)[0]
            if new_iri in kept or store.missing_traces([new_iri]) == []:
                report.merged.append((iri, new_iri))
            else:
                if not dry_run:
                    put = store.put([trace], base=base, redactor=None)
                    if put.failed:
                        report.failed.append((iri, f"could not be written under its new IRI: {put.failed[0][1]}"))
                        continue
                report.moved.append((iri, new_iri))
            kept.add(new_iri)
            if not dry_run:
                store.delete(iri)
        except (RdfInputError, TraceInputError) as exc:  # this graph only; a failing store stops the migration
            report.failed.append((iri, str(exc)))
        finally:
            if progress is not None and iri not in upgradable:
                progress(1)
    if stale:
        refresh()
    if not dry_run:
        report.ledger_upgraded = store.upgrade_ledger()
    if not store.ledger_is_current(maxima=True):
        report.ledger_traces = -1 if dry_run else store.rebuild_ledger(progress=ledger_progress)
    return report


def _upgrade_in_place(store: TraceStore, report: MigrationReport, *, dry_run: bool, progress: Callable[[int], None] | None) -> set[str]:
    """Bring the traces whose version of the derived facts reaches this release's by :data:`IN_PLACE_UPDATES` alone
    to this release, by updates over their own triples, a version at a time (with ``dry_run``, only find them);
    return their IRIs. Traces under a key of dspy-rdf 0.1.0 are left to the migration, which writes them again."""
    from dspy_rdf.rdf.writer import DERIVED_FACTS_VERSION

    # the versions from which every later version up to this release's has an update
    chain = [version for version in sorted(IN_PLACE_UPDATES) if all(later in IN_PLACE_UPDATES for later in range(version, DERIVED_FACTS_VERSION))]
    done: set[str] = set()
    for version in chain:  # in order: a trace brought from one version to the next is found again at the next
        found = [iri for iri in store.traces_with_facts_version(version) if (key := key_of_iri(iri)) is not None and not key.startswith(LEGACY_KEY_PREFIX)]
        for start in range(0, len(found), _IN_PLACE_BATCH):
            batch = found[start:start + _IN_PLACE_BATCH]
            if not dry_run:
                store.add_facts_in_place(batch, IN_PLACE_UPDATES[version])
            fresh = [iri for iri in batch if iri not in done]
            done.update(fresh)
            if progress is not None and fresh:
                progress(len(fresh))
    report.upgraded.extend(sorted(done))
    return done
