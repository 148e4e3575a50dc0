"""verify: provrun's offline check of a bundle, as Python objects."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from . import _core

__all__ = ["Check", "VerifyReport", "verify"]


@dataclass(frozen=True)
class Check:
    """One check of a bundle: its stable ``code`` (``layout``, ``parse``, ``chain``,
    ``sequence``, ``blobs``, ``pack``, ``inputs``, ``outputs``, ``statement``,
    ``tool-calls``, ``signature``), its ``status`` (``pass``, ``fail``, ``warn``) and what
    it found."""

    code: str
    status: str
    detail: str


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` found: the same report as ``provrun verify --json``."""

    ok: bool
    """No check failed: nothing was tampered with or corrupted."""
    complete: bool
    """The run reached its end (``run_finished``) and ``statement.json`` exists."""
    status: str | None
    """The last ``run_finished`` status, when the log has one."""
    checks: list[Check]
    """Every check, in the report's order."""

    def check(self, code: str) -> Check | None:
        """The check with ``code``, if it ran."""
        return next((c for c in self.checks if c.code == code), None)

    @property
    def failures(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if c.status == "fail"]

    def __bool__(self) -> bool:
        """True when the bundle is whole and untouched: ``ok and complete``."""
        return self.ok and self.complete


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Check the bundle folder ``path`` offline, as ``provrun verify`` does: the layout,
    every line's canonical form, the hash chain, the sequence, every blob and the pack,
    inputs and outputs against their events, the statement, and that every waiting tool
    call was completed. Never raises for a bad bundle: the report says what is wrong."""
    report = json.loads(_core.verify(os.fspath(path)))
    return VerifyReport(
        ok=report["ok"],
        complete=report["complete"],
        status=report.get("status"),
        checks=[Check(c["code"], c["status"], c["detail"]) for c in report["checks"]],
    )
