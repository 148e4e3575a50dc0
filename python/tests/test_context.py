"""RunContext as a caller meets it outside any agent: output files named the way the
sandbox names them, and one version everywhere the package states it."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from conftest import cli_verify, events

import provrun


def test_write_output_takes_sandbox_paths_and_refuses_other_roots(bundle: Path) -> None:
    with provrun.RunContext.create(bundle) as ctx:
        assert ctx.write_output("/output/report.txt", "sandbox path") == 12
        assert ctx.write_output("notes/plain.txt", b"relative") == 8
        for other in ["/input/x.txt", "/scratch/x.txt", "/report.txt", "../escape.txt", "/output/../x"]:
            with pytest.raises(provrun.SandboxError) as refused:
                ctx.write_output(other, "no")
            assert other.split("/")[1] in str(refused.value) or ".." in str(refused.value), str(refused.value)
    assert (bundle / "output/report.txt").read_text() == "sandbox path"
    assert (bundle / "output/notes/plain.txt").read_bytes() == b"relative"
    assert not (bundle / "output/output").exists() and not (bundle / "output/input").exists()
    assert not (bundle.parent / "escape.txt").exists()
    cli_verify(bundle)
    produced = sorted(e["payload"]["path"] for e in events(bundle) if e["type"] == "output_produced")
    assert produced == ["notes/plain.txt", "report.txt"]


def test_the_package_states_one_version(bundle: Path) -> None:
    installed = importlib.metadata.version("provrun")
    assert provrun.__version__ == installed
    with provrun.RunContext.create(bundle) as ctx:
        pass
    del ctx
    started = events(bundle)[0]["payload"]
    assert started["builder"] == f"provrun-python/{installed}"
