"""Redaction of secrets at export time, on by default, and of every message dspy-rdf prints.

Traces carry whatever providers and DSPy put in them, including live credentials: DSPy 3.3.1 copies an API key
given to the LM constructor into the request config's ``extensions["api_key"]`` (and legacy history dicts keep
it in ``kwargs``). Before a trace is written (to a file, a store, or by the capture sinks), and before a report or
an error message shows a value, a :class:`Redactor` replaces:

- every match of a well-known secret pattern in any text (:data:`DEFAULT_PATTERNS`): the key formats of OpenAI,
  Anthropic, Google, AWS, GitHub, Slack, Hugging Face, Stripe (keys and webhook secrets) and Groq, the keys and
  shared access signatures of Azure connection strings (``AccountKey=``, ``SharedAccessKey=``,
  ``SharedAccessSignature``), JSON Web Tokens, PEM and PGP private key blocks, ``Bearer`` tokens and ``Basic``
  credentials, the user and password of a URL (``https://user:pass@host``, ``redis://:pass@host``), and credential
  parameters of a URL's query or fragment (``?key=``, ``?api_key=``, ``?sig=``, ``?refresh_token=``, ``?id_token=``,
  ``X-Amz-Signature=``, ``X-Amz-Credential=``, ``X-Amz-Security-Token=``, ``#access_token=``, ...);
- the value of every JSON field whose name says it is a secret (:func:`is_secret_field`): names are compared in
  lower case without ``-``, ``_``, ``.`` or spaces, and a name that *contains* ``apikey``, ``password``, ``passwd``,
  ``passphrase``, ``secret``, ``token``, ``credential``, ``privatekey``, ``accesskey``, ``authorization``,
  ``cookie`` or ``connectionstring`` is one, and so are ``pwd``, ``auth``, ``sig``, ``sas`` and ``bearer``, a name
  whose last word is ``dsn`` (``sentry_dsn``), and a name whose last word is ``key`` or ``keys`` after a word that
  does not say it is a data key (``stripe_key``, ``signingKey``, ``ocp-apim-subscription-key``; not ``primary_key``,
  ``cache_key``, ``idempotency_key``: :data:`DATA_KEY_WORDS`). Not secrets: a name whose last word says it
  describes a secret (``password_min_length``, ``api_key_name``, ``credential_type``: :data:`DESCRIBING_WORDS`),
  the token counts of the allow-list :data:`ALLOWED_FIELDS` (``max_tokens``, ``total_tokens``, the ``token`` of a
  logprobs entry), and a ``true`` or ``false`` value (a yes or no holds no secret). Words are split at ``-``,
  ``_``, ``.``, spaces, camelCase humps and before digits, a trailing number dropped. Fields are redacted anywhere
  in JSON-valued slots (``extensions``, ``provider_data``, ``metadata``, ``extra_fields``, tool ``args``, ...). A
  JSON Schema under a secret's name (a tool's ``parameters`` with a property ``api_key``: every key a schema
  keyword, and a ``type`` naming a JSON type, a ``$ref``, ``anyOf``, ``oneOf``, ``allOf`` or ``properties``)
  describes the secret: it is kept, but for the values it gives (``default``, ``const``, ``enum``, ``examples``,
  ``example``), which are redacted; anything else under a secret's name (a credentials object) is replaced whole;

by a marker ``[REDACTED:kind]`` that says what was removed, and records ``{kind: count}`` in the trace's
``redactions`` slot, so the graph says that redaction happened. The trace given is never modified: a redacted
copy is returned (the same object when nothing matched).

Users add patterns and field names, pass a callable for their own rules, or turn it off (``--no-redact``,
``redactor=None``). A pattern that matches the empty string somewhere in a varied sample text (a lookaround alone
such as ``(?=[A-Z])``, ``x?``, ``a|``) is refused: it would write markers between the characters of values; and an
empty match of a pattern never replaces anything. The values the model itself gives (a trace's kind and source
format, the times written as ``xsd:dateTime``) are left alone.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from dspy_rdf.canonical import model as m

__all__ = [
    "ALLOWED_FIELDS", "DATA_KEY_WORDS", "DEFAULT_FIELDS", "DEFAULT_PATTERNS", "DEFAULT_REDACTOR", "DESCRIBING_WORDS",
    "TEXT_KEY", "Redactor", "is_secret_field", "marker", "text_keys",
]  # fmt: skip

_URL_PARAMETERS = (
    "key", "api_key", "apikey", "api-key", "access_token", "refresh_token", "id_token", "token", "sig", "signature",
    "password", "secret", "client_secret", "code",
    # presigned URLs of AWS S3 (signature version 4) and Google Cloud Storage
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential",
)  # fmt: skip
DEFAULT_PATTERNS: dict[str, str] = {
    # Order matters where patterns overlap: Anthropic keys also start with "sk-"; Stripe's with "sk_".
    "anthropic_api_key": r"sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_api_key": r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "stripe_key": r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    "stripe_webhook_secret": r"\bwhsec_[A-Za-z0-9+/]{20,}={0,2}",
    "groq_api_key": r"\bgsk_[A-Za-z0-9]{20,}",
    "huggingface_token": r"\bhf_[A-Za-z0-9]{30,}",
    "google_api_key": r"AIza[0-9A-Za-z_\-]{35}",
    "aws_access_key_id": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "azure_storage_key": r"(?<=AccountKey=)[A-Za-z0-9+/]{20,}={0,2}",
    # Service Bus and Event Hubs connection strings, and shared access signatures (a connection string's
    # SharedAccessSignature=sv=...&sig=..., or a token SharedAccessSignature sr=...&sig=...&se=...&skn=...)
    "azure_shared_access_key": r"(?<=SharedAccessKey=)[A-Za-z0-9+/]{20,}={0,2}",
    "azure_shared_access_signature": r"(?<=SharedAccessSignature[= ])s[a-z]{1,4}=[^;\s\"'<>]+",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    "json_web_token": r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    # each BEGIN looks for its END no further than the next BEGIN, so that text of many BEGINs and no END costs time
    # linear in its length (a lazy search to the end of the text from every BEGIN was quadratic)
    "private_key": r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:(?!-----BEGIN )[\s\S])*?-----END [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----",
    "bearer_token": r"(?<=[Bb]earer )[A-Za-z0-9\-._~+/]{16,}=*|(?<=BEARER )[A-Za-z0-9\-._~+/]{16,}=*",
    "basic_credentials": r"(?<=[Bb]asic )[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])|(?<=BASIC )[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])",
    "digest_response": r'(?<=response=")[0-9a-fA-F]{32,}',
    # the user may be empty (redis://:password@host)
    "url_credentials": r"(?<=://)[^\s/?#@:\"'<>]*:[^\s/?#@\"'<>]+(?=@)",
    # in the query or the fragment (an OAuth implicit grant returns #access_token=...); the leading (?<==) lets the
    # engine drop every position that does not follow a "=" before it tries the names
    "url_credential_parameter": "(?<==)(?i:" + "|".join(f"(?<=[?&#]{re.escape(name)}=)" for name in _URL_PARAMETERS) + ")[^&#\\s\"'<>]+",
}
"""Kind of secret -> regular expression, applied to every string of a trace and to every message shown."""

_SECRET_WORDS = (
    "apikey", "password", "passwd", "passphrase", "secret", "token", "credential", "privatekey", "accesskey",
    "authorization", "cookie", "connectionstring",
)  # fmt: skip
# Not "signature": the signature of a thinking block (Anthropic, Gemini) is not a credential, and a provider needs it
# back to continue the conversation; a signature in a URL (``?signature=``, ``?sig=``) is redacted as a parameter.
_SECRET_NAMES = frozenset({"pwd", "auth", "sig", "sas", "sastoken", "bearer"})
# A DSN carries credentials (postgresql://user:password@host/db, a Sentry DSN's key): "dsn", "sentry_dsn".
_SECRET_LAST_WORDS = frozenset({"dsn"})
DEFAULT_FIELDS: frozenset[str] = frozenset(_SECRET_WORDS) | _SECRET_NAMES | _SECRET_LAST_WORDS
"""The words that make a JSON field name a secret (contained in the normalized name), the names that are one whole
(``pwd``, ``auth``, ``sig``, ``sas``, ``bearer``) and the last words that make one (``dsn``); see
:func:`is_secret_field`."""

ALLOWED_FIELDS: frozenset[str] = frozenset({"token", "tokens", "toplogprobs"})
"""Normalized field names that contain a secret word and are not secrets: a logprobs entry's ``token``. Beyond these,
``token`` followed by ``s`` (``max_tokens``, ``total_tokens``, ``prompt_tokens_details``) is a count, unless what
precedes it names a credential (``api_tokens``, ``access_tokens``), and ``token`` followed by ``count``, ``usage``,
``limit``, ``type``, ``id`` or ``izer`` is not a secret either; a name with any other secret word is one."""

DESCRIBING_WORDS: frozenset[str] = frozenset({
    "length", "lengths", "len", "count", "counts", "limit", "limits", "min", "max", "minimum", "maximum", "policy",
    "policies", "rule", "rules", "required", "enabled", "disabled", "type", "types", "format", "formats", "hint",
    "hints", "field", "fields", "name", "names", "ttl", "expiry", "lifetime",
})  # fmt: skip
"""Last words of a field name that say the field describes a secret rather than holds one: ``password_min_length``,
``api_key_name``, ``credential_type``, ``secretRequired``. Such a field is not a secret (words are split at ``-``,
``_``, ``.``, spaces, camelCase humps and before digits, and a trailing number is dropped)."""

DATA_KEY_WORDS: frozenset[str] = frozenset({
    # keys of databases, stores and data structures
    "primary", "foreign", "unique", "composite", "compound", "natural", "surrogate", "candidate", "sort", "partition",
    "shard", "cluster", "clustering", "range", "hash", "row", "column", "index", "lookup", "join", "table",
    "document", "object", "bucket", "record", "item", "entity", "node", "dict", "map", "group", "cursor", "page",
    "order", "sequence",
    # caches, idempotency and messaging
    "cache", "idempotency", "dedup", "dedupe", "deduplication", "routing", "message", "event", "queue", "topic",
    "stream", "lock",
    # names of entries in a program's data (a DSPy example's input_keys, an output_key, a prompt_cache_key)
    "input", "output", "answer", "label", "field", "example", "prompt", "template", "metric", "module", "tool",
    "trace", "run", "span", "request", "response", "result", "config", "setting", "settings", "metadata",
    "attribute", "property", "translation", "locale", "version", "schema", "type", "kind", "name", "parent", "child",
    "state",
    # public by design, and the keys of a keyboard
    "public", "publishable", "hot", "shortcut", "modifier",
})  # fmt: skip
"""Words that, just before a last word ``key`` or ``keys``, say the key is not a credential: ``primary_key``,
``cache_key``, ``sort_key``, ``idempotency_key``, ``partition_key``, ``input_keys``, ``public_key``. Any other word
there makes the field a secret (``stripe_key``, ``signingKey``, ``encryption_key``, ``ocp-apim-subscription-key``,
``openai_key``: vendors and purposes of credentials are an open set); ``key`` and ``keys`` alone are not secrets (a
key-value entry's ``key``, a prompt cache ``key``), nor is a word merely ending in ``key`` (``monkey``, ``hotkey``)."""

_CREDENTIAL_TOKENS = ("access", "refresh", "id", "session", "bearer", "auth", "api", "oauth", "csrf", "personalaccess", "service")
_FIELD_KIND = "secret_field"
_RDF_JSON_SUFFIX = "^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON>"
_SEPARATORS = str.maketrans("", "", "-_. ")
_WORD_SEPARATOR = re.compile(r"[-_. ]+")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])")
_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_SCHEMA_VALUE_KEYWORDS = frozenset({"default", "const", "enum", "examples", "example"})
_SCHEMA_KEYWORDS = _SCHEMA_VALUE_KEYWORDS | frozenset({
    "$schema", "$id", "$ref", "$defs", "$comment", "$anchor", "$dynamicRef", "$dynamicAnchor", "definitions",
    "type", "title", "description", "deprecated", "readOnly", "writeOnly", "nullable", "format", "pattern",
    "minLength", "maxLength", "contentEncoding", "contentMediaType", "contentSchema", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "items", "prefixItems", "additionalItems", "contains",
    "minContains", "maxContains", "minItems", "maxItems", "uniqueItems", "unevaluatedItems", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "required", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "not",
    "if", "then", "else", "discriminator", "strict",
})  # fmt: skip
# Values the model itself gives, never a secret, which a user's pattern must not touch: closed vocabularies (a
# marker in a trace's source_kind makes it unwritable) and times written as xsd:dateTime (a marker in one would
# write an invalid literal).
_MODEL_VALUES = frozenset({
    "redactions", "source_kind", "source_format", "detail", "mode", "pairing", "timestamp", "started_at", "ended_at",
})  # fmt: skip
_JSON_KEY = re.compile(r'"([^"\\]{1,80})":')
# Keys in text a string holds: a JSON document kept as a string (a tool call's raw arguments), escaped once more in
# canonical JSON; a Python repr ({'api_key': ...}, api_key='...'). The pre-check looks for them as for JSON keys.
TEXT_KEY = re.compile(r'\\+"([^"\\]{1,80})\\+":|\'([^\'\\]{1,80})\':|\b([A-Za-z_][A-Za-z0-9_]{0,79})=\\*[\'"]')
_EQUALS_QUOTE = re.compile(r"=\\*['\"]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,79}")


def text_keys(text: str) -> set[str]:
    """Every key :data:`TEXT_KEY` matches at any position of ``text``: a superset of what ``TEXT_KEY.findall``
    gives (which skips matches that overlap one found before), found from the literal end of each form.

    ``TEXT_KEY.findall`` tries each of its three forms at every character of the text (0.8 ms for the 13 KB of a
    typical trace, a third of writing it); the ends of the forms (``\\":``, ``':`` and ``=`` before a quote) are
    rare and found by a C-level search, and each names at most one key, read back from it."""
    keys: set[str] = set()
    end = text.find('\\":')
    while end != -1:  # \"key\": (any number of backslashes each side): the key runs back to a quote after a backslash
        stop = end
        while stop > 0 and text[stop - 1] == "\\":
            stop -= 1
        quote = text.rfind('"', max(0, stop - 81), stop)
        if 0 < quote < stop - 1 and text[quote - 1] == "\\" and "\\" not in text[quote + 1 : stop]:
            keys.add(text[quote + 1 : stop])
        end = text.find('\\":', end + 1)
    end = text.find("':")
    while end != -1:  # 'key':
        quote = text.rfind("'", max(0, end - 81), end)
        if quote != -1 and quote < end - 1 and "\\" not in text[quote + 1 : end]:
            keys.add(text[quote + 1 : end])
        end = text.find("':", end + 1)
    def word_character_before(at: int) -> bool:  # what \b looks at: str.isalnum() or _ is exactly \w
        return at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")

    for found in _EQUALS_QUOTE.finditer(text):  # key=' or key=" (with escapes): the key is the word before the =
        stop = found.start()
        start = stop
        while stop - start <= 80 and word_character_before(start):
            start -= 1
        # the whole word (a \b before it): no word character before the key, which is an ASCII identifier
        if start < stop and not word_character_before(start) and _IDENTIFIER.fullmatch(text, start, stop):
            keys.add(text[start:stop])
    return keys

# A field and its value in such text, each quote written with the same escapes: "k": "v", \"k\": \"v\", 'k': 'v',
# k='v', k="v". The value runs to the first closing quote of the same form; its escaped characters are skipped.
# Every repetition is bounded (a value of at most 16,384 characters is looked at), so that text made to defeat it
# costs time linear in its length.
_TEXT_PAIR = re.compile(
    r'(?P<e>\\{0,7})"(?P<k1>[^"\\]{1,80})(?P=e)"[ \t]{0,8}:[ \t]{0,8}(?P=e)"(?P<v1>(?:[^"\\]|\\(?!(?P=e)")[\s\S]){0,16384}?)(?P=e)"'
    r"|'(?P<k2>[^'\\]{1,80})'[ \t]{0,8}:[ \t]{0,8}'(?P<v2>(?:[^'\\]|\\[\s\S]){0,16384}?)'"
    r'|\b(?P<k3>[A-Za-z_][A-Za-z0-9_]{0,79})=(?P<q>[\'"])(?P<v3>(?:(?!(?P=q))[^\\]|\\[\s\S]){0,16384}?)(?P=q)'
)
# Literal text that at least one match of each default pattern contains (secrets are ASCII, so canonical JSON holds
# them as they are), tested with `in` (a C-level search); the patterns that need context are gated by a character
# they cannot match without ("=" for URL parameters and Azure keys, "://" for URL credentials), then run themselves.
_DEFAULT_MARKERS: dict[str, tuple[str, ...]] = {
    "anthropic_api_key": ("sk-",),
    "openai_api_key": ("sk-",),
    "stripe_key": ("_live_", "_test_"),
    "stripe_webhook_secret": ("whsec_",),
    "groq_api_key": ("gsk_",),
    "huggingface_token": ("hf_",),
    "google_api_key": ("AIza",),
    "aws_access_key_id": ("AKIA", "ASIA"),
    "slack_token": ("xox",),
    "json_web_token": ("eyJ",),
    "private_key": ("PRIVATE KEY",),
    "bearer_token": ("earer ", "EARER "),
    "basic_credentials": ("asic ", "ASIC "),
    "digest_response": ('response=\\"',),
}
# Patterns that need context (a lookbehind) are confirmed by a quicker pattern that starts with a literal or a rare
# character, which re finds without trying every position.
_NARROW: dict[str, tuple[str, re.Pattern[str]]] = {
    "github_token": ("gh", re.compile(r"gh[pousr]_|github_pat_")),
    "azure_storage_key": ("AccountKey=", re.compile(r"AccountKey=[A-Za-z0-9+/]{20,}")),
    "azure_shared_access_key": ("SharedAccessKey=", re.compile(r"SharedAccessKey=[A-Za-z0-9+/]{20,}")),
    "azure_shared_access_signature": ("SharedAccessSignature", re.compile(r"SharedAccessSignature[= ]s[a-z]{1,4}=")),
    "url_credentials": ("://", re.compile(r"://[^\s/?#@:\"'<>]*:[^\s/?#@\"'<>]+@")),
    "url_credential_parameter": ("=", re.compile("[?&#](?=[A-Za-z])(?i:" + "|".join(re.escape(n) for n in _URL_PARAMETERS) + ")=[^&#\\s\"'<>]")),
}


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def _normalized(name: str) -> str:
    return name.lower().translate(_SEPARATORS)


def _words(name: str) -> list[str]:
    """The words of a field name in lower case, without a trailing number: ``"ocp-apim-subscription-key"``,
    ``"signingKey"``, ``"APIKey"`` and ``"encryption_key_2"`` are split at separators, camelCase humps and digits."""
    words = [word for word in _WORD_SEPARATOR.split(_CAMEL_HUMP.sub(" ", name).lower()) if word]
    while len(words) > 1 and words[-1].isdigit():
        words.pop()
    return words


@lru_cache(maxsize=4096)
def is_secret_field(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a JSON field of this name holds a secret (see the module docstring); ``extra`` are more normalized
    names that are secrets whole."""
    n = _normalized(name)
    if n in extra or n in _SECRET_NAMES:
        return True
    words = _words(name)
    if len(words) > 1 and words[-1] in DESCRIBING_WORDS:  # password_min_length: about a secret, not one
        return False
    if words and words[-1] in _SECRET_LAST_WORDS:
        return True
    if len(words) > 1 and words[-1] in ("key", "keys") and words[-2] not in DATA_KEY_WORDS:
        return True
    secret_words = [w for w in _SECRET_WORDS if w in n]
    if not secret_words:
        return False
    if secret_words == ["token"]:
        if n in ALLOWED_FIELDS:
            return False
        at = n.find("token")
        before, after = n[:at], n[at + len("token"):]
        if after.startswith("s"):  # "max_tokens", "prompt_tokens_details": counts, unless of credentials ("api_tokens")
            return before.endswith(_CREDENTIAL_TOKENS)
        return not after.startswith(("count", "usage", "limit", "type", "id", "izer", "logprob"))
    return True


def _is_json_schema(value: dict) -> bool:
    """Whether a dict is a JSON Schema: every key a JSON Schema keyword, and a ``type`` naming a JSON type (or a
    reference or combination of schemas, or properties)."""
    if not all(key in _SCHEMA_KEYWORDS for key in value):
        return False
    kind = value.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kinds and all(isinstance(k, str) and k in _JSON_TYPES for k in kinds):
        return True
    return any(key in value for key in ("$ref", "anyOf", "oneOf", "allOf", "properties"))


# Texts on which a pattern is tried for empty matches: letters of both cases, digits, punctuation, spaces and line
# breaks, JSON as traces hold it, a timestamp, a URL, and text beyond ASCII. A lookaround alone ("(?=[A-Z])",
# "(?<=a)"), an optional part ("x?") or an empty alternative ("a|") matches empty somewhere in them.
_EMPTY_MATCH_PROBES = (
    "", "a", "0", " ", "-", "ab ab", "a=b&c", "x\ny",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789",
    " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\t\r\n",
    '{"role":"system","content":"Say hi.","n":1,"ok":true,"x":null,"list":[1.5,-2e3]}',
    "2026-11-22T20:15:03.123456+00:00 https://user@example.com:8080/a/b?c=d&e=f#g",
    "Caf\u00e9 \u00fc\u00df \u65e5\u672c\u8a9e \u2014 \u201cquoted\u201d \u2026",
)  # fmt: skip


def _matches_empty(regex: re.Pattern[str]) -> bool:
    """Whether a pattern matches an empty string somewhere in the probe texts."""
    return any(match.start() == match.end() for probe in _EMPTY_MATCH_PROBES for match in regex.finditer(probe))


class Redactor:
    """Replaces secrets in traces and in text (see the module docstring).

    ``extra_patterns`` adds ``{kind: regex}``; ``extra_fields`` adds field names (secret whole, compared normalized);
    ``callback(text) -> text`` runs on every string after the patterns (return it unchanged to keep it; anything it
    changes is counted as kind ``custom``). ``patterns`` replaces the default patterns entirely, ``fields`` the
    default field names (then only those names, whole, are secrets).
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
                compiled = re.compile(regex)
            except re.error as exc:
                raise ValueError(f"redaction pattern for {kind!r} is not a valid regular expression: {exc}") from None
            if _matches_empty(compiled):
                raise ValueError(f"redaction pattern for {kind!r} ({regex!r}) can match the empty string; make it match at least one character")
        self.patterns = chosen
        # One pass per string: an alternation of named groups, one per kind.
        try:
            self._combined = re.compile("|".join(f"(?P<{kind}>{regex})" for kind, regex in chosen.items())) if chosen else None
        except re.error as exc:  # e.g. a global flag such as (?i) inside one pattern: use (?i:...) instead
            raise ValueError(f"redaction patterns cannot be combined: {exc}; use scoped flags such as (?i:...)") from None
        self._default_fields = fields is None
        self._extra_fields = frozenset(_normalized(f) for f in (fields if fields is not None else ())) | {_normalized(f) for f in extra_fields}
        self.callback = callback
        # The pre-check on a trace's canonical JSON (may_hold_secrets) rules out most traces without walking them:
        # literal markers of the default patterns, and the keys that say they are secrets. It cannot vouch for a
        # callback or for user patterns (they may be anchored, or match characters JSON escapes).
        defaults = {kind for kind, regex in chosen.items() if DEFAULT_PATTERNS.get(kind) == regex}
        self._markers = tuple(dict.fromkeys(t for kind, group in _DEFAULT_MARKERS.items() if kind in defaults for t in group))
        self._narrow = tuple(check for kind, check in _NARROW.items() if kind in defaults)
        self._extra_key = (
            re.compile('"(?:' + "|".join("[-_. ]*".join(re.escape(c) for c in f) for f in sorted(self._extra_fields)) + ')":', re.IGNORECASE)
            if self._extra_fields else None
        )
        self._always_walk = callback is not None or any(kind not in defaults for kind in chosen)

    def is_secret_field(self, name: str) -> bool:
        """Whether this redactor treats a JSON field of this name as a secret."""
        if self._default_fields:
            return is_secret_field(name, self._extra_fields)
        return _normalized(name) in self._extra_fields

    def may_hold_secrets(self, canonical_json: str) -> bool:
        """Whether a trace with this canonical JSON could have something to redact (False is certain)."""
        if self._always_walk:
            return True
        text = canonical_json
        if any(marker_text in text for marker_text in self._markers):
            return True
        if any(gate in text and regex.search(text) for gate, regex in self._narrow):
            return True
        if self._extra_key is not None and self._extra_key.search(text):
            return True
        if self._default_fields and any(is_secret_field(key) for key in set(_JSON_KEY.findall(text))):
            return True
        return any(self.is_secret_field(key) for key in text_keys(text))

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
                if f.name in _MODEL_VALUES:
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

        # A frame is [node, items, next index, new items, changed, inside the JSON Schema of a secret]. A JSON Schema
        # under a secret's name (a tool's parameters with a property "api_key") describes a secret and is walked,
        # its values that could be one (a default, examples) redacted; anything else under such a name is replaced.
        def frame(node: dict | list, in_secret_schema: bool) -> list:
            items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            return [node, items, 0, [], False, in_secret_schema]

        stack = [frame(root, False)]
        while True:
            top = stack[-1]
            node, items, index, out, changed, in_secret_schema = top
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
            if isinstance(node, dict) and isinstance(key, str) and item not in (None, "") and not isinstance(item, bool):
                schema_value = in_secret_schema and key in _SCHEMA_VALUE_KEYWORDS
                secret = schema_value or self.is_secret_field(key)
            else:
                schema_value = secret = False
            if secret and not schema_value and isinstance(item, dict) and _is_json_schema(item):
                stack.append(frame(item, True))
                continue
            if secret:
                new = marker(_FIELD_KIND)
                if item != new:
                    counts[_FIELD_KIND] += 1
            elif isinstance(item, (dict, list)):
                stack.append(frame(item, in_secret_schema))
                continue
            else:
                new = self._text(item, counts) if isinstance(item, str) else item
            if isinstance(node, dict) and isinstance(key, str):
                kept_key = self._key(key, counts, {k for k, _ in out})
                if kept_key != key:
                    out.append((kept_key, new))
                    top[4] = True
                    top[2] = index + 1
                    continue
            out.append((key, new))
            top[4] = changed or new is not item
            top[2] = index + 1

    def _text(self, text: str, counts: Counter[str]) -> str:
        result = text
        if ":" in text or "=" in text:  # a field of JSON or a repr kept as text (a tool call's raw arguments)
            result = self._text_fields(result, counts)
        if self._combined is not None and self._combined.search(result) is not None:

            def replace(match: re.Match[str]) -> str:
                if match.start() == match.end():  # an empty match holds nothing: a marker there would corrupt the text
                    return ""
                kind = match.lastgroup or "secret"
                counts[kind] += 1
                return marker(kind)

            result = self._combined.sub(replace, result)
        if self.callback is not None:
            custom = self.callback(result)
            if custom != result:
                counts["custom"] += 1
                result = custom
        return result if result != text else text

    def _text_fields(self, text: str, counts: Counter[str]) -> str:
        """The values of secret fields in text that holds JSON or a Python repr (a raw copy of a tool call's
        arguments, a provider's response kept as its repr), replaced as in JSON; one pass, linear in the text."""

        def replace(match: re.Match[str]) -> str:
            name, value, kind = next((match.group(f"k{i}"), match.group(f"v{i}"), i) for i in (1, 2, 3) if match.group(f"k{i}") is not None)
            secret = bool(value) and value not in ("true", "false", "True", "False") and self.is_secret_field(name)
            if secret:
                new, counts[_FIELD_KIND] = marker(_FIELD_KIND), counts[_FIELD_KIND] + 1
            elif (":" in value or "=" in value) and len(value) < len(text):  # text within the text: arguments='{...}'
                new = self._text_fields(value, counts)
            else:
                return match.group(0)
            start, end = match.span(f"v{kind}")
            whole = match.group(0)
            return whole[: start - match.start()] + new + whole[end - match.start():]

        return _TEXT_PAIR.sub(replace, text)

    def _key(self, key: str, counts: Counter[str], taken: set[str]) -> str:
        """A JSON object's key with the secrets the patterns find replaced (a key may be a secret: {"sk-...": 1}),
        made unique among the keys already kept (``taken``) with a number."""
        if self._combined is None or self._combined.search(key) is None:
            return key
        new = self._text(key, counts)
        unique, n = new, 1
        while unique in taken:
            n += 1
            unique = f"{new} {n}"
        return unique


DEFAULT_REDACTOR = Redactor()
"""What every export uses unless told otherwise: the default patterns and field names."""
