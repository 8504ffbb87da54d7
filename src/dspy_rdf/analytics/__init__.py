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
    from dspy_rdf.analytics.catalog import QueryResult, list_queries, run_query

__getattr__, __dir__, __all__ = lazy_exports(globals(), {"dspy_rdf.analytics.catalog": ("list_queries", "run_query", "QueryResult")})
