"""`python_overhead` (`cargo xtask bench python_overhead`): what a provrun bundle costs a
PydanticAI run, in one process. The same agent (PydanticAI's FunctionModel: two tool calls,
then the answer) runs plain and with a bundle — `RunContext.create`, the evidence
capability given to the run, `finish` — in alternating rounds, so drift and noise fall on
all kinds alike. A bundle is made with the default durability (`at_end`: durable when
`finish` returns, which costs the disk's syncs) and with `flush` (no sync: what the
recording itself costs).

Prints one JSON line: the median and p99 wall time of a run with a bundle, `ratio` (the
median with a bundle over the median without, default durability), `ratio_flush` (the same
with `flush`), `cpu_ratio` (the process's CPU time per run, with a bundle over without),
and `finish_ms` / `finish_flush_ms` (the median `finish`: the syncs are the difference).

    python overhead.py [--runs N] [--dir DIR] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import provrun
from provrun.backends.pydantic_ai import evidence_capability


def turns(messages: list[Any], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="c1"),
                ToolCallPart("lookup", {"key": "paris"}, tool_call_id="c2"),
            ]
        )
    return ModelResponse(parts=[TextPart("Paris has 5 people, and 2 + 3 is 5.")])


AGENT: Agent[None, str] = Agent(FunctionModel(turns))


@AGENT.tool_plain
def add(a: int, b: int) -> int:
    return a + b


@AGENT.tool_plain
def lookup(key: str) -> str:
    return f"{key}: 5 people"


async def plain(_: Path) -> float:
    result = await AGENT.run("How many live in Paris?")
    assert result.output
    return 0.0


def with_bundle(durability: str) -> Any:
    async def run(path: Path) -> float:
        ctx = provrun.RunContext.create(path, agent="bench", model="function", durability=durability)
        result = await AGENT.run("How many live in Paris?", capabilities=[evidence_capability(ctx)])
        began = time.perf_counter()
        ctx.finish()
        assert result.output
        return time.perf_counter() - began

    return run


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def ms(x: float) -> float:
    return round(x * 1000, 3)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="provrun-python-overhead-", dir=args.dir))
    kinds = {"plain": plain, "at_end": with_bundle("at_end"), "flush": with_bundle("flush")}
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    finish: dict[str, list[float]] = {k: [] for k in kinds}
    profiler = cProfile.Profile() if args.profile else None
    try:
        for i in range(10):  # warm up every path
            for name, kind in kinds.items():
                await kind(root / f"warm-{name}-{i}")
        began = time.perf_counter()
        for i in range(args.runs):
            for name, kind in kinds.items():
                if profiler and name == "at_end":
                    profiler.enable()
                c, t = time.process_time(), time.perf_counter()
                f = await kind(root / f"{name}-{i}")
                wall[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
                finish[name].append(f)
                if profiler and name == "at_end":
                    profiler.disable()
        seconds = time.perf_counter() - began
        sample = range(0, args.runs, max(1, args.runs // 10))
        verified = sum(1 for i in sample if provrun.verify(root / f"at_end-{i}") and provrun.verify(root / f"flush-{i}"))
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    median = {k: statistics.median(v) for k, v in wall.items()}
    median_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    kept = wall["at_end"]
    print(
        json.dumps(
            {
                "name": "python_overhead",
                "runs": args.runs,
                "seconds": round(seconds, 4),
                "runs_per_second": round(args.runs / sum(kept), 2),
                "events_per_second": None,
                "p50_ms": ms(median["at_end"]),
                "p99_ms": ms(p99(kept)),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "ratio": round(median["at_end"] / median["plain"], 3),
                "ratio_flush": round(median["flush"] / median["plain"], 3),
                "cpu_ratio": round(median_cpu["at_end"] / median_cpu["plain"], 3),
                "plain_p50_ms": ms(median["plain"]),
                "plain_p99_ms": ms(p99(wall["plain"])),
                "flush_p50_ms": ms(median["flush"]),
                "finish_ms": ms(statistics.median(finish["at_end"])),
                "finish_flush_ms": ms(statistics.median(finish["flush"])),
                "verified_sample": verified,
                "latency": "one run with a bundle, durability at_end (plain_*: without; flush_*: durability flush)",
            },
            separators=(",", ":"),
        )
    )


asyncio.run(main())
