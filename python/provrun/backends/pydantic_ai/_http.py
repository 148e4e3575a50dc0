"""The exact bytes of a model request, taken at the provider client's transport.

PydanticAI 2.68's providers talk HTTP through ``httpx2`` (the OpenAI and Anthropic SDKs
hold an ``httpx2.AsyncClient``; an older ``httpx.AsyncClient`` a user passes is
accepted too). :func:`install` wraps the transport of each such client a model reaches
with a recording transport, once. The wrapper does nothing unless the current task is
inside :func:`capturing`: then it keeps the request body it passes on and tees the
response body as the client reads it, chunk by chunk, so a streamed response is kept
verbatim (SSE and all) without being held back. Bodies are what crossed the wire after
HTTP framing: the request's ``content`` and the response's bytes before any content
decoding (the recorded request asks for ``identity`` encoding, so they are readable).
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Exchange", "capturing", "install"]

# Headers that carry credentials: never recorded (the same list `provrun wrap` keeps out).
_CREDENTIALS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie", "set-cookie"}
)


@dataclass
class Exchange:
    """One HTTP exchange made while a model request was being captured."""

    method: str
    url: Any
    request_headers: list[tuple[str, str]]
    request: bytes
    started: float
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    first_byte: float | None = None
    ended: float | None = None
    complete: bool = False
    error: str | None = None
    model: str | None = None
    """The model the request was sent to (``system:name``), when the transport knows:
    set for the models :func:`install` was given, so a ``FallbackModel``'s exchanges each
    name the model that made them."""

    @property
    def response(self) -> bytes:
        return b"".join(self.chunks)

    def header(self, which: list[tuple[str, str]], name: str) -> str | None:
        return next((v for k, v in which if k == name), None)

    @property
    def request_type(self) -> str:
        return self.header(self.request_headers, "content-type") or "application/octet-stream"

    @property
    def response_type(self) -> str:
        return self.header(self.response_headers, "content-type") or "application/octet-stream"

    def duration_ms(self) -> int:
        end = self.ended if self.ended is not None else time.monotonic()
        return max(0, int((end - self.started) * 1000))

    def http(self) -> dict[str, Any]:
        """The HTTP facts kept with the event (``model_called.http``): method, path,
        upstream, status, time to the headers, and the headers without credentials."""
        removed = sorted(
            {k for k, _ in self.request_headers + self.response_headers if k in _CREDENTIALS}
        )
        url = self.url
        return {
            "method": self.method,
            "path": url.path,
            "upstream": f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else ""),
            "status": self.status,
            "first_byte_ms": None
            if self.first_byte is None
            else max(0, int((self.first_byte - self.started) * 1000)),
            "request_headers": [[k, v] for k, v in self.request_headers if k not in _CREDENTIALS],
            "response_headers": [[k, v] for k, v in self.response_headers if k not in _CREDENTIALS],
            "removed_headers": removed,
        }


_SINK: contextvars.ContextVar[list[Exchange] | None] = contextvars.ContextVar("provrun_http_sink", default=None)


@contextmanager
def capturing(exchanges: list[Exchange]) -> Iterator[list[Exchange]]:
    """Append to ``exchanges`` the HTTP exchanges the current task makes through installed
    transports while the block runs (a streamed body keeps filling after it ends)."""
    token = _SINK.set(exchanges)
    try:
        yield exchanges
    finally:
        _SINK.reset(token)


def _headers(headers: Any) -> list[tuple[str, str]]:
    return [
        (k.decode("latin-1").lower(), v.decode("latin-1"))
        for k, v in getattr(headers, "raw", [])
    ]


_CLASSES: dict[str, tuple[type, type]] = {}


def _classes(httpx: Any) -> tuple[type, type]:
    """The recording transport and teeing stream for one httpx-style module (``httpx2``,
    or the older ``httpx``), made once."""
    key = httpx.__name__
    if key in _CLASSES:
        return _CLASSES[key]

    class TeeStream(httpx.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, inner: Any, exchange: Exchange) -> None:
            self._inner = inner
            self._exchange = exchange

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._inner:
                    self._exchange.chunks.append(bytes(chunk))
                    yield chunk
                self._exchange.complete = True
            except BaseException as e:
                self._exchange.error = f"reading the response failed: {type(e).__name__}: {e}"
                raise
            finally:
                self._exchange.ended = time.monotonic()

        async def aclose(self) -> None:
            if self._exchange.ended is None:
                self._exchange.ended = time.monotonic()
            await self._inner.aclose()

    class RecordingTransport(httpx.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            # (label, model name) of each model known to send through this transport.
            self.models: list[tuple[str, str]] = []

        def model_of(self, body: bytes) -> str | None:
            """The model a request body was sent by: the one model of this transport, or
            among several sharing a client, the one whose name the body's ``model`` gives."""
            if len(self.models) == 1:
                return self.models[0][0]
            if not self.models:
                return None
            try:
                named = json.loads(body).get("model")
            except (ValueError, AttributeError):
                named = None
            return next((label for label, name in self.models if name == named), self.models[0][0])

        async def handle_async_request(self, request: Any) -> Any:
            sink = _SINK.get()
            if sink is None:
                return await self.inner.handle_async_request(request)
            body = await request.aread()
            request.headers["accept-encoding"] = "identity"
            exchange = Exchange(
                method=request.method,
                url=request.url,
                request_headers=_headers(request.headers),
                request=bytes(body),
                started=time.monotonic(),
                model=self.model_of(bytes(body)),
            )
            sink.append(exchange)
            try:
                response = await self.inner.handle_async_request(request)
            except BaseException as e:
                exchange.error = f"{type(e).__name__}: {e}"
                exchange.ended = time.monotonic()
                raise
            exchange.first_byte = time.monotonic()
            exchange.status = response.status_code
            exchange.response_headers = _headers(response.headers)
            response.stream = TeeStream(response.stream, exchange)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

        async def __aenter__(self) -> Any:
            await self.inner.__aenter__()
            return self

        async def __aexit__(self, *exc: Any) -> None:
            await self.inner.__aexit__(*exc)

    _CLASSES[key] = (RecordingTransport, TeeStream)
    return _CLASSES[key]


_FOUND: list[Any] | None = None


def _modules() -> list[Any]:
    """The httpx-style modules installed (looked for once: a failed import searches the
    whole path, which each model request would otherwise pay for)."""
    global _FOUND
    if _FOUND is None:
        found = []
        for name in ("httpx2", "httpx"):
            try:
                found.append(__import__(name))
            except ImportError:
                continue
        _FOUND = found
    return _FOUND


def _wrap_client(client: Any, httpx: Any, model: tuple[str, str] | None) -> bool:
    transport_class, _ = _classes(httpx)
    inner = getattr(client, "_transport", None)
    if inner is None:
        return False
    if not isinstance(inner, transport_class):
        client._transport = transport_class(inner)
    wrapped = [client._transport]
    mounts = getattr(client, "_mounts", None)
    if isinstance(mounts, dict):
        for pattern, mounted in list(mounts.items()):
            if mounted is not None and not isinstance(mounted, transport_class):
                mounts[pattern] = transport_class(mounted)
            if mounts[pattern] is not None:
                wrapped.append(mounts[pattern])
    if model is not None:
        for transport in wrapped:
            if model not in transport.models:
                transport.models.append(model)
    return True


def _candidates(model: Any) -> Iterator[Any]:
    """Objects through which a model may reach its HTTP client: the model, its provider,
    their SDK clients (``client``), and what those hold (``_client``, ``http_client``)."""
    seen: set[int] = set()
    queue = [model, getattr(model, "provider", None)]
    depth = 0
    while queue and depth < 3:
        nxt = []
        for obj in queue:
            if obj is None or id(obj) in seen:
                continue
            seen.add(id(obj))
            yield obj
            for attr in ("client", "_client", "http_client", "_http_client", "_own_http_client"):
                try:
                    nxt.append(getattr(obj, attr, None))
                except Exception:  # a property that needs more than we have
                    continue
        queue = nxt
        depth += 1


def serving_models(model: Any) -> list[Any]:
    """The models that send a model's requests: the model itself, or for a model that
    hands them on, those it hands them to — a ``FallbackModel``'s ``models`` (each in
    turn), a ``WrapperModel``'s ``wrapped`` — followed down."""
    out: list[Any] = []
    seen: set[int] = set()

    def walk(m: Any, depth: int) -> None:
        if m is None or id(m) in seen or depth > 8:
            return
        seen.add(id(m))
        inner = getattr(m, "models", None)
        if isinstance(inner, (list, tuple)) and inner and all(hasattr(x, "request") for x in inner):
            for x in inner:
                walk(x, depth + 1)
            return
        wrapped = getattr(m, "wrapped", None)
        if wrapped is not None and hasattr(wrapped, "request"):
            walk(wrapped, depth + 1)
            return
        out.append(m)

    walk(model, 0)
    return out


def install(model: Any, label: Any = None) -> int:
    """Wrap the transport of every httpx client ``model`` reaches (once; later calls see
    it wrapped), for each model that sends its requests (:func:`serving_models`); each
    transport learns which models send through it, named by ``label(model)``. Returns how
    many clients it found: 0 for a model with no HTTP client, whose requests are then
    recorded ``parsed``."""
    modules = _modules()
    found = 0
    for serving in serving_models(model):
        named = None
        if label is not None:
            named = (label(serving), str(getattr(serving, "model_name", "")))
        for obj in _candidates(serving):
            for httpx in modules:
                if isinstance(obj, httpx.AsyncClient) and _wrap_client(obj, httpx, named):
                    found += 1
    return found
