"""evidence_capability on PydanticAI's own Anthropic provider (AnthropicModel through the
``anthropic`` SDK) against recorded Messages API traffic on a loopback server. A model
whose maximum output is past what the SDK sends without streaming is streamed by the SDK
even for ``agent.run``: the ``model_called`` says ``stream: true``, as the wire does, and
its blobs are the bytes the server received and sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from conftest import ROOT, check_order, cli_verify, events, of_type
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from test_openai import blob

import provrun
from provrun.backends.pydantic_ai import evidence_capability

pytestmark = pytest.mark.anyio

FIXTURES = ROOT / "crates/model/tests/fixtures/anthropic"


async def test_a_run_the_sdk_streams_is_recorded_as_streamed(bundle: Path) -> None:
    answer = (FIXTURES / "06_stream_final_text_with_usage_bytes.response.sse").read_bytes()
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            received.append(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    client = AsyncAnthropic(base_url=f"http://127.0.0.1:{httpd.server_address[1]}", api_key="test-not-a-key", max_retries=0)
    try:
        # A model whose maximum output (64,000 tokens) is past the SDK's non-streaming limit.
        model = AnthropicModel("claude-opus-4-5", provider=AnthropicProvider(anthropic_client=client))
        with provrun.RunContext.create(bundle) as ctx:
            result = await Agent(model, capabilities=[evidence_capability(ctx)]).run("What is the capital?")
    finally:
        await client.close()
        httpd.shutdown()
        httpd.server_close()
    assert result.output
    cli_verify(bundle)
    evs = events(bundle)
    check_order(evs)
    (called,) = of_type(evs, "model_called")
    p = called["payload"]
    assert called["confidence"] == "observed"
    (sent,) = received
    assert json.loads(sent)["stream"] is True
    assert blob(bundle, p["request"]) == sent
    assert blob(bundle, p["response"]) == answer
    assert p["response"]["media_type"].startswith("text/event-stream")
    assert p["stream"] is True
    assert p["model"] == "anthropic:claude-opus-4-5"
