"""Analytics over a store: the named SPARQL queries of ``queries/*.rq`` and raw SPARQL checked read-only
(:mod:`.catalog`), and the HTML report built from them (:mod:`.report`).

>>> from dspy_rdf.analytics import list_queries
>>> "tokens_per_model" in [query.name for query in list_queries()]
True
"""

from __future__ import annotations

from dspy_rdf.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dspy_rdf.analytics.catalog import (
        FORMATS,
        UNKNOWN,
        NamedQuery,
        Parameter,
        QueryResult,
        bind_parameters,
        check_user_sparql,
        get_query,
        list_queries,
        run_query,
        sparql_term,
    )

_HOMES = {
    "dspy_rdf.analytics.catalog": (
        "FORMATS",
        "UNKNOWN",
        "NamedQuery",
        "Parameter",
        "QueryResult",
        "bind_parameters",
        "check_user_sparql",
        "get_query",
        "list_queries",
        "run_query",
        "sparql_term",
    ),
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
