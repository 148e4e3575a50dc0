"""The evidence capability: every model request and tool call of a PydanticAI run, written
into a provrun bundle as it happens.

Where each fact comes from (PydanticAI 2.68's hooks):

- ``model_called``: ``wrap_model_request`` encloses each request step, streamed or not;
  the model serving each attempt passes through ``get_wrapper_model``, where the
  transports of its HTTP clients are wrapped (:mod:`._http`), so the event holds the
  bytes that crossed the wire (``observed``), and ``stream`` says whether they were
  streamed. A model that hands requests on (``FallbackModel``'s ``models``, a
  ``WrapperModel``'s ``wrapped``) has each model it holds wrapped, each transport knowing
  the model it serves: a request that failed over is one ``model_called`` per model
  tried, in order, each naming its model. A model with no HTTP client (FunctionModel,
  TestModel, a hand-written model) hands over only its parsed messages: the request
  messages since the previous response and the response, as PydanticAI's JSON, ``parsed``.
- ``tool_called`` for function tools: ``wrap_tool_validate`` (a call whose arguments do
  not validate: refused, ``decided_by: runtime``) and ``wrap_tool_execute`` (the tool ran:
  its result, or the ``ModelRetry`` it raised; a ``CallDeferred`` or ``ApprovalRequired``
  is written ``deferred``).
- A call that never reaches ``execute`` because it waits (a tool with
  ``requires_approval``, an external tool) has no hook of its own: it is written
  ``deferred`` when the run ends, from the ``DeferredToolRequests`` the run returns.
- The completion of a waiting call: ``execute`` when it runs on resume; a denied approval
  or a result the caller supplied never reaches a hook either, so it is written from the
  ``tool-return`` part PydanticAI puts in the next request (``decided_by`` ``approval`` or
  ``caller``), before that request's ``model_called``.
- The output tool: ``wrap_output_validate`` / ``wrap_output_process`` (not partial
  output), written when they run. With ``run_stream`` they run while the stream is still
  open, so the event comes before that request's ``model_called``, as the seed says; with
  ``run_stream_events``, ``iter`` and ``run`` they run after the request ended, so it comes
  after.
- Provider-run tools: the ``NativeToolCallPart`` / ``NativeToolReturnPart`` pairs of a
  response, written ``provider_run`` and ``parsed`` after its ``model_called``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai import DeferredToolRequests
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolRetryError
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_core import to_jsonable_python

from . import _http

if TYPE_CHECKING:
    from ..._context import RunContext as ProvrunContext

__all__ = ["EvidenceCapability", "evidence_capability"]


def _json(value: Any) -> str:
    """Any Python value as JSON text (pydantic's rules; unknown objects as their repr)."""
    return json.dumps(to_jsonable_python(value, fallback=repr))


def _args(call: ToolCallPart) -> Any:
    """A call's arguments as the model gave them: a JSON object, or the raw text when it is
    not JSON (then wrapped so the event stays a JSON value)."""
    args = call.args
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except ValueError:
            return {"_raw": args}
    return to_jsonable_python(args or {}, fallback=repr)


def _millis(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))


def _error_text(e: BaseException) -> Any:
    if isinstance(e, ToolRetryError):
        return to_jsonable_python(e.tool_retry.content, fallback=repr)
    if isinstance(e, ModelRetry):
        return e.message
    return f"{type(e).__name__}: {e}"


def _model_name(model: Any) -> str:
    system = getattr(model, "system", None)
    name = getattr(model, "model_name", None) or type(model).__name__
    return f"{system}:{name}" if system else str(name)


@dataclass
class _Step:
    """The model request in flight, or the last one."""

    number: int = 0
    response: ModelResponse | None = None
    stream: Any = None
    """The StreamedResponse of the streamed request in flight (kept after the stream
    closes: PydanticAI may check the output after that, within the request)."""
    ids: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> run_call_id for the calls of ``response``."""
    exchanges: list[_http.Exchange] = field(default_factory=list)
    """The HTTP exchanges of the request's attempts, in order."""
    steps: int = 1
    """Request numbers taken for this request: one, and one more for each other model a
    ``FallbackModel`` tried before (each is a ``model_called`` of its own)."""


class _Observed(WrapperModel):
    """The serving model, unchanged, except that a streamed response is remembered (so an
    output tool checked while the stream is open gets its place in the response)."""

    def __init__(self, wrapped: Any, step: _Step, opened: Any) -> None:
        super().__init__(wrapped)
        self._step = step
        self._opened = opened

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        with _http.capturing(self._step.exchanges):
            return await self.wrapped.request(*args, **kwargs)

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        # Only sending the request is captured here: the response body is teed as the
        # client reads it, wherever that happens.
        opened = self.wrapped.request_stream(*args, **kwargs)
        with _http.capturing(self._step.exchanges):
            stream = await opened.__aenter__()
        # A FallbackModel has settled on its model once the stream is open: the calls
        # checked while it streams are numbered after the models it gave up on.
        self._opened()
        self._step.stream = stream
        try:
            yield stream
        except BaseException as e:
            if not await opened.__aexit__(type(e), e, e.__traceback__):
                raise
        else:
            await opened.__aexit__(None, None, None)


@dataclass(init=False)
class EvidenceCapability(AbstractCapability[Any]):
    """A PydanticAI capability that writes provrun's evidence for one run (see the module
    docs for what each hook records). Make it with :func:`evidence_capability`."""

    def __init__(self, run: ProvrunContext) -> None:
        self.run = run
        self._step = _Step()
        self._recorded: set[str] = set()
        self._settled: set[str] = set()

    async def for_run(self, ctx: Any) -> EvidenceCapability:
        """A fresh instance per agent run (the bundle and its counters are shared)."""
        return EvidenceCapability(self.run)

    # --- models --------------------------------------------------------------------

    def get_wrapper_model(self, model: Any) -> Any:
        _http.install(model, _model_name)
        return _Observed(model, self._step, self._number_models)

    def _number_models(self) -> None:
        """Take a request number for each model the request's exchanges went to after the
        first (a ``FallbackModel``'s failover), so that ``STEP`` counts ``model_called``
        events and the calls of the response get the number of the one that answered."""
        step = self._step
        wanted = len(_by_model(step.exchanges))
        while step.steps < wanted:
            step.number = self.run._ledger.next_step()
            step.steps += 1

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        self._settle(request_context.messages)
        ledger = self.run._ledger
        step = self._step
        step.number = ledger.next_step()
        step.response = None
        step.stream = None
        step.ids = {}
        step.exchanges = exchanges = []
        step.steps = 1
        streamed = bool(getattr(request_context, "streaming", False))
        started = time.monotonic()
        try:
            response = await handler(request_context)
        except BaseException as e:
            self._number_models()
            self._model_called(request_context, None, exchanges, streamed, started, f"{type(e).__name__}: {e}")
            raise
        self._number_models()
        step.response = response
        self._number_calls(response)
        self._model_called(request_context, response, exchanges, streamed, started, None)
        self._provider_run(response)
        return response

    def _number_calls(self, response: ModelResponse) -> None:
        calls = natives = 0
        for part in response.parts:
            if isinstance(part, NativeToolCallPart):
                natives += 1
                self._step.ids.setdefault(part.tool_call_id, f"{self._step.number}.p{natives}")
            elif isinstance(part, ToolCallPart):
                calls += 1
                self._step.ids.setdefault(part.tool_call_id, f"{self._step.number}.{calls}")

    def _model_called(
        self,
        request_context: Any,
        response: ModelResponse | None,
        exchanges: list[_http.Exchange],
        streamed: bool,
        started: float,
        error: str | None,
    ) -> None:
        usage = getattr(response, "usage", None)
        tokens = {
            "input_tokens": getattr(usage, "input_tokens", 0) or 0,
            "output_tokens": getattr(usage, "output_tokens", 0) or 0,
        }
        ledger = self.run._ledger
        with ledger.lock:
            ledger.input_tokens += tokens["input_tokens"]
            ledger.output_tokens += tokens["output_tokens"]
        common: dict[str, Any] = {
            "model": _model_name(request_context.model),
            "stream": streamed,
            "duration_ms": _millis(started),
            "usage": json.dumps(tokens),
            "finish_reason": getattr(response, "finish_reason", None),
            "error": error,
        }
        groups = _by_model(exchanges)
        for i, (model, group) in enumerate(groups):
            final = i == len(groups) - 1
            last = group[-1]
            attempts = [
                {
                    "status": x.status,
                    "error": x.error,
                    "duration_ms": x.duration_ms(),
                    "response_size": len(x.response),
                    "response_media_type": x.response_type,
                }
                for x in group[:-1]
            ]
            fields = dict(common)
            if model is not None:
                fields["model"] = model
            # The flag says what crossed the wire: an SDK may stream a request the agent
            # made without streaming (Anthropic's does past a size of max_tokens).
            fields["stream"] = _streamed_on_the_wire(last, streamed)
            if not final:
                # A model the request failed over from: what it answered, and why it
                # was left.
                fields.update(
                    duration_ms=last.duration_ms(),
                    usage=json.dumps({"input_tokens": 0, "output_tokens": 0}),
                    finish_reason=None,
                    error=last.error
                    or (f"HTTP {last.status}: the request failed over to the next model" if last.status else "the request failed over to the next model"),
                )
            elif fields["error"] is None and last.error is not None:
                fields["error"] = last.error
            elif fields["error"] is None and last.status is not None and last.status >= 400:
                fields["error"] = f"HTTP {last.status}"
            self.run._run.model_called(
                request=last.request,
                request_type=last.request_type,
                response=last.response if last.status is not None else None,
                response_type=last.response_type,
                attempts=json.dumps(attempts) if attempts else None,
                http=json.dumps(last.http()),
                **fields,
            )
        if groups:
            return
        sent = _since_last_response(request_context.messages)
        self.run._run.model_called(
            request_json=ModelMessagesTypeAdapter.dump_json(sent).decode(),
            response_json=None
            if response is None
            else ModelMessagesTypeAdapter.dump_json([response]).decode(),
            **common,
        )

    def _provider_run(self, response: ModelResponse) -> None:
        returns = {p.tool_call_id: p for p in response.parts if isinstance(p, NativeToolReturnPart)}
        for part in response.parts:
            if not isinstance(part, NativeToolCallPart):
                continue
            answer = returns.get(part.tool_call_id)
            self.run._run.tool_called(
                name=part.tool_name,
                call_id=part.tool_call_id,
                run_call_id=self._step.ids.get(part.tool_call_id),
                arguments=json.dumps(_args(part)),
                result=_json(answer.content if answer is not None else None),
                ok=answer is not None and getattr(answer, "outcome", "success") == "success",
                provider_run=True,
            )

    # --- function tools --------------------------------------------------------------

    def _run_call_id(self, call: ToolCallPart) -> str | None:
        """The run's id of ``call``: a waiting call's own, else its place in the last
        response (in a stream still open: its place among the parts so far)."""
        waiting = self._waiting_id(call.tool_call_id)
        if waiting is not None:
            return waiting
        known = self._step.ids.get(call.tool_call_id)
        if known is not None:
            return known
        stream = self._step.stream
        if stream is not None:
            n = 0
            for part in stream.get().parts:
                if isinstance(part, ToolCallPart) and not isinstance(part, NativeToolCallPart):
                    n += 1
                    if part.tool_call_id == call.tool_call_id:
                        return f"{self._step.number}.{n}"
        return None

    def _waiting_id(self, call_id: str) -> str | None:
        ledger = self.run._ledger
        with ledger.lock:
            return next((rid for rid, w in ledger.waiting.items() if w[1] == call_id), None)

    def _completed(self, call: ToolCallPart, result: Any, *, ok: bool, started: float, decided_by: str, output: bool = False) -> None:
        rid = self._run_call_id(call)
        key = rid or call.tool_call_id
        ledger = self.run._ledger
        with ledger.lock:
            was_waiting = ledger.waiting.pop(key, None)
            ledger.tool_calls += 0 if output else 1
        self._recorded.add(key)
        self.run._run.tool_called(
            name=call.tool_name,
            call_id=call.tool_call_id,
            run_call_id=rid,
            arguments=json.dumps(_args(call) if was_waiting is None else was_waiting[2]),
            result=_json(result),
            ok=ok,
            duration_ms=_millis(started),
            mode="in_process",
            decided_by=decided_by,
            output_tool=output,
        )

    def _deferred(self, call: ToolCallPart, why: str) -> None:
        rid = self._run_call_id(call) or call.tool_call_id
        ledger = self.run._ledger
        with ledger.lock:
            if rid in ledger.waiting:
                return
            ledger.waiting[rid] = (call.tool_name, call.tool_call_id, _args(call), why)
        self.run._run.tool_called(
            name=call.tool_name,
            call_id=call.tool_call_id,
            run_call_id=None if rid == call.tool_call_id else rid,
            arguments=json.dumps(_args(call)),
            mode="in_process",
            deferred=True,
        )

    async def wrap_tool_validate(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        started = time.monotonic()
        try:
            return await handler(args)
        except (CallDeferred, ApprovalRequired):
            raise
        except Exception as e:
            self._completed(call, _error_text(e), ok=False, started=started, decided_by="runtime")
            raise

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        started = time.monotonic()
        try:
            result = await handler(args)
        except ApprovalRequired:
            self._deferred(call, "approval")
            raise
        except CallDeferred:
            self._deferred(call, "caller")
            raise
        except Exception as e:
            self._completed(call, _error_text(e), ok=False, started=started, decided_by="tool")
            raise
        self._completed(call, result, ok=True, started=started, decided_by="tool")
        return result

    # --- the output tool --------------------------------------------------------------

    async def wrap_output_validate(self, ctx: Any, *, output_context: Any, output: Any, handler: Any) -> Any:
        started = time.monotonic()
        try:
            return await handler(output)
        except Exception as e:
            call = output_context.tool_call
            if call is not None and not getattr(ctx, "partial_output", False):
                self._completed(call, _error_text(e), ok=False, started=started, decided_by="runtime", output=True)
            raise

    async def wrap_output_process(self, ctx: Any, *, output_context: Any, output: Any, handler: Any) -> Any:
        started = time.monotonic()
        result = await handler(output)
        call = output_context.tool_call
        if call is not None and not getattr(ctx, "partial_output", False):
            key = self._run_call_id(call) or call.tool_call_id
            if key not in self._recorded:
                self._completed(call, result, ok=True, started=started, decided_by="runtime", output=True)
        return result

    # --- the run --------------------------------------------------------------------

    def _settle(self, messages: list[Any]) -> None:
        """Write the completion of each waiting call that the history answers without a
        hook having run it: an approval denied, or a result the caller supplied."""
        if not self.run.waiting or not messages:
            return
        last = messages[-1]
        if not isinstance(last, ModelRequest):
            return
        for part in last.parts:
            if not isinstance(part, ToolReturnPart):
                continue
            rid = self._waiting_id(part.tool_call_id)
            if rid is None or rid in self._settled:
                continue
            with self.run._ledger.lock:
                name, call_id, args, why = self.run._ledger.waiting[rid]
            self._settled.add(rid)
            denied = getattr(part, "outcome", "success") == "denied"
            call = ToolCallPart(name, args, tool_call_id=call_id)
            self._completed(
                call,
                part.content,
                ok=not denied and getattr(part, "outcome", "success") == "success",
                started=time.monotonic(),
                decided_by="approval" if denied else "caller",
            )

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        output = getattr(result, "output", None)
        if isinstance(output, DeferredToolRequests):
            for call in output.calls:
                self._deferred(call, "caller")
            for call in output.approvals:
                self._deferred(call, "approval")
        return result


def _by_model(exchanges: list[_http.Exchange]) -> list[tuple[str | None, list[_http.Exchange]]]:
    """The exchanges of one request, in the order sent, in runs of the same model: one run
    per model a ``FallbackModel`` tried (an SDK's own retries stay in their model's run)."""
    groups: list[tuple[str | None, list[_http.Exchange]]] = []
    for x in exchanges:
        if groups and groups[-1][0] == x.model:
            groups[-1][1].append(x)
        else:
            groups.append((x.model, [x]))
    return groups


def _streamed_on_the_wire(exchange: _http.Exchange, asked: bool) -> bool:
    """Whether an exchange was streamed: its response is an event stream, or its request
    asked for one (``"stream": true``); ``asked`` when neither side says."""
    if exchange.response_type.split(";")[0].strip().lower() == "text/event-stream":
        return True
    try:
        body = json.loads(exchange.request)
    except ValueError:
        return asked
    if isinstance(body, dict) and isinstance(body.get("stream"), bool):
        return body["stream"]
    return asked if exchange.status is None else False


def _since_last_response(messages: list[Any]) -> list[Any]:
    """The messages sent since the model's last response (what this request adds)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], ModelResponse):
            return messages[i + 1 :]
    return list(messages)


def evidence_capability(ctx: ProvrunContext) -> AbstractCapability[Any]:
    """Make the PydanticAI capability that writes provrun's evidence for one run.

    Pass it in an agent's ``capabilities`` (or a run's), streamed or not: each model
    request writes ``model_called`` (``observed`` with the wire's bytes when the model
    talks HTTP, ``parsed`` otherwise), each function-tool call ``tool_called``, a waiting
    call ``tool_called`` with ``deferred`` and again when it completes, the output tool
    ``tool_called`` with ``output_tool``, and each tool the provider ran ``tool_called``
    with ``provider_run`` (``parsed``).
    """
    return EvidenceCapability(ctx)
