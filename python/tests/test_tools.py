"""provrun.tools: Tool, TOOL_MODES, ToolRegistry (add, load_folder, get, entry points) and
RunDeps with the Rust sandbox, with the seed's errors for bad input."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from conftest import cli_verify, events

import provrun
from provrun.tools import TOOL_MODES, RunDeps, Tool, ToolRegistry


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_modes_are_the_seeds_and_add_refuses_another() -> None:
    assert TOOL_MODES == ("in_process", "client_round_trip", "remote_mcp")
    registry = ToolRegistry()
    registry.add(Tool("a", lambda: 1))
    registry.add(Tool("b", lambda: 2, "remote_mcp"))
    with pytest.raises(ValueError, match="mode 'sideways'"):
        registry.add(Tool("c", lambda: 3, "sideways"))
    assert "c" not in registry
    # One with the same name is replaced.
    registry.add(Tool("a", len))
    assert registry.get(["a"])[0].fn is len


def test_load_folder_skips_underscore_modules_and_get_keeps_the_order_named(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    write(folder / "files.py", """
        from provrun.tools import Tool
        async def count_lines(ctx, path: str) -> int:
            return 0
        def shout(text: str) -> str:
            return text.upper()
        TOOLS = [count_lines, Tool("yell", shout, "client_round_trip")]
    """)
    write(folder / "_private.py", "raise RuntimeError('a module starting with _ is never imported')\n")
    write(folder / "pkg" / "__init__.py", "def packaged():\n    return 1\nTOOLS = [packaged]\n")
    registry = ToolRegistry([folder])
    assert registry.names == ["count_lines", "packaged", "yell"]
    got = registry.get(["yell", "count_lines"])
    assert [t.name for t in got] == ["yell", "count_lines"]
    assert [t.mode for t in got] == ["client_round_trip", "in_process"]


def test_a_module_without_tools_is_a_value_error(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    write(folder / "helpers.py", "def not_listed():\n    pass\n")
    with pytest.raises(ValueError, match="module 'helpers' .* has no TOOLS"):
        ToolRegistry().load_folder(folder)


def test_a_missing_tool_name_is_a_value_error() -> None:
    registry = ToolRegistry()
    registry.add(Tool("present", lambda: 1))
    with pytest.raises(ValueError, match="no tool named 'absent'"):
        registry.get(["present", "absent"])


def test_entry_points_of_the_group_are_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed distribution (a dist-info folder on sys.path) with a provrun.tools
    # entry point, found by importlib.metadata as pip would leave it.
    site = tmp_path / "site"
    write(site / "weather_tools.py", "async def forecast(ctx, city: str) -> str:\n    return 'sunny in ' + city\n")
    dist = site / "weather_tools-1.0.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: weather-tools\nVersion: 1.0\n")
    write(dist / "entry_points.txt", "[provrun.tools]\nweather = weather_tools:forecast\n")
    monkeypatch.syspath_prepend(str(site))
    registry = ToolRegistry()
    (tool,) = registry.get(["weather"])
    assert tool.name == "weather" and tool.fn.__name__ == "forecast" and tool.mode == "in_process"
    sys.modules.pop("weather_tools", None)


def test_run_deps_give_tools_the_rust_sandbox_and_its_path_rules(tmp_path: Path, bundle: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("line one\nline two\n")
    with provrun.RunContext.create(bundle, inputs=[notes]) as ctx:
        deps = RunDeps(sandbox=ctx.sandbox, run=ctx)
        assert deps.sandbox.read_text("/input/notes.txt") == "line one\nline two\n"
        assert deps.sandbox.write_file("/output/out.txt", "done")["bytes"] == 4
        with pytest.raises(provrun.SandboxError, match="notes|input|read-only"):
            deps.sandbox.write_file("/input/notes.txt", "changed")
        for outside in ("/etc/passwd", "/input/../../etc/passwd", "../../outside.txt"):
            with pytest.raises(provrun.SandboxError):
                deps.sandbox.read_file(outside)
        with pytest.raises(provrun.SandboxError):
            deps.sandbox.write_file("/output/../../escape.txt", "x")
        assert not (tmp_path / "escape.txt").exists()
        assert sorted(e["name"] for e in deps.sandbox.list_dir("/")["entries"]) == ["input", "output", "scratch"]
        deps.run.recorder.declare("note", {"checked": True})
    assert (bundle / "output" / "out.txt").read_text() == "done"
    report = provrun.verify(bundle)
    assert report and report.status == "finished"
    assert cli_verify(bundle)["status"] == "finished"
    declared = [e for e in events(bundle) if e["type"] == "declared"]
    assert [e["payload"]["data"] for e in declared] == [{"checked": True}]
