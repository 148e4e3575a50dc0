"""PydanticAIBackend: a PydanticAI agent run in provrun's sandbox, recorded by the evidence
capability, its history imported once at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent
from pydantic_ai import Tool as PydanticTool
from pydantic_ai.usage import UsageLimits

from ..._spec import AgentSpec, RunResult, RunSpec
from ...tools import RunDeps, ToolRegistry
from ._capability import evidence_capability

if TYPE_CHECKING:
    from ..._context import RunContext as ProvrunContext

__all__ = ["PydanticAIBackend"]

TRACE_FORMAT = "pydantic-ai-messages/1"
"""The ``format`` of the ``trace_imported`` event: PydanticAI's own message JSON, as
``provrun import pydantic-ai`` reads it."""


class PydanticAIBackend:
    """A PydanticAI agent with a filesystem sandbox over the run's folders.

    ``model`` is a PydanticAI ``Model`` to use instead of the agent spec's (for tests);
    ``None`` takes the spec's. ``registry`` is where the agent's tools are found by name;
    ``None`` is a :class:`~provrun.tools.ToolRegistry` of the ``provrun.tools`` entry
    points.
    """

    def __init__(self, model: Any = None, registry: ToolRegistry | None = None) -> None:
        self.model = model
        self.registry = registry if registry is not None else ToolRegistry()

    def _tools(self, agent: AgentSpec) -> list[PydanticTool[RunDeps]]:
        tools = self.registry.get(list(agent.tools))
        for tool in tools:
            if tool.mode != "in_process":
                raise ValueError(
                    f"tool {tool.name!r} has mode {tool.mode!r}: the PydanticAI backend runs only in_process tools"
                )
        return [PydanticTool(t.fn, name=t.name) for t in tools]

    async def execute(self, ctx: ProvrunContext, agent: AgentSpec, run: RunSpec) -> RunResult:
        """Run the agent in the sandbox and import its message history as
        ``trace_imported``.

        The tools reach the sandbox and the run through ``ctx.deps`` (a
        :class:`~provrun.tools.RunDeps`). The output is written to ``response.txt`` in the
        output folder unless the agent wrote that file. Raises ``ValueError`` for a tool
        the registry lacks or that is not ``in_process`` (before anything runs).
        """
        tools = self._tools(agent)
        model = self.model if self.model is not None else agent.model
        if model is None:
            raise ValueError(f"agent {agent.name!r} names no model, and the backend was given none")
        pydantic_agent: Agent[RunDeps, str] = Agent(
            model,
            name=agent.name,
            instructions=agent.instructions or None,
            deps_type=RunDeps,
            tools=tools,
            capabilities=[evidence_capability(ctx)],
        )
        deps = RunDeps(sandbox=ctx.sandbox, run=ctx)
        limits = UsageLimits(request_limit=agent.max_steps) if agent.max_steps else None
        if agent.stream:
            async with pydantic_agent.run_stream(run.prompt, deps=deps, usage_limits=limits) as streamed:
                output = await streamed.get_output()
            messages, usage = streamed.all_messages(), streamed.usage
            history = streamed.all_messages_json()
        else:
            result = await pydantic_agent.run(run.prompt, deps=deps, usage_limits=limits)
            output, messages, usage = result.output, result.all_messages(), result.usage
            history = result.all_messages_json()
        ctx._run.trace(TRACE_FORMAT, history, len(messages))
        text = output if isinstance(output, str) else str(output)
        if not any(e["name"] == "response.txt" for e in ctx.sandbox.list_dir("/output")["entries"]):
            ctx.sandbox.write_file("/output/response.txt", text)
        return RunResult(
            output=text,
            requests=usage.requests,
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            tool_calls=usage.tool_calls,
        )
