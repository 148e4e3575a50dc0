"""RunContext: one run's bundle, opened, recorded into and finished from Python."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from . import _core
from ._sandbox import Sandbox

__all__ = ["Finished", "Recorder", "RunContext"]

ToolDeclaration = Any
"""A tool named in ``run_started``: a :class:`provrun.tools.Tool`, a function in the
PydanticAI form, or a ``(name, JSON Schema)`` pair."""


@dataclass(frozen=True)
class Finished:
    """What :meth:`RunContext.finish` wrote: the statement and the log's final state."""

    statement: Path
    """The bundle's ``statement.json``."""
    status: str
    """``finished``, ``failed``, ``cancelled`` or ``paused``."""
    event_count: int
    """Events in ``events.jsonl``."""
    head: str
    """SHA-256 hex of the log's last line (the chain's head)."""
    outputs: list[dict[str, Any]]
    """One ``{path, sha256, size}`` per file under ``output/``."""


class Recorder:
    """What a tool gets to write evidence with: ``declared`` events and nothing else.

    A tool can add its own claims (recorded with confidence ``declared``) but never
    another event type or confidence, and never rewrite the log.
    """

    def __init__(self, run: _core.Run, source: str | None = None) -> None:
        self._run = run
        self._source = source

    def declare(self, kind: str, data: Any = None) -> int:
        """Append a ``declared`` event of ``kind`` holding ``data`` (any JSON value);
        returns its sequence number."""
        return self._run.declare(kind, json.dumps(data), self._source)

    def for_source(self, source: str) -> Recorder:
        """The same recorder, naming ``source`` (e.g. the tool) in every event."""
        return Recorder(self._run, source)


@dataclass
class _Ledger:
    """What the evidence of one bundle counts across the agent runs recorded into it:
    model requests (the ``STEP`` of run call ids), calls still waiting, and totals."""

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # run_call_id -> (tool name, call id, arguments, "approval" | "caller")
    waiting: dict[str, tuple[str, str, Any, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_step(self) -> int:
        with self.lock:
            self.requests += 1
            return self.requests

    def usage(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def _tool_schema(tool: ToolDeclaration) -> tuple[str, dict[str, Any]]:
    """The name and parameter schema of a tool named in ``RunContext.create(tools=…)``."""
    if isinstance(tool, tuple) and len(tool) == 2 and isinstance(tool[0], str):
        return tool[0], dict(tool[1])
    name = getattr(tool, "name", None)
    fn = getattr(tool, "fn", tool)
    if not callable(fn):
        raise ValueError(f"{tool!r} is not a tool: give a provrun.tools.Tool, a function or a (name, schema) pair")
    try:
        from pydantic_ai import Tool as PydanticTool
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ValueError(
            f"the schema of tool {name or fn.__name__!r} is derived by PydanticAI, which is not installed: "
            "pip install 'provrun[pydantic-ai]', or give a (name, schema) pair"
        ) from e
    definition = PydanticTool(fn, name=name).tool_def
    return definition.name, definition.parameters_json_schema


class RunContext:
    """One run: its bundle, its sandbox and the recorder its evidence goes through.

    Make one with :meth:`create`, run an agent with it (for PydanticAI, pass
    ``evidence_capability(ctx)`` or use the backend) and end it with :meth:`finish`. As a
    context manager it finishes itself: ``failed`` with the error when the block raises,
    else as :meth:`finish` decides.
    """

    def __init__(self, run: _core.Run) -> None:
        self._run = run
        self._ledger = _Ledger()
        self._sandbox: Sandbox | None = None
        self._finished: Finished | None = None

    @classmethod
    def create(
        cls,
        bundle: str | os.PathLike[str],
        *,
        inputs: Iterable[str | os.PathLike[str]] = (),
        agent: str = "agent",
        model: str = "",
        tools: Sequence[ToolDeclaration] = (),
        run_id: str | None = None,
        builder: str | None = None,
        details: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        durability: str | None = None,
        spec: bytes | None = None,
    ) -> RunContext:
        """Open the bundle ``bundle`` (a new path, or an empty folder) and write
        ``run_started``.

        ``inputs`` (files or folders) are staged into ``input/``, read-only, as a native
        run stages them. ``agent``, ``model`` and ``tools`` describe the run in
        ``run_started`` (each tool with the digest of its parameter schema); ``run_id``
        defaults to a fresh one; ``builder`` names what wrote the bundle (default
        ``provrun-python/VERSION``); ``details`` is any JSON object kept in
        ``run_started``; ``limits`` overrides the sandbox's limits (the keys of
        ``[limits]`` in an agent spec); ``durability`` is ``at_end`` (default),
        ``per_event``, ``per_step``, ``group_commit`` or ``flush``; ``spec`` is the bytes
        of whatever configures the agent, whose digest ``run_started`` records.

        Raises ``SandboxError`` for an input that cannot be staged (nothing is left
        behind) and ``EvidenceError`` when the bundle cannot be made.
        """
        declared = [_tool_schema(t) for t in tools]
        run = _core.Run.open(
            os.fspath(bundle),
            inputs=[os.fspath(p) for p in inputs],
            agent=agent,
            model=model,
            tools=[(name, json.dumps(schema)) for name, schema in declared],
            run_id=run_id,
            builder=builder,
            details=None if details is None else json.dumps(dict(details)),
            limits=None if limits is None else json.dumps(dict(limits)),
            durability=durability,
            spec=spec,
        )
        return cls(run)

    @property
    def bundle(self) -> Path:
        """The bundle's folder."""
        return Path(self._run.bundle)

    @property
    def run_id(self) -> str:
        """The run's id (every event's ``run_id``)."""
        return self._run.run_id

    @property
    def recorder(self) -> Recorder:
        """The handle tools write their own claims with (``declared`` events only)."""
        return Recorder(self._run)

    @property
    def sandbox(self) -> Sandbox:
        """The run's sandbox: ``/input`` (the staged inputs, read-only), ``/output`` (the
        bundle's outputs) and ``/scratch`` (working space, not part of the bundle). One
        per run, made on first use."""
        if self._sandbox is None:
            self._sandbox = Sandbox(self._run.sandbox())
        return self._sandbox

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` was called."""
        return self._finished is not None

    @property
    def waiting(self) -> list[str]:
        """The run ids of tool calls recorded as waiting (for approval or for the caller)
        and not completed yet."""
        with self._ledger.lock:
            return list(self._ledger.waiting)

    @property
    def usage(self) -> dict[str, int]:
        """The totals recorded so far: model ``requests``, completed ``tool_calls``,
        ``input_tokens`` and ``output_tokens``."""
        with self._ledger.lock:
            return self._ledger.usage()

    def write_output(self, path: str, data: str | bytes) -> int:
        """Write an output file: ``path`` is the sandbox path of a file under ``/output``
        (``"/output/report.txt"``) or a path relative to ``output/`` (``"report.txt"``);
        returns the bytes written. Any other absolute path (``/input/…``, ``/scratch/…``)
        raises ``SandboxError``, as do ``..`` and links. Tools write through
        :attr:`sandbox` instead."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        return self._run.write_output(path, payload)

    def finish(
        self,
        status: str | None = None,
        *,
        usage: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> Finished:
        """End the run: record every file under ``output/``, then ``run_finished``, then
        write ``statement.json``.

        ``status`` defaults to ``paused`` while a tool call still waits (the bundle then
        verifies as a paused run), else ``failed`` when ``error`` is given, else
        ``finished``. ``usage`` defaults to the totals recorded (:attr:`usage`); a mapping
        given is laid over them.
        """
        if status is None:
            status = "paused" if self.waiting else ("failed" if error else "finished")
        totals: dict[str, Any] = dict(self.usage)
        totals.update(usage or {})
        self._sandbox = None
        facts = json.loads(self._run.finish(status, json.dumps(totals), error))
        self._finished = Finished(
            statement=Path(facts["statement"]),
            status=facts["status"],
            event_count=facts["event_count"],
            head=facts["head"],
            outputs=facts["outputs"],
        )
        return self._finished

    def __enter__(self) -> RunContext:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.finished:
            return
        if exc is None:
            self.finish()
        elif isinstance(exc, (KeyboardInterrupt,)) or getattr(exc_type, "__name__", "") == "CancelledError":
            self.finish("cancelled", error=f"{exc_type.__name__}: {exc}" if exc_type else None)
        else:
            self.finish("failed", error=f"{type(exc).__name__}: {exc}")

    def __repr__(self) -> str:
        return f"RunContext(bundle={str(self.bundle)!r}, run_id={self.run_id!r})"
