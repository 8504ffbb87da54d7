"""HTTP for the remote store: endpoints, credentials, retries, redirects, typed errors and SPARQL JSON results.

:class:`HttpClient` sends one request at a time to a SPARQL server the way :class:`~dspy_rdf.store.remote.RemoteStore`
needs: credentials from the environment only, sent only to the origin of the endpoint (redirects are followed here,
not by httpx); what may pass when sent again retried with exponential backoff (honouring ``Retry-After``) for
requests that are safe to repeat; every other error raised at once, an error answer as a :class:`RemoteHTTPError`
carrying ``status`` and a short excerpt of the body, in which every form of every credential is masked (the password
as given, URL-encoded and JSON-escaped, ``user:password`` in base64 as HTTP basic sends it, a bearer token, the fields
of a digest ``Authorization`` header; a form shorter than 8 characters only where it stands as a word of its own,
never inside other words), and which also goes through the default redactor.

What is retried (:func:`may_pass_again`): a connection refused or reset, a timeout, HTTP 408, 429, 502, 503 and 504,
and a 500 that says it is transient (a ``Retry-After`` header, or a Virtuoso SQLSTATE saying the transaction may
succeed when tried again: class ``40``, deadlock or serialization failure; ``08``, connection; ``S1T00``/``HYT00``,
timeout). Final at once: a TLS handshake that fails (a certificate not trusted, or a plain-HTTP server on the port,
which answers no handshake), every other 4xx and 5xx (a 500 is how Oxigraph answers a query it cannot evaluate and
how Virtuoso answers a query it cannot compile, a value it refuses or a missing permission: sent again, the same
request fails the same way), and an answer the server began as success and then ended with an error (Oxigraph
streams results: a ``SERVICE`` call that fails part-way ends the body with the error's text). A missing Virtuoso
permission (``SR186``) is a :class:`RemoteAuthError` like a 401 or 403.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import json
import logging
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any, cast
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit, urlunsplit

import httpx
import pyoxigraph as ox

from dspy_rdf.canonical.redact import DEFAULT_REDACTOR
from dspy_rdf.store.base import SparqlJson, StoreError

__all__ = [
    "AUTH_ENV",
    "PASSWORD_ENV",
    "TOKEN_ENV",
    "USER_ENV",
    "AuthScheme",
    "FailedWhileAnswering",
    "HttpClient",
    "MalformedAnswer",
    "RemoteAuthError",
    "RemoteConnectionError",
    "RemoteEvaluationError",
    "RemoteHTTPError",
    "RemoteQueryError",
    "RemoteResultError",
    "RemoteStoreError",
    "RemoteTLSError",
    "RemoteTimeoutError",
    "RemoteTruncatedError",
    "SecretForms",
    "check_url",
    "credentials_from_env",
    "env_number",
    "may_pass_again",
    "message_after_partial_answer",
    "safe_url",
]

log = logging.getLogger("dspy_rdf.store.remote")

USER_ENV = "DSPY_RDF_STORE_USER"
PASSWORD_ENV = "DSPY_RDF_STORE_PASSWORD"
TOKEN_ENV = "DSPY_RDF_STORE_TOKEN"
AUTH_ENV = "DSPY_RDF_STORE_AUTH"

MAX_REDIRECTS = 5
BODY_EXCERPT = 300
ERROR_BODY_LIMIT = 65536
"""Bytes of an error answer read at most (its excerpt is shown): a server that answers an error with 400 MB costs no
more memory than this."""
SPARQL_JSON = "application/sparql-results+json"
MAX_ROWS_HEADER = "X-SPARQL-MaxRows"
"""The header by which Virtuoso says that it cut an answer at its ``ResultSetMaxRows``."""

_REDIRECTS = (301, 302, 303, 307, 308)
_SECRET_PARAM = re.compile(r"token|passw|secret|api[-_]?key", re.IGNORECASE)
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
_VIRTUOSO_ERROR = re.compile(r"Virtuoso (\w{5}) Error (\w+)")
_VIRTUOSO_COST_ESTIMATE = re.compile(r"estimated execution time (\d+) \(sec\) exceeds the limit of (\d+) \(sec\)")
"""Virtuoso's refusal of a query its optimizer expects to run longer than ``MaxQueryCostEstimationTime``."""
_TRANSIENT_SQLSTATE = re.compile(r"40\w{3}|08\w{3}|S1T00|HYT00")
_RETRIED_STATUSES = frozenset({408, 429, 502, 503, 504})
"""Answers that say nothing is wrong with the request: the server (or a gateway before it) was busy, down or slow."""
SHORT_SECRET = 8
"""A secret (or a form of it) shorter than this is masked only where it stands as a word of its own: masked inside
words, a password ``e`` would turn every ``e`` of a message into ``***``."""
_AUTHORIZATION_VALUE = re.compile(r"(?i)(authorization\W{0,6}\s*)(?:basic|bearer|digest)\b[^\r\n\"']*")
_DIGEST_FIELD = re.compile(r'(?i)\b(response|cnonce|username)(\s*=\s*)("[^"]*"|[^\s,"]+)')


# --- errors ----------------------------------------------------------------------------------------------------


class RemoteStoreError(StoreError):
    """A request to a remote store failed; ``method`` and ``url`` (credential-free) say which one."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class RemoteConnectionError(RemoteStoreError):
    """The server could not be reached, or the connection broke (after the retries allowed)."""


class RemoteTimeoutError(RemoteConnectionError):
    """The server did not answer within the timeout (after the retries allowed)."""


class RemoteTLSError(RemoteConnectionError):
    """The TLS handshake failed (a certificate not trusted, or a plain-HTTP server on the port): not retried."""


class RemoteHTTPError(RemoteStoreError):
    """The server answered with an HTTP error: ``status`` is its code, ``body`` a short excerpt of what it said."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None, status: int, body: str = "") -> None:
        super().__init__(message, method=method, url=url)
        self.status = status
        self.body = body


class RemoteAuthError(RemoteHTTPError):
    """401 or 403, or a server error saying that the user lacks a permission: the credentials (from the environment)
    are missing or not allowed to do this."""


class RemoteResultError(RemoteStoreError):
    """The server answered with success but its body is not what the protocol says (malformed SPARQL JSON results,
    an HTML page from a proxy, unreadable RDF): retried like a network error for reads, then raised."""


class RemoteEvaluationError(RemoteStoreError):
    """The server began a success answer to a query, then ended it with an error: the query failed while it ran (a
    ``SERVICE`` call that failed, on Oxigraph). ``detail`` is what the server wrote; not retried."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None, detail: str = "") -> None:
        super().__init__(message, method=method, url=url)
        self.detail = detail


class RemoteQueryError(RemoteHTTPError, ValueError):
    """The server did not accept the query (400, or a compiler error Virtuoso sends as 500): a ``ValueError``, as from
    the embedded store."""


class RemoteTruncatedError(RemoteStoreError):
    """The server cut the answer of a query at ``max_rows`` rows (Virtuoso's ``ResultSetMaxRows``): rather than read a
    part as the whole, the query fails."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None, max_rows: int) -> None:
        super().__init__(message, method=method, url=url)
        self.max_rows = max_rows


# --- URLs and settings -----------------------------------------------------------------------------------------


def safe_url(url: str | httpx.URL) -> str:
    """The URL as it may be shown: no user or password, and secret-looking query parameters masked."""
    parts = urlsplit(str(url))
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = parts.query
    if query and _SECRET_PARAM.search(query):
        query = "&".join(f"{k}=***" if _SECRET_PARAM.search(k) else f"{k}={val}" for k, val in parse_qsl(query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def check_url(url: str, what: str) -> str:
    """``url`` if it is an http(s) URL without credentials in it; else a :class:`StoreError` saying what to do."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"the {what} {safe_url(url)!r} is not an http(s):// URL")
    secret_param = any(_SECRET_PARAM.search(k) for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    if parts.username is not None or parts.password is not None or secret_param:
        raise StoreError(
            f"the {what} {safe_url(url)} has credentials in it; they are not used: set ${USER_ENV} and ${PASSWORD_ENV}, "
            f"or ${TOKEN_ENV}, in the environment instead"
        )
    return url


def env_number(name: str, default: float, kind: type = float) -> Any:
    """The positive number in ``$name``, else ``default``; a :class:`StoreError` for anything else."""
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise StoreError(f"${name} must be a number, not {text!r}") from None
    if value <= 0:
        raise StoreError(f"${name} must be positive, not {text!r}")
    return value


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


# --- credentials -----------------------------------------------------------------------------------------------


class AuthScheme(str, Enum):
    """How the store authenticates: the scheme of the credentials found in the environment."""

    NONE = "none"
    BASIC = "basic"
    DIGEST = "digest"
    BEARER = "bearer"


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(***)"


SecretForms = tuple[tuple[str, re.Pattern[str] | None], ...]
"""The texts to mask, longest first, each with the pattern of where it stands as a word when it is short."""


def _maskable(forms: set[str]) -> SecretForms:
    """``forms`` longest first, a short one with the pattern that finds it where no letter, digit or ``_`` is next to
    it (a password ``e`` is masked in ``password=e``, not in ``request``)."""
    return tuple(
        (form, re.compile(rf"(?<!\w){re.escape(form)}(?!\w)") if len(form) < SHORT_SECRET else None)
        for form in sorted(forms, key=len, reverse=True)
    )


def _secret_forms(user: str | None, secret: str) -> set[str]:
    """Every form in which a server may quote ``secret`` (a password or token) back: as given, URL-encoded,
    JSON-escaped, and in base64 as HTTP basic authentication sends it (``user:password``)."""
    forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret), json.dumps(secret)[1:-1]}
    if user is not None:
        pair = f"{user}:{secret}".encode()
        encoded = base64.b64encode(pair).decode()
        forms |= {encoded, encoded.rstrip("="), base64.urlsafe_b64encode(pair).decode()}
    forms.add(base64.b64encode(secret.encode()).decode())
    return {form for form in forms if form}


def credentials_from_env() -> tuple[httpx.Auth | None, AuthScheme, SecretForms]:
    """The authentication the environment asks for, its scheme, and the texts that must never be shown (with where a
    short one is masked)."""
    env = os.environ
    user, password, token = env.get(USER_ENV), env.get(PASSWORD_ENV), env.get(TOKEN_ENV)
    scheme = (env.get(AUTH_ENV) or "basic").strip().lower()
    if token and (user or password):
        raise StoreError(f"set either ${TOKEN_ENV} or ${USER_ENV} and ${PASSWORD_ENV}, not both")
    if token:
        return _BearerAuth(token), AuthScheme.BEARER, _maskable(_secret_forms(None, token))
    if user or password:
        if not (user and password is not None):
            raise StoreError(f"${USER_ENV} and ${PASSWORD_ENV} go together: set both")
        if scheme not in (AuthScheme.BASIC.value, AuthScheme.DIGEST.value):
            raise StoreError(f"${AUTH_ENV} must be basic or digest, not {scheme!r}")
        kind = AuthScheme(scheme)
        auth = httpx.DigestAuth(user, password) if kind is AuthScheme.DIGEST else httpx.BasicAuth(user, password)
        secrets = _secret_forms(user, password) if password else set()
        return auth, kind, _maskable(secrets)
    return None, AuthScheme.NONE, ()


# --- the client ------------------------------------------------------------------------------------------------


class MalformedAnswer(Exception):
    """Raised by a ``read`` callback of :meth:`HttpClient.request` for a success answer whose body is not what was
    expected (retried like a network error, then a :class:`RemoteResultError`); the message says what is wrong."""


class FailedWhileAnswering(Exception):
    """Raised by a ``read`` callback of :meth:`HttpClient.request` for a success answer that the server ended with an
    error of its own (:func:`message_after_partial_answer`): the query failed while it ran. Not retried: raised as a
    :class:`RemoteEvaluationError` whose message is this exception's."""


class HttpClient:
    """Requests to one server with the credentials of the environment, retries and redirects (see the module)."""

    def __init__(
        self,
        *,
        timeout: float,
        connect_timeout: float,
        max_attempts: int,
        backoff: float,
        max_wait: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if max_attempts < 1:
            raise StoreError(f"max_attempts must be at least 1, not {max_attempts}")
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_wait = max_wait
        self.timeout = timeout
        self._auth, self.auth_scheme, self._secrets = credentials_from_env()
        self.server: str | None = None
        """The ``Server`` header of the server's first answer (``Oxigraph/0.5.13``, ``Virtuoso/07.20.3229 ...``)."""
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            follow_redirects=False,  # followed in _send, so credentials never leave their origin
            transport=transport,
            headers={"User-Agent": "dspy-rdf"},
        )

    def close(self) -> None:
        """Close the connections."""
        self._client.close()

    def redact(self, text: str) -> str:
        """``text`` with every form of the credentials in use, and any ``Authorization`` header value or digest
        field it quotes, masked; then through the default redactor (keys, tokens, URL credentials)."""
        for secret, as_word in self._secrets:
            text = as_word.sub("***", text) if as_word is not None else text.replace(secret, "***")
        text = _AUTHORIZATION_VALUE.sub(lambda match: match.group(1) + "***", text)
        text = _DIGEST_FIELD.sub(lambda match: match.group(1) + match.group(2) + '"***"', text)
        return DEFAULT_REDACTOR.redact_text(text)

    def _send(self, method: str, url: httpx.URL, *, content: bytes | None, data: dict[str, str] | None, headers: dict[str, str]) -> httpx.Response:
        """One request, following redirects; credentials only go to the origin of the first URL. The timeout bounds
        the whole answer, not each read (a server that sends a byte every second would never end otherwise), and of
        an error answer at most :data:`ERROR_BODY_LIMIT` bytes are read."""
        origin = _origin(url)
        deadline = time.monotonic() + self.timeout
        for _ in range(MAX_REDIRECTS + 1):
            request = self._client.build_request(method, url, content=content, data=data, headers=headers)
            auth = self._auth if self._auth is not None and _origin(request.url) == origin else None
            response = self._read_within(self._client.send(request, auth=auth, stream=True), deadline)
            if self.server is None and response.headers.get("Server"):
                self.server = response.headers["Server"]
            location = response.headers.get("Location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            response.close()
            url = request.url.join(location)
            if response.status_code == 303 and method != "HEAD" or response.status_code in (301, 302) and method == "POST":
                method, content, data = "GET", None, None
                headers = {k: val for k, val in headers.items() if k.lower() != "content-type"}
            log.debug("%s redirected to %s", safe_url(request.url), safe_url(url))
        raise RemoteStoreError(f"{method} {safe_url(url)}: more than {MAX_REDIRECTS} redirects", method=method, url=safe_url(url))

    def _read_within(self, response: httpx.Response, deadline: float) -> httpx.Response:
        """The answer read whole by ``deadline`` (else a read timeout), at most :data:`ERROR_BODY_LIMIT` bytes of an
        error answer, as a response that holds its body."""
        limit = ERROR_BODY_LIMIT if response.status_code >= 400 else None
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if limit is not None and size >= limit:
                    break
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(f"the answer took longer than the timeout of {self.timeout:g} s in all", request=response.request)
        finally:
            response.close()
        body = b"".join(chunks)[:limit] if limit is not None else b"".join(chunks)
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=kept, content=body, request=response.request, extensions=response.extensions)

    def request(
        self,
        method: str,
        url: str | httpx.URL,
        *,
        idempotent: bool,
        content: bytes | None = None,
        data: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        ok_statuses: Iterable[int] = (),
        is_query: bool = False,
        read: Callable[[httpx.Response], Any] | None = None,
    ) -> Any:
        """Send a request, retrying what may be retried; raise a :class:`RemoteStoreError` for what still fails.

        Returns the response, or what ``read`` makes of a success answer. A body ``read`` finds malformed (it raises
        :class:`MalformedAnswer`) is retried like a network error when the request may be repeated, then raised as
        :class:`RemoteResultError`."""
        url = httpx.URL(url)
        shown = safe_url(url)
        attempt = 0
        while True:
            attempt += 1
            last_try = attempt >= self.max_attempts
            try:
                response = self._send(method, url, content=content, data=data, headers=headers or {})
            except httpx.TransportError as exc:
                tls = _tls_failure(exc)
                if tls is not None:  # the same handshake fails the same way: never retried
                    hint = " (is it a plain-HTTP server? then give an http:// URL)" if tls.plain_http else ""
                    raise RemoteTLSError(f"{method} {shown}: the TLS handshake failed: {self.redact(tls.reason)}{hint}", method=method, url=shown) from None
                # A connection that could not be opened sent nothing: safe to retry even for updates.
                retryable = idempotent or isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if isinstance(exc, httpx.TimeoutException):
                    what = "timed out: the answer took longer than the timeout in all" if "in all" in str(exc) else f"timed out ({type(exc).__name__})"
                else:
                    what = f"failed: {self.redact(str(exc)) or type(exc).__name__}"
                if retryable and not last_try and not isinstance(exc, httpx.UnsupportedProtocol):
                    self._wait(attempt, None, f"{method} {shown} {what}")
                    continue
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                error = RemoteTimeoutError if isinstance(exc, httpx.TimeoutException) else RemoteConnectionError
                raise error(f"{method} {shown} {what}{tries}", method=method, url=shown) from None
            status = response.status_code
            if status < 400 or status in ok_statuses:
                if read is None:
                    return response
                try:
                    return read(response)
                except FailedWhileAnswering as exc:
                    detail = self.redact(str(exc))
                    raise RemoteEvaluationError(f"{method} {shown}: {detail}", method=method, url=shown, detail=detail) from None
                except MalformedAnswer as exc:
                    if idempotent and not last_try:
                        self._wait(attempt, None, f"{method} {shown}: {exc}")
                        continue
                    tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                    raise RemoteResultError(
                        f"{method} {shown}: HTTP {status} but {self.redact(str(exc))}{tries}", method=method, url=shown
                    ) from None
            if may_pass_again(response) and idempotent and not last_try:
                self._wait(attempt, response.headers.get("Retry-After"), f"{method} {shown} got HTTP {status}")
                continue
            raise self._http_error(method, shown, response, attempt, is_query=is_query)

    def _wait(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = _retry_after_seconds(retry_after)
        if delay is None:
            delay = self.backoff * 2 ** (attempt - 1)
            delay += random.uniform(0, delay / 4)
        delay = min(max(delay, 0.0), self.max_wait)
        log.warning("%s; retrying in %.1f s (attempt %d of %d)", self.redact(why), delay, attempt + 1, self.max_attempts)
        time.sleep(delay)

    def _http_error(self, method: str, shown: str, response: httpx.Response, attempts: int, *, is_query: bool) -> RemoteHTTPError:
        status = response.status_code
        body = self.redact(" ".join(response.text.split()))
        if len(body) > BODY_EXCERPT:
            body = body[:BODY_EXCERPT] + "..."
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        message = f"{method} {shown}: HTTP {status} {response.reason_phrase}{tries}" + (f": {body}" if body else "")
        virtuoso = _VIRTUOSO_ERROR.search(response.text[:500])
        if status in (401, 403) or virtuoso is not None and virtuoso.group(2) in _VIRTUOSO_PERMISSION_ERRORS:
            kind: type[RemoteHTTPError] = RemoteAuthError
            message += f" (credentials are read from ${USER_ENV} and ${PASSWORD_ENV}, or ${TOKEN_ENV}; auth used: {self.auth_scheme.value})"
        elif is_query and (status == 400 or virtuoso is not None):
            kind = RemoteQueryError
            if virtuoso is not None and virtuoso.group(2) == "SR353":
                message += " (Virtuoso sorts at most MaxSortedTopRows rows, 10000 unless its virtuoso.ini says more: ask for fewer)"
            elif (estimate := _VIRTUOSO_COST_ESTIMATE.search(response.text[:1000])) is not None:
                # its estimates of the canned percentile query are thousands of times its run time (44,544 s for a
                # query that ran in 5 s at 10k LM calls): the setting, not the query, is what to change
                message = (
                    f"{method} {shown}: Virtuoso refused the query before running it: its optimizer estimated "
                    f"{int(estimate.group(1)):,} s against the limit of {int(estimate.group(2)):,} s (MaxQueryCostEstimationTime "
                    "in the [SPARQL] section of virtuoso.ini; 0 turns the estimate off and MaxQueryExecutionTime still bounds "
                    "every query: see docs/remote-stores.md)"
                )
        else:
            kind = RemoteHTTPError
        return kind(message, method=method, url=shown, status=status, body=body)

    # --- SPARQL results --------------------------------------------------------------------------------------

    def results(self, response: httpx.Response) -> tuple[SparqlJson, int | None]:
        """SPARQL JSON results of a success answer, normalized like the embedded store's, and the row cap the server
        says it cut them at (``None``: complete). Raises :class:`MalformedAnswer` for a body that is not SPARQL JSON."""
        media = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media and ox.RdfFormat.from_media_type(media) is not None:
            raise ValueError(f"expected a SELECT or ASK query, got a CONSTRUCT or DESCRIBE query (the server answered {media})")
        if "json" not in media:
            raise MalformedAnswer(f"the answer is {media or 'without a content type'}, not SPARQL JSON results (is it a SPARQL 1.1 query endpoint?)")
        try:
            doc = response.json()
        except json.JSONDecodeError as exc:
            message = message_after_partial_answer(exc.doc, exc.pos)
            if message is not None:
                raise FailedWhileAnswering(message) from None
            raise MalformedAnswer(f"the answer is not valid JSON ({exc})") from None
        except ValueError as exc:
            raise MalformedAnswer(f"the answer is not valid JSON ({exc})") from None
        except RecursionError:
            raise MalformedAnswer("the answer is JSON nested too deeply to be SPARQL results") from None
        cap = response.headers.get(MAX_ROWS_HEADER)
        return _normalize_results(doc), int(cap) if cap and cap.strip().isdigit() else None


_VIRTUOSO_PERMISSION_ERRORS = frozenset({"SR186", "SQ033"})
"""Virtuoso's errors for a missing permission (no ``SPARQL_UPDATE`` role, no ``SELECT`` right), sent as HTTP 500."""


def may_pass_again(response: httpx.Response) -> bool:
    """Whether an error answer may turn into success when the same request is sent again (see the module): 408, 429,
    502, 503, 504, and a 500 that says it is transient; not an answer that says what is wrong with the request
    (Virtuoso's compile errors, refused values, missing permissions, even as a 503), unless the transaction failed."""
    status = response.status_code
    if status < 500:
        return status in _RETRIED_STATUSES
    virtuoso = _VIRTUOSO_ERROR.search(response.text[:500])
    if virtuoso is not None:
        return _TRANSIENT_SQLSTATE.fullmatch(virtuoso.group(1)) is not None
    return status in _RETRIED_STATUSES or status == 500 and "Retry-After" in response.headers


_PARTIAL_ANSWER = re.compile(r'\s*(?:\{\s*"head"|<|_:)')
"""How a SPARQL JSON results or N-Triples answer begins."""


def message_after_partial_answer(text: str, stop: int) -> str | None:
    """The error a server wrote into a success answer after it had begun it (Oxigraph streams results and ends the
    body with the text of an error met part-way: ``{"head":...,"bindings":[Connection refused (os error 111)``), or
    None when the body is only cut or malformed. ``stop`` is where the answer stops being valid; what follows it is
    the server's message when it is one line of text, not the start of a term."""
    tail = text[stop:].strip()
    begun = stop == 0 or _PARTIAL_ANSWER.match(text) is not None
    # A cut answer leaves a part of a term (`tru`, `<http://ex`, `"val`), never words.
    if not begun or "\n" in tail or " " not in tail or tail[0] in '{}[],:"<_':
        return None
    return tail


@dataclass(frozen=True)
class _TLSFailure:
    """Why a TLS handshake failed, and whether the port seems to speak plain HTTP."""

    reason: str
    plain_http: bool


def _tls_failure(exc: BaseException) -> _TLSFailure | None:
    """The TLS handshake failure behind an httpx error, if that is what it is: an ``ssl.SSLError`` (an untrusted
    certificate; ``WRONG_VERSION_NUMBER`` when the server answered in plain HTTP), or a handshake that got no answer
    (a plain-HTTP server waits for a request line and never answers the handshake)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLError):
            reason = getattr(cause, "reason", None) or ""
            return _TLSFailure(str(cause), reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"))
        if isinstance(cause, TimeoutError) and "handshake" in str(cause):
            return _TLSFailure(f"the server accepted the connection but answered no TLS handshake ({cause})", True)
        cause = cause.__cause__ or cause.__context__
    return None


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()


def _normalize_term(term: dict[str, Any]) -> dict[str, Any]:
    out = dict(term)
    if out.get("type") == "typed-literal":  # SPARQL 1.0-era JSON (older Virtuoso)
        out["type"] = "literal"
    if out.get("type") == "literal":
        if "lang" in out and "xml:lang" not in out:
            out["xml:lang"] = out.pop("lang")
        if out.get("datatype") == _XSD_STRING or ("xml:lang" in out and out.get("datatype") == _RDF_LANG_STRING):
            del out["datatype"]
        elif out.get("datatype") in _CANONICAL_TYPES and isinstance(out.get("value"), str):
            out["value"] = _canonical(out["value"], out["datatype"])
    return out


_XSD = "http://www.w3.org/2001/XMLSchema#"
_CANONICAL_TYPES = frozenset(_XSD + name for name in ("boolean", "integer", "decimal", "double", "float", "dateTime", "date"))
"""Datatypes whose values a server may write in another lexical form than pyoxigraph (Virtuoso: ``1`` for
``true``, ``2031-01-01T10:00:03.500000Z`` for ``2031-01-01T10:00:03.5Z``)."""
_CANONICAL_STORE = ox.Store()


@functools.lru_cache(maxsize=65_536)
def _canonical(value: str, datatype: str) -> str:
    """The lexical form pyoxigraph gives this value (``value`` itself when pyoxigraph cannot read it)."""
    if datatype == _XSD + "boolean" and value in ("0", "1"):
        return "true" if value == "1" else "false"
    try:
        literal = ox.Literal(value, datatype=ox.NamedNode(datatype))
        solutions = cast(ox.QuerySolutions, _CANONICAL_STORE.query(f"SELECT ?v WHERE {{ VALUES ?v {{ {literal} }} }}"))
        [row] = list(solutions)
        return row["v"].value
    except (SyntaxError, ValueError):
        return value


_TERM_TYPES = frozenset({"uri", "literal", "typed-literal", "bnode", "triple"})


def _normalize_results(doc: Any) -> SparqlJson:
    """SPARQL JSON results in the shape the embedded store returns (the same answers compare equal); a document that
    does not follow the SPARQL 1.1 JSON results format raises :class:`MalformedAnswer` naming the first fault."""
    if not isinstance(doc, dict):
        raise MalformedAnswer(f"the answer is a JSON {type(doc).__name__}, not a SPARQL results object")
    if "boolean" in doc:
        if not isinstance(doc["boolean"], bool):
            raise MalformedAnswer(f"'boolean' is {doc['boolean']!r}, not true or false")
        return {"head": {}, "boolean": doc["boolean"]}
    head, results = doc.get("head"), doc.get("results")
    if not isinstance(head, dict) or not isinstance(head.get("vars", []), list):
        raise MalformedAnswer("the answer has no 'head' object with a 'vars' list")
    if not isinstance(results, dict) or not isinstance(results.get("bindings"), list):
        raise MalformedAnswer("the answer has no 'results' object with a 'bindings' list")
    names = head.get("vars", [])
    if not all(isinstance(name, str) for name in names):
        raise MalformedAnswer("'head.vars' holds something other than variable names")
    bindings = []
    for index, row in enumerate(results["bindings"]):
        if not isinstance(row, dict):
            raise MalformedAnswer(f"results.bindings[{index}] is not an object")
        for name, term in row.items():
            if not isinstance(term, dict) or term.get("type") not in _TERM_TYPES or not isinstance(term.get("value"), str):
                raise MalformedAnswer(f"results.bindings[{index}].{name} is not an RDF term ({{'type': ..., 'value': ...}})")
        bindings.append({name: _normalize_term(row[name]) for name in names if name in row})
    return {"head": {"vars": names}, "results": {"bindings": bindings}}

