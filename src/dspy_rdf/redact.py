"""Redaction of secrets at export time, on by default.

Traces carry whatever providers and DSPy put in them, including live credentials: DSPy 3.3.1 copies an API key
given to the LM constructor into the request config's ``extensions["api_key"]`` (and legacy history dicts keep
it in ``kwargs``). Before a trace is written (to a file, a store, or by the capture sinks) a :class:`Redactor`
replaces:

- every match of a well-known secret pattern in any text of the trace (OpenAI, Anthropic, Google, AWS access
  key ids, GitHub and Slack tokens, ``Bearer`` tokens);
- the value of every JSON field whose name says it is a secret (``api_key``, ``Authorization``, ``password``,
  ``secret``, ``access_token``, ``aws_secret_access_key``, ...; compared without case, ``-`` or ``_``), anywhere in
  JSON-valued slots (``extensions``, ``provider_data``, ``metadata``, ``extra_fields``, tool ``args``, ...);

by a marker ``[REDACTED:kind]`` that says what was removed, and records ``{kind: count}`` in the trace's
``redactions`` slot, so the graph says that redaction happened. The trace given is never modified: a redacted
copy is returned (the same object when nothing matched).

Users add patterns and field names, pass a callable for their own rules, or turn it off (``--no-redact``,
``redactor=None``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dspy_rdf import model as m

__all__ = ["DEFAULT_FIELDS", "DEFAULT_PATTERNS", "DEFAULT_REDACTOR", "Redactor", "marker"]

DEFAULT_PATTERNS: dict[str, str] = {
    # Order matters where patterns overlap: Anthropic keys also start with "sk-".
    "anthropic_api_key": r"sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_api_key": r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "google_api_key": r"AIza[0-9A-Za-z_\-]{35}",
    "aws_access_key_id": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github_token": r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    "bearer_token": r"(?<=(?:[Bb]earer|BEARER) )[A-Za-z0-9\-._~+/]{16,}=*",
}
"""Kind of secret -> regular expression, applied to every string of a trace."""

DEFAULT_FIELDS: frozenset[str] = frozenset(
    {"apikey", "xapikey", "authorization", "proxyauthorization", "password", "passwd", "secret", "clientsecret"}
    | {"secretkey", "accesstoken", "refreshtoken", "idtoken", "sessiontoken", "bearertoken", "authtoken", "privatekey"}
    | {"awssecretaccesskey", "awssessiontoken", "cookie", "setcookie", "accesskey"}
)
"""Names of JSON fields whose values are secrets, normalized: lower case without ``-`` and ``_``. A bare
``token`` is not one: logprobs entries name each generated token ``token``."""

_FIELD_KIND = "secret_field"
_RDF_JSON_SUFFIX = "^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON>"
_JSON_KEY = re.compile(r'"([^"\\]{1,64})":')
# Literal text every match of a default pattern contains (secrets are ASCII, so canonical JSON holds them as is).
_DEFAULT_PREFIXES: dict[str, tuple[str, ...]] = {
    "anthropic_api_key": ("sk-ant-",),
    "openai_api_key": ("sk-",),
    "google_api_key": ("AIza",),
    "aws_access_key_id": ("AKIA", "ASIA"),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "slack_token": ("xox",),
    "bearer_token": ("earer ", "EARER "),
}


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def _normalized(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


class Redactor:
    """Replaces secrets in traces (see the module docstring).

    ``extra_patterns`` adds ``{kind: regex}``; ``extra_fields`` adds field names; ``callback(text) -> text``
    runs on every string after the patterns (return it unchanged to keep it; anything it changes is counted
    as kind ``custom``). ``patterns``/``fields`` replace the defaults entirely.
    """

    def __init__(
        self,
        *,
        extra_patterns: Mapping[str, str] | None = None,
        extra_fields: Iterable[str] = (),
        callback: Callable[[str], str] | None = None,
        patterns: Mapping[str, str] | None = None,
        fields: Iterable[str] | None = None,
    ) -> None:
        chosen = dict(DEFAULT_PATTERNS if patterns is None else patterns)
        chosen.update(extra_patterns or {})
        for kind, regex in chosen.items():
            if not re.fullmatch(r"[A-Za-z0-9_]+", kind):
                raise ValueError(f"redaction kind {kind!r} must be letters, digits and _ only")
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValueError(f"redaction pattern for {kind!r} is not a valid regular expression: {exc}") from None
        self.patterns = chosen
        # One pass per string: an alternation of named groups, one per kind.
        try:
            self._combined = re.compile("|".join(f"(?P<{kind}>{regex})" for kind, regex in chosen.items())) if chosen else None
        except re.error as exc:  # e.g. a global flag such as (?i) inside one pattern: use (?i:...) instead
            raise ValueError(f"redaction patterns cannot be combined: {exc}; use scoped flags such as (?i:...)") from None
        self.fields = frozenset(_normalized(f) for f in (DEFAULT_FIELDS if fields is None else fields)) | {
            _normalized(f) for f in extra_fields
        }
        self.callback = callback
        # A cheap test on a trace's canonical JSON that rules out most traces without walking them: literal
        # prefixes for the default patterns, and the JSON keys. It cannot vouch for a callback, for user patterns
        # (they may be anchored, or match characters JSON escapes) or for field names its key scan cannot see.
        self._prefixes = tuple(p for kind, p in _DEFAULT_PREFIXES.items() if kind in chosen and chosen[kind] == DEFAULT_PATTERNS[kind])
        user_patterns = any(k not in _DEFAULT_PREFIXES or r != DEFAULT_PATTERNS[k] for k, r in chosen.items())
        odd_fields = any(len(f) > 64 or '"' in f or "\\" in f for f in self.fields)
        self._always_walk = callback is not None or user_patterns or odd_fields

    def may_hold_secrets(self, canonical_json: str) -> bool:
        """Whether a trace with this canonical JSON could have something to redact (False is certain)."""
        if self._always_walk:
            return True
        text = canonical_json
        if any(prefix in text for group in self._prefixes for prefix in group):
            return True
        fields = self.fields
        return any(_normalized(key) in fields for key in set(_JSON_KEY.findall(text)))

    def __call__(self, trace: m.Trace) -> m.Trace:
        """A copy of ``trace`` with its secrets replaced and counted in ``redactions`` (``trace`` itself if none)."""
        counts: Counter[str] = Counter()
        redacted = self._value(trace, counts)
        if not counts:
            return trace
        total = Counter(trace.redactions)
        total.update(counts)
        return dataclasses.replace(redacted, redactions=dict(sorted(total.items())))

    def redact_text(self, text: str) -> str:
        """One text with the secrets the patterns (and the callback) find replaced, as in a trace."""
        return self._text(text, Counter())

    def redact_json(self, value: Any) -> Any:
        """One JSON value with its secrets replaced (by field name and by pattern), as in a trace's JSON slots."""
        return self._json(value, Counter())

    def redact_term_text(self, term: str) -> str:
        """An RDF term written as N-Triples text (as validation reports show values): the lexical form of an
        ``rdf:JSON`` literal redacted as JSON, any other text by pattern."""
        import json

        if term.startswith('"') and term.endswith(_RDF_JSON_SUFFIX):
            from rdflib.util import from_n3

            try:
                value = json.loads(str(from_n3(term)))
            except (ValueError, TypeError):
                return self.redact_text(term)
            redacted = self.redact_json(value)
            if redacted is value:
                return self.redact_text(term)
            import rdflib

            text = json.dumps(redacted, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return rdflib.Literal(text, datatype=rdflib.RDF.JSON).n3()
        return self.redact_text(term)

    # --- walking the model: a new object only where something changed ----------------------------------------

    def _value(self, value: Any, counts: Counter[str]) -> Any:
        if isinstance(value, (str, dict, list)):
            return self._json(value, counts)
        if dataclasses.is_dataclass(value) and not isinstance(value, (type, m.PartRef)):
            changes = {}
            for f in dataclasses.fields(value):
                if f.name in ("part_type", "redactions"):
                    continue
                old = getattr(value, f.name)
                if isinstance(old, list) and old and dataclasses.is_dataclass(old[0]):
                    new_items = [self._value(item, counts) for item in old]
                    new = new_items if any(a is not b for a, b in zip(new_items, old)) else old
                else:
                    new = self._value(old, counts)
                if new is not old:
                    changes[f.name] = new
            return dataclasses.replace(value, **changes) if changes else value
        return value

    def _json(self, root: Any, counts: Counter[str]) -> Any:
        """Redact a JSON value, iteratively (JSON may be nested as deep as Python's json reads, deeper than the
        call stack allows a recursive walk); containers are copied only where something changed."""
        if not isinstance(root, (dict, list)):
            return self._text(root, counts) if isinstance(root, str) else root

        def frame(node: dict | list) -> list:  # [node, items, next index, new items, changed]
            return [node, list(node.items()) if isinstance(node, dict) else list(enumerate(node)), 0, [], False]

        stack = [frame(root)]
        while True:
            top = stack[-1]
            node, items, index, out, changed = top
            if index == len(items):
                built = node if not changed else dict(out) if isinstance(node, dict) else [item for _, item in out]
                stack.pop()
                if not stack:
                    return built
                parent = stack[-1]
                key, original = parent[1][parent[2]]
                parent[3].append((key, built))
                parent[4] = parent[4] or built is not original
                parent[2] += 1
                continue
            key, item = items[index]
            if isinstance(node, dict) and isinstance(key, str) and item not in (None, "") and _normalized(key) in self.fields:
                new = marker(_FIELD_KIND)
                if item != new:
                    counts[_FIELD_KIND] += 1
            elif isinstance(item, (dict, list)):
                stack.append(frame(item))
                continue
            else:
                new = self._text(item, counts) if isinstance(item, str) else item
            out.append((key, new))
            top[4] = changed or new is not item
            top[2] = index + 1

    def _text(self, text: str, counts: Counter[str]) -> str:
        result = text
        if self._combined is not None and self._combined.search(text) is not None:

            def replace(match: re.Match[str]) -> str:
                kind = match.lastgroup or "secret"
                counts[kind] += 1
                return marker(kind)

            result = self._combined.sub(replace, text)
        if self.callback is not None:
            custom = self.callback(result)
            if custom != result:
                counts["custom"] += 1
                result = custom
        return result if result != text else text


DEFAULT_REDACTOR = Redactor()
"""What every export uses unless told otherwise: the default patterns and field names."""
