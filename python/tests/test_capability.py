"""evidence_capability on offline models (FunctionModel, TestModel), streamed and not:
parallel tool calls, a retry, deferred and approval-waiting calls, structured output
through the output tool; every model_called `parsed`, every bundle verified by the CLI and
the seed's ordering rules checked event by event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import check_order, cli_reads, cli_verify, events, of_type
from pydantic import BaseModel
from pydantic_ai import Agent, AgentRunResultEvent, DeferredToolRequests, DeferredToolResults, ModelRetry, RunContext, ToolDenied
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
from pydantic_ai.messages import ModelResponse, NativeToolCallPart, NativeToolReturnPart, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import provrun
from provrun.backends.pydantic_ai import evidence_capability

pytestmark = pytest.mark.anyio


class City(BaseModel):
    name: str
    population: int


def turns(messages: list[Any], info: AgentInfo) -> ModelResponse:
    """Turn 1: three parallel calls (one with arguments that do not validate); turn 2: a
    retry of the lookup; turn 3: the answer through the output tool."""
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="c1"),
                ToolCallPart("lookup", {"key": "missing"}, tool_call_id="c2"),
                ToolCallPart("add", {"a": "two"}, tool_call_id="c3"),
            ]
        )
    if len(messages) == 3:
        return ModelResponse(parts=[ToolCallPart("lookup", {"key": "paris"}, tool_call_id="c2")])
    return ModelResponse(
        parts=[ToolCallPart(info.output_tools[0].name, {"name": "Paris", "population": 5}, tool_call_id="c1")]
    )


async def streamed_turns(messages: list[Any], info: AgentInfo) -> Any:
    if len(messages) == 1:
        yield {0: DeltaToolCall("add", '{"a": 2, ', tool_call_id="c1")}
        yield {1: DeltaToolCall("lookup", '{"key": "missing"}', tool_call_id="c2")}
        yield {0: DeltaToolCall(None, '"b": 3}')}
        return
    if len(messages) == 3:
        yield {0: DeltaToolCall("lookup", '{"key": "paris"}', tool_call_id="c2")}
        return
    yield {0: DeltaToolCall(info.output_tools[0].name, '{"name": "Par', tool_call_id="c1")}
    yield {0: DeltaToolCall(None, 'is", "population": 5}')}


def city_agent(model: Any, ctx: provrun.RunContext, *, retry: bool = True) -> Agent[None, City]:
    agent = Agent(model, output_type=City, capabilities=[evidence_capability(ctx)])

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    @agent.tool_plain
    def lookup(key: str) -> str:
        if retry and key != "paris":
            raise ModelRetry(f"no entry {key!r}; try 'paris'")
        return "Paris: 5 people"

    return agent


def calls(evs: list[dict[str, Any]]) -> list[tuple[str, str, bool, str | None]]:
    return [
        (e["payload"]["name"], e["payload"]["run_call_id"], e["payload"]["ok"], e["payload"].get("decided_by"))
        for e in of_type(evs, "tool_called")
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
async def test_function_model_parallel_calls_retry_and_output_tool(bundle: Path, streamed: bool) -> None:
    with provrun.RunContext.create(bundle, agent="cities", model="function") as ctx:
        if streamed:
            agent = city_agent(FunctionModel(stream_function=streamed_turns), ctx)
            async with agent.run_stream("How many live in Paris?") as run:
                output = await run.get_output()
        else:
            output = (await city_agent(FunctionModel(turns), ctx).run("How many live in Paris?")).output
    assert output == City(name="Paris", population=5)
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    models = of_type(evs, "model_called")
    assert len(models) == 3
    assert all(m["confidence"] == "parsed" and m["payload"]["stream"] is streamed for m in models)
    # The parsed request is the messages since the last response, as PydanticAI's JSON.
    first = json.loads((bundle / "events.jsonl").read_text().splitlines()[models[0]["seq"]])
    assert first["payload"]["request"]["media_type"] == "application/json"
    got = sorted(calls(evs)[:-2])
    if streamed:
        assert got == [("add", "1.1", True, "tool"), ("lookup", "1.2", False, "tool")]
    else:
        assert got == [("add", "1.1", True, "tool"), ("add", "1.3", False, "runtime"), ("lookup", "1.2", False, "tool")]
    retried, output_call = calls(evs)[-2:]
    assert retried == ("lookup", "2.1", True, "tool")
    assert output_call == ("final_result", "3.1", True, "runtime")
    out = of_type(evs, "tool_called")[-1]
    assert out["payload"]["output_tool"] is True
    assert out["payload"]["result"] == {"name": "Paris", "population": 5}
    # Streamed: the output tool comes before the model_called whose response asked for it.
    assert (out["seq"] < models[2]["seq"]) is streamed
    finished = of_type(evs, "run_finished")[0]["payload"]
    assert finished["status"] == "finished" and finished["usage"]["requests"] == 3


@pytest.mark.parametrize("entry", ["run_stream", "run_stream_events", "iter"])
async def test_each_streaming_entry_point_places_the_output_tool_as_documented(bundle: Path, entry: str) -> None:
    with provrun.RunContext.create(bundle, agent="cities", model="function") as ctx:
        agent = city_agent(FunctionModel(stream_function=streamed_turns), ctx)
        if entry == "run_stream":
            async with agent.run_stream("How many live in Paris?") as run:
                output = await run.get_output()
        elif entry == "run_stream_events":
            output = None
            async with agent.run_stream_events("How many live in Paris?") as stream:
                async for event in stream:
                    if isinstance(event, AgentRunResultEvent):
                        output = event.result.output
        else:
            async with agent.iter("How many live in Paris?") as run:
                async for node in run:
                    if Agent.is_model_request_node(node):
                        async with node.stream(run.ctx) as streamed:
                            async for _ in streamed:
                                pass
            output = run.result.output
    assert output == City(name="Paris", population=5)
    cli_verify(bundle)
    evs = events(bundle)
    # run_stream checks the answer while the stream is open: the output tool comes before
    # the model_called whose response asked for it. The others check it after.
    check_order(evs, output_in_stream=entry == "run_stream")
    models = of_type(evs, "model_called")
    assert len(models) == 3 and all(m["payload"]["stream"] is True for m in models)
    out = of_type(evs, "tool_called")[-1]
    assert out["payload"]["output_tool"] is True and out["payload"]["run_call_id"] == "3.1"
    assert (out["seq"] < models[2]["seq"]) is (entry == "run_stream")
    assert out["seq"] > models[1]["seq"]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
async def test_test_model_calls_every_tool_and_answers_through_the_output_tool(bundle: Path, streamed: bool) -> None:
    with provrun.RunContext.create(bundle) as ctx:
        agent = city_agent(TestModel(), ctx, retry=False)
        if streamed:
            async with agent.run_stream("go") as run:
                await run.get_output()
        else:
            await agent.run("go")
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    names = sorted(c[0] for c in calls(evs))
    # TestModel calls every tool at once, then answers through the output tool.
    assert names == ["add", "final_result", "lookup"]
    assert all(m["confidence"] == "parsed" for m in of_type(evs, "model_called"))


def deferring_agent(ctx: provrun.RunContext, model: FunctionModel) -> Agent[None, str | DeferredToolRequests]:
    agent = Agent(model, output_type=[str, DeferredToolRequests], capabilities=[evidence_capability(ctx)])

    @agent.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        return f"deleted {path}"

    @agent.tool
    def external(ctx: RunContext[None], query: str) -> str:
        raise CallDeferred()

    @agent.tool
    def ask(ctx: RunContext[None], question: str) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        return f"asked {question}"

    @agent.tool_plain
    def now() -> str:
        return "noon"

    return agent


def deferring_turns(messages: list[Any], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("delete", {"path": "a"}, tool_call_id="d1"),
                ToolCallPart("delete", {"path": "b"}, tool_call_id="d2"),
                ToolCallPart("external", {"query": "x"}, tool_call_id="e1"),
                ToolCallPart("ask", {"question": "y"}, tool_call_id="a1"),
                ToolCallPart("now", {}, tool_call_id="n1"),
            ]
        )
    return ModelResponse(parts=[TextPart("all done")])


async def test_deferred_and_approval_calls_are_written_deferred_and_again_when_they_run(
    bundle: Path, tmp_path: Path
) -> None:
    ctx = provrun.RunContext.create(bundle)
    agent = deferring_agent(ctx, FunctionModel(deferring_turns))
    first = await agent.run("tidy up")
    assert isinstance(first.output, DeferredToolRequests)
    assert sorted(ctx.waiting) == ["1.1", "1.2", "1.3", "1.4"]
    results = DeferredToolResults(
        approvals={"d1": True, "d2": ToolDenied("not b"), "a1": True}, calls={"e1": "from outside"}
    )
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == "all done"
    assert ctx.waiting == []
    finished = ctx.finish()
    assert finished.status == "finished"
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    tool_events = of_type(evs, "tool_called")
    deferred = {e["payload"]["run_call_id"]: e["payload"]["name"] for e in tool_events if e["payload"]["deferred"]}
    assert deferred == {"1.1": "delete", "1.2": "delete", "1.3": "external", "1.4": "ask"}
    done = {e["payload"]["run_call_id"]: e["payload"] for e in tool_events if not e["payload"]["deferred"]}
    assert done["1.5"]["result"] == "noon"
    assert (done["1.1"]["result"], done["1.1"]["decided_by"], done["1.1"]["ok"]) == ("deleted a", "tool", True)
    assert (done["1.2"]["result"], done["1.2"]["decided_by"], done["1.2"]["ok"]) == ("not b", "approval", False)
    assert (done["1.3"]["result"], done["1.3"]["decided_by"]) == ("from outside", "caller")
    assert (done["1.4"]["result"], done["1.4"]["decided_by"]) == ("asked y", "tool")
    # The completions come after the first run's end, before the resumed request.
    models = of_type(evs, "model_called")
    assert len(models) == 2
    assert tool_events[-1]["seq"] < models[1]["seq"]
    cli_reads(bundle, tmp_path)


async def test_a_run_left_waiting_finishes_paused_and_verifies(bundle: Path) -> None:
    with provrun.RunContext.create(bundle) as ctx:
        first = await deferring_agent(ctx, FunctionModel(deferring_turns)).run("tidy up")
        assert isinstance(first.output, DeferredToolRequests)
    report = cli_verify(bundle)
    assert report["status"] == "paused"
    check_order(events(bundle))


async def test_a_failing_block_finishes_the_bundle_failed(bundle: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with provrun.RunContext.create(bundle):
            raise RuntimeError("boom")
    finished = of_type(events(bundle), "run_finished")[0]["payload"]
    assert finished["status"] == "failed" and "boom" in finished["error"]
    cli_verify(bundle)


def searching(messages: list[Any], info: AgentInfo) -> ModelResponse:
    """A response in which the provider ran a web search itself, then a call of ours."""
    if len(messages) > 1:
        return ModelResponse(parts=[TextPart("found it")])
    return ModelResponse(
        parts=[
            NativeToolCallPart("web_search", {"query": "provrun"}, tool_call_id="ws_1", provider_name="function"),
            NativeToolReturnPart("web_search", {"results": ["a page"]}, tool_call_id="ws_1", provider_name="function"),
            ToolCallPart("now", {}, tool_call_id="n1"),
        ]
    )


async def test_provider_run_tools_are_written_parsed_after_their_model_called(bundle: Path) -> None:
    with provrun.RunContext.create(bundle) as ctx:
        agent = Agent(FunctionModel(searching), capabilities=[evidence_capability(ctx)])

        @agent.tool_plain
        def now() -> str:
            return "noon"

        assert (await agent.run("search")).output == "found it"
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    provider, ours = of_type(evs, "tool_called")
    assert provider["confidence"] == "parsed"
    assert provider["payload"]["provider_run"] is True and provider["payload"]["run_call_id"] == "1.p1"
    assert provider["payload"]["decided_by"] == "provider"
    assert provider["payload"]["result"] == {"results": ["a page"]} and provider["payload"]["ok"] is True
    assert (ours["payload"]["name"], ours["payload"]["run_call_id"]) == ("now", "1.1")
