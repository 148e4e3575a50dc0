"""PydanticAIBackend(model, registry).execute(ctx, agent, run): tools from the registry by
name, reaching the Rust sandbox through ctx.deps; the history imported as trace_imported;
response.txt written unless the agent wrote it; the seed's errors for bad tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import check_order, cli_verify, events, of_type
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import provrun
from provrun import AgentSpec, RunSpec
from provrun.backends.pydantic_ai import TRACE_FORMAT, PydanticAIBackend
from provrun.tools import RunDeps, Tool, ToolRegistry

pytestmark = pytest.mark.anyio


async def read_notes(ctx: RunContext[RunDeps], path: str) -> str:
    """Read a file in the sandbox."""
    return ctx.deps.sandbox.read_text(path)


async def save(ctx: RunContext[RunDeps], path: str, text: str) -> str:
    """Write a file in the sandbox."""
    ctx.deps.run.recorder.for_source("save").declare("saved", {"path": path})
    return json.dumps(ctx.deps.sandbox.write_file(path, text))


def registry() -> ToolRegistry:
    r = ToolRegistry()
    r.add(Tool("read_notes", read_notes))
    r.add(Tool("save", save))
    r.add(Tool("later", save, "client_round_trip"))
    return r


def summarise(messages: list[Any], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("read_notes", {"path": "/input/notes.txt"}, tool_call_id="r")])
    return ModelResponse(parts=[TextPart("two lines")])


def escape(messages: list[Any], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("read_notes", {"path": "/input/../../etc/passwd"}, tool_call_id="x")])


async def summarise_stream(messages: list[Any], info: AgentInfo) -> Any:
    if len(messages) == 1:
        yield {0: DeltaToolCall("save", '{"path": "/output/response.txt", "text": "mine"}', tool_call_id="s")}
        return
    yield "saved it"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("one\ntwo\n")
    return path


async def test_execute_runs_the_agent_in_the_sandbox_and_imports_the_history(bundle: Path, notes: Path) -> None:
    spec = AgentSpec(name="summariser", instructions="Summarise the notes.", tools=["read_notes"])
    with provrun.RunContext.create(bundle, inputs=[notes], agent="summariser") as ctx:
        result = await PydanticAIBackend(FunctionModel(summarise), registry()).execute(ctx, spec, RunSpec("Summarise"))
    assert result.output == "two lines" and result.requests == 2 and result.tool_calls >= 1
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    (call,) = of_type(evs, "tool_called")
    assert call["payload"]["ok"] and call["payload"]["result"] == "one\ntwo\n"
    (trace,) = of_type(evs, "trace_imported")
    assert trace["payload"]["format"] == TRACE_FORMAT and trace["payload"]["messages"] == 4
    assert (bundle / "output/response.txt").read_text() == "two lines"


async def test_a_path_outside_the_sandbox_is_the_sandboxs_error(bundle: Path, notes: Path) -> None:
    spec = AgentSpec(tools=["read_notes"])
    with pytest.raises(provrun.SandboxError, match="outside the sandbox|escape|input"):
        with provrun.RunContext.create(bundle, inputs=[notes]) as ctx:
            await PydanticAIBackend(FunctionModel(escape), registry()).execute(ctx, spec, RunSpec("go"))
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    (call,) = of_type(evs, "tool_called")
    assert not call["payload"]["ok"] and "SandboxError" in call["payload"]["result"]
    assert of_type(evs, "run_finished")[0]["payload"]["status"] == "failed"


async def test_a_streamed_agent_that_wrote_response_txt_keeps_it(bundle: Path) -> None:
    spec = AgentSpec(tools=["save"], stream=True)
    with provrun.RunContext.create(bundle) as ctx:
        backend = PydanticAIBackend(FunctionModel(stream_function=summarise_stream), registry())
        result = await backend.execute(ctx, spec, RunSpec("go"))
    assert result.output == "saved it"
    assert (bundle / "output/response.txt").read_text() == "mine"
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    assert of_type(evs, "declared")[0]["payload"] == {"source": "save", "kind": "saved", "data": {"path": "/output/response.txt"}}
    assert all(m["payload"]["stream"] for m in of_type(evs, "model_called"))


async def test_a_missing_or_not_in_process_tool_is_refused_before_anything_runs(bundle: Path) -> None:
    with provrun.RunContext.create(bundle) as ctx:
        backend = PydanticAIBackend(FunctionModel(summarise), registry())
        with pytest.raises(ValueError, match="no tool named 'absent'"):
            await backend.execute(ctx, AgentSpec(tools=["read_notes", "absent"]), RunSpec("go"))
        with pytest.raises(ValueError, match="'later' has mode 'client_round_trip'"):
            await backend.execute(ctx, AgentSpec(tools=["later"]), RunSpec("go"))
    assert not of_type(events(bundle), "model_called")
