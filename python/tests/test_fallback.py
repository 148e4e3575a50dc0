"""evidence_capability under PydanticAI's real ``FallbackModel`` over two ordinary
``OpenAIChatModel``s, each with its own loopback server: the first answers every request
with HTTP 500, the second with recorded Chat Completions traffic. Every HTTP request the
two servers received is a ``model_called`` of its own, ``observed``, in the order sent,
naming the model it was sent to, its request and response blobs byte for byte what
crossed the wire (the failed one with its error and the 500's body)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import check_order, cli_reads, cli_verify, events, of_type
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from test_openai import Recorded, blob

import provrun
from provrun.backends.pydantic_ai import evidence_capability

pytestmark = pytest.mark.anyio

BROKEN = json.dumps(
    {"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}
).encode()


class Failing:
    """A loopback Chat Completions server that answers every POST with HTTP 500, keeping
    the bytes it received and sent."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.sent: list[bytes] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                server.received.append(self.rfile.read(int(self.headers["content-length"])))
                server.sent.append(BROKEN)
                self.send_response(500)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(BROKEN)))
                self.end_headers()
                self.wfile.write(BROKEN)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def model(self, retries: int) -> tuple[OpenAIChatModel, AsyncOpenAI]:
        port = self.httpd.server_address[1]
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test-not-a-key", max_retries=retries)
        return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), client

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("retries", [0, 1], ids=["no-sdk-retry", "one-sdk-retry"])
async def test_a_fallback_model_records_every_exchange_with_its_model(bundle: Path, tmp_path: Path, retries: int) -> None:
    failing = Failing()
    try:
        async with Recorded(["01_parallel_tool_calls", "02_final_text_after_parallel_tools"]) as good:
            broken, client = failing.model(retries)
            backup = good.model(name="gpt-4o-mini")
            fallback = FallbackModel(broken, backup)
            with provrun.RunContext.create(bundle, model="fallback") as ctx:
                agent = Agent(fallback, capabilities=[evidence_capability(ctx)])

                @agent.tool_plain
                def delete_file(path: str) -> str:
                    return "true"

                @agent.tool_plain
                def create_file(path: str) -> str:
                    return "Success"

                result = await agent.run("Delete .env and create test.txt")
            await client.close()
    finally:
        failing.close()
    assert result.output
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    models = of_type(evs, "model_called")
    # Each of PydanticAI's two requests went to the broken model (once, or twice with the
    # SDK's retry), then to the backup: one model_called per model, in the order sent.
    assert len(failing.received) == 2 * (1 + retries) and len(good.received) == 2
    assert [m["payload"]["model"] for m in models] == ["openai:gpt-4o", "openai:gpt-4o-mini"] * 2
    sent_to_broken = iter(zip(failing.received, failing.sent))
    sent_to_good = iter(zip(good.received, good.sent))
    for m in models:
        assert m["confidence"] == "observed"
        p = m["payload"]
        if p["model"] == "openai:gpt-4o":
            attempts = [next(sent_to_broken) for _ in range(1 + retries)]
            received, sent = attempts[-1]
            assert p["http"]["status"] == 500
            assert "500" in p["error"]
            assert len(p.get("attempts", [])) == retries
            for a in p.get("attempts", []):
                assert a["status"] == 500 and a["response_size"] == len(BROKEN)
        else:
            received, sent = next(sent_to_good)
            assert p["http"]["status"] == 200 and p["error"] is None
            assert p["usage"]["input_tokens"] > 0
        assert blob(bundle, p["request"]) == received
        assert blob(bundle, p["response"]) == sent
        assert p["stream"] is False
    # The calls are numbered by the model_called that asked for them: the backup's first.
    made = {(e["payload"]["name"], e["payload"]["run_call_id"]) for e in of_type(evs, "tool_called")}
    assert made == {("delete_file", "2.1"), ("create_file", "2.2")}
    finished = of_type(evs, "run_finished")[0]["payload"]
    assert finished["usage"]["requests"] == 4
    cli_reads(bundle, tmp_path)
