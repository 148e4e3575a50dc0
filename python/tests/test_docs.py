"""docs/python.md's example runs as written, and its bundles verify with the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, check_order, cli_verify, events


def test_the_example_in_docs_python_md_runs(tmp_path: Path) -> None:
    text = (ROOT / "docs/python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/python.md has one example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "The notes have 3 lines."
    assert lines[1] == "lines=3"
    assert lines[2].startswith("bundle finished") and lines[3].startswith("bundle2 finished")
    for name in ("bundle", "bundle2"):
        cli_verify(tmp_path / name)
        check_order(events(tmp_path / name))
    assert (tmp_path / "bundle/output/response.txt").read_text() == "The notes have 3 lines."
