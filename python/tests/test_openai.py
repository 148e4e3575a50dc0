"""evidence_capability on PydanticAI's own OpenAI provider (OpenAIChatModel through the
`openai` SDK and its httpx2 client), against recorded Chat Completions traffic served from
a loopback server: every model_called is `observed`, and its request and response blobs
are byte for byte what the server received and sent. The fixtures are the repository's
(crates/model/tests/fixtures/openai), real exchanges recorded by public projects."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, check_order, cli_reads, cli_verify, events, of_type
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from openai import AsyncOpenAI

import provrun
from provrun.backends.pydantic_ai import evidence_capability

pytestmark = pytest.mark.anyio

FIXTURES = ROOT / "crates/model/tests/fixtures/openai"


class Recorded:
    """A loopback Chat Completions server answering each POST with the next recorded
    response, keeping the bytes it received and sent."""

    def __init__(self, names: list[str]) -> None:
        self.answers: list[tuple[int, bytes, str]] = []
        for name in names:
            status = json.loads((FIXTURES / f"{name}.meta.json").read_text())["status"]
            sse = FIXTURES / f"{name}.response.sse"
            if sse.exists():
                self.answers.append((status, sse.read_bytes(), "text/event-stream"))
            else:
                self.answers.append((status, (FIXTURES / f"{name}.response.json").read_bytes(), "application/json"))
        self.received: list[bytes] = []
        self.clients: list[AsyncOpenAI] = []
        self.sent: list[bytes] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers["content-length"]))
                server.received.append(body)
                status, answer, media_type = server.answers[len(server.sent)]
                server.sent.append(answer)
                self.send_response(status)
                self.send_header("content-type", media_type)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Recorded:
        self.thread.start()
        return self

    async def __aenter__(self) -> Recorded:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        for client in self.clients:
            await client.close()
        self.__exit__()

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def model(self, retries: int = 0, name: str = "gpt-4o") -> OpenAIChatModel:
        port = self.httpd.server_address[1]
        # By default no retries of the SDK's own: each request is one exchange.
        client = AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test-not-a-key", max_retries=retries
        )
        self.clients.append(client)
        return OpenAIChatModel(name, provider=OpenAIProvider(openai_client=client))


def blob(bundle: Path, ref: dict[str, Any]) -> bytes:
    """A blob's bytes, read back through the bundle's own store (the CLI's `cat`)."""
    import subprocess

    from conftest import provrun_bin

    digest = ref["digest"]["sha256"]
    out = subprocess.run([provrun_bin(), "cat", str(bundle), digest], capture_output=True)
    assert out.returncode == 0, out.stderr
    assert hashlib.sha256(out.stdout).hexdigest() == digest
    return out.stdout


def assert_wire(bundle: Path, server: Recorded, skip: int = 0) -> list[dict[str, Any]]:
    """Each model_called holds the bytes of its request's last exchange (``skip``: the
    exchanges before the first that are earlier attempts of it)."""
    evs = events(bundle)
    models = of_type(evs, "model_called")
    assert len(models) == len(server.received) - skip == len(server.sent) - skip
    for m, received, sent in zip(models, server.received[skip:], server.sent[skip:]):
        assert m["confidence"] == "observed"
        p = m["payload"]
        assert blob(bundle, p["request"]) == received
        assert blob(bundle, p["response"]) == sent
        assert p["http"]["path"] == "/v1/chat/completions"
        assert not any(k == "authorization" for k, _ in p["http"]["request_headers"])
        assert "authorization" in p["http"]["removed_headers"]
    return evs


async def test_parallel_tool_calls_then_text(bundle: Path) -> None:
    async with Recorded(["01_parallel_tool_calls", "02_final_text_after_parallel_tools"]) as server:
        with provrun.RunContext.create(bundle, model="openai:gpt-4o") as ctx:
            agent = Agent(server.model(), capabilities=[evidence_capability(ctx)])

            @agent.tool_plain
            def delete_file(path: str) -> str:
                return "true"

            @agent.tool_plain
            def create_file(path: str) -> str:
                return "Success"

            result = await agent.run("Delete .env and create test.txt")
    assert "test.txt" in result.output or result.output
    cli_verify(bundle)
    evs = assert_wire(bundle, server)
    check_order(evs)
    made = {(e["payload"]["name"], e["payload"]["run_call_id"]) for e in of_type(evs, "tool_called")}
    assert made == {("delete_file", "1.1"), ("create_file", "1.2")}
    assert all(m["payload"]["stream"] is False for m in of_type(evs, "model_called"))
    usage = of_type(evs, "model_called")[0]["payload"]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


class Answer(BaseModel):
    label: str
    answer: str


class Answers(BaseModel):
    answers: list[Answer]


async def test_a_streamed_run_with_the_output_tool(bundle: Path, tmp_path: Path) -> None:
    names = [
        "05_stream_run_turn1_parallel_tool_calls",
        "06_stream_run_turn2_tool_call_split_args",
        "07_stream_run_turn3_output_tool_final_result",
    ]
    async with Recorded(names) as server:
        with provrun.RunContext.create(bundle, model="openai:gpt-4o") as ctx:
            agent = Agent(server.model(), output_type=Answers, capabilities=[evidence_capability(ctx)])

            @agent.tool_plain
            def get_country() -> str:
                return "Mexico"

            @agent.tool_plain
            def get_product_name() -> str:
                return "Pydantic AI"

            @agent.tool_plain
            def get_weather(city: str) -> str:
                return "sunny"

            async with agent.run_stream("Tell me: capital of the country, weather there, product name") as run:
                output = await run.get_output()
    assert [a.label for a in output.answers] == ["Capital", "Weather", "Product Name"]
    cli_verify(bundle)
    evs = assert_wire(bundle, server)
    check_order(evs)
    models = of_type(evs, "model_called")
    assert all(m["payload"]["stream"] is True for m in models)
    calls = [(e["payload"]["name"], e["payload"]["run_call_id"]) for e in of_type(evs, "tool_called")]
    assert sorted(calls[:2]) == [("get_country", "1.1"), ("get_product_name", "1.2")]
    assert calls[2:] == [("get_weather", "2.1"), ("final_result", "3.1")]
    out = of_type(evs, "tool_called")[-1]
    assert out["payload"]["output_tool"] is True and out["seq"] < models[2]["seq"]
    cli_reads(bundle, tmp_path)


async def test_a_streamed_tool_call_then_text(bundle: Path) -> None:
    async with Recorded(["03_stream_tool_call_split_args", "04_stream_final_text_with_usage"]) as server:
        with provrun.RunContext.create(bundle) as ctx:
            agent = Agent(server.model(), capabilities=[evidence_capability(ctx)])

            @agent.tool_plain
            def get_capital(country: str) -> str:
                return "London"

            async with agent.run_stream("What is the capital of the UK?") as run:
                text = await run.get_output()
    assert text == "The capital of the UK is London."
    cli_verify(bundle)
    evs = assert_wire(bundle, server)
    check_order(evs)
    (call,) = of_type(evs, "tool_called")
    assert call["payload"]["arguments"] == {"country": "UK"} and call["payload"]["result"] == "London"


async def test_an_error_response_is_recorded_observed_with_its_error(bundle: Path) -> None:
    async with Recorded(["08_error_400_unsupported_value"]) as server:
        with pytest.raises(ModelHTTPError):
            with provrun.RunContext.create(bundle) as ctx:
                await Agent(server.model(), capabilities=[evidence_capability(ctx)]).run("hello")
    report = cli_verify(bundle)
    assert report["status"] == "failed"
    evs = assert_wire(bundle, server)
    (called,) = of_type(evs, "model_called")
    assert called["payload"]["http"]["status"] == 400
    assert "status_code: 400" in called["payload"]["error"] and "unsupported_value" in called["payload"]["error"]


async def test_the_sdks_own_retry_is_listed_in_attempts(bundle: Path) -> None:
    # A 429 (OpenRouter's, recorded), retried by the openai SDK, then the recorded answer.
    async with Recorded(["10_error_429_openrouter_rate_limited", "15_seq_final_text_bytes"]) as server:
        with provrun.RunContext.create(bundle) as ctx:
            result = await Agent(server.model(retries=1), capabilities=[evidence_capability(ctx)]).run("ok?")
    assert result.output == "YES"
    cli_verify(bundle)
    evs = assert_wire(bundle, server, skip=1)
    (called,) = of_type(evs, "model_called")
    (attempt,) = called["payload"]["attempts"]
    assert attempt["status"] == 429 and attempt["response_size"] == len(server.sent[0])
    assert called["payload"]["http"]["status"] == 200 and called["payload"]["error"] is None
