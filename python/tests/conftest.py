"""Shared helpers of the provrun Python tests: bundles, their events, the CLI's verdict and
the seed's ordering rules, checked event by event."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import provrun

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""


def in_ci() -> bool:
    return os.environ.get("CI") in ("true", "1")


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A path for a new bundle."""
    return tmp_path / "bundle"


def events(bundle: Path) -> list[dict[str, Any]]:
    """The bundle's events, in order."""
    return [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]


def of_type(evs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["type"] == kind]


def provrun_bin() -> str:
    """The `provrun` binary the suite checks bundles with (`PROVRUN_BIN`, set by
    `cargo xtask python`)."""
    path = os.environ.get("PROVRUN_BIN")
    if path and Path(path).is_file():
        return path
    message = "PROVRUN_BIN does not name the provrun binary: run the suite with `cargo xtask python`"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def cli_verify(bundle: Path, *extra: str) -> dict[str, Any]:
    """`provrun verify --json BUNDLE`: asserts exit 0 and returns the report; also checks
    that `provrun.verify` gives the same report."""
    out = subprocess.run([provrun_bin(), "verify", "--json", *extra, str(bundle)], capture_output=True, text=True)
    assert out.returncode == 0, f"provrun verify failed ({out.returncode}): {out.stdout}\n{out.stderr}"
    report = json.loads(out.stdout)
    ours = provrun.verify(bundle)
    assert ours.ok == report["ok"] and ours.complete == report["complete"]
    assert [c.code for c in ours.checks] == [c["code"] for c in report["checks"]]
    return report


def check_order(evs: list[dict[str, Any]], *, output_in_stream: bool = True) -> None:
    """The seed's ordering rules and the evidence format's, event by event:

    - ``run_started`` first, then ``input_staged``; ``output_produced`` then
      ``run_finished`` last; ``trace_imported`` after every model and tool event;
    - a call's ``run_call_id`` ``S.N`` names the ``S``th ``model_called``; its event comes
      after that ``model_called``, except an output tool's in a streamed request that
      PydanticAI checks while the stream is open (``run_stream``; ``output_in_stream``),
      which comes before it (and after the request before it); ``run_stream_events`` and
      streaming by ``iter`` check it after the stream, so there it comes after;
    - a completed call that was never deferred comes before the next ``model_called``;
    - a deferred call is written deferred once, before its one completion, with the same
      ``run_call_id``; a provider-run call is ``parsed``, every other call ``observed``.
    """
    assert evs[0]["type"] == "run_started"
    assert evs[-1]["type"] == "run_finished"
    kinds = [e["type"] for e in evs]
    first_other = next(i for i, k in enumerate(kinds) if k != "input_staged" and i > 0)
    assert all(k != "input_staged" for k in kinds[first_other:])
    tail = len(kinds) - 1
    while tail > 0 and kinds[tail - 1] in ("output_produced", "output_skipped"):
        tail -= 1
    assert all(k not in ("output_produced", "run_finished") for k in kinds[:tail])
    if "trace_imported" in kinds:
        t = kinds.index("trace_imported")
        assert all(k not in ("model_called", "tool_called") for k in kinds[t:])
    models = [i for i, k in enumerate(kinds) if k == "model_called"]
    deferred: dict[str, int] = {}
    completed: set[str] = set()
    for i, e in enumerate(evs):
        if e["type"] != "tool_called":
            continue
        p = e["payload"]
        rid = p.get("run_call_id")
        assert rid, f"event {i}: a tool call without run_call_id: {p}"
        step = int(rid.split(".")[0])
        assert 1 <= step <= len(models), f"event {i}: {rid} names no model request"
        at = models[step - 1]
        if p["provider_run"]:
            assert e["confidence"] == "parsed" and ".p" in rid and i > at
            continue
        assert e["confidence"] == "observed", f"event {i}"
        streamed = evs[at]["payload"]["stream"]
        early = p["output_tool"] and streamed and output_in_stream
        if early:
            assert i < at, f"event {i}: a streamed output tool must come before its model_called ({at})"
            assert step == 1 or i > models[step - 2]
        else:
            assert i > at, f"event {i}: {rid} before its model_called ({at})"
        if p["deferred"]:
            assert rid not in deferred and rid not in completed, f"event {i}: {rid} deferred twice or after completing"
            deferred[rid] = i
            continue
        assert rid not in completed, f"event {i}: {rid} completed twice"
        completed.add(rid)
        if rid not in deferred and not early and step < len(models):
            assert i < models[step], f"event {i}: {rid} after the next model request"
    status = of_type(evs, "run_finished")[0]["payload"]["status"]
    pending = set(deferred) - completed
    assert not pending or status == "paused", f"calls never completed: {pending}"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (marked ``anyio``, anyio's pytest plugin) run on asyncio."""
    return "asyncio"


def cli_reads(bundle: Path, tmp: Path) -> None:
    """`provrun show`, `view --out` and `export otlp` (to a loopback OTLP/HTTP receiver)
    accept the bundle, as they do a native one."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    run_id = events(bundle)[0]["run_id"]
    show = subprocess.run([provrun_bin(), "show", str(bundle)], capture_output=True, text=True)
    assert show.returncode == 0, show.stderr
    assert "model_called" in show.stdout or "model" in show.stdout
    page = tmp / "page.html"
    view = subprocess.run([provrun_bin(), "view", str(bundle), "--out", str(page)], capture_output=True, text=True)
    assert view.returncode == 0, view.stderr
    assert run_id in page.read_text()
    posts: list[tuple[str, int]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            body = self.rfile.read(int(self.headers["content-length"]))
            posts.append((self.path, len(body)))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{httpd.server_address[1]}"
        export = subprocess.run(
            [provrun_bin(), "export", "otlp", str(bundle), "--endpoint", endpoint], capture_output=True, text=True
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert export.returncode == 0, export.stderr
    assert posts and all(path == "/v1/traces" and size > 0 for path, size in posts)
