"""Sandbox: the files a run's tools see, through provrun's Rust sandbox."""

from __future__ import annotations

import json
from typing import Any

from . import _core

__all__ = ["Sandbox"]


class Sandbox:
    """The agent's file sandbox over ``/input``, ``/output`` and ``/scratch``.

    ``/input`` holds the staged inputs and is read-only; ``/output`` is what the run
    hands back (recorded in the bundle when the run finishes); ``/scratch`` is working
    space, never part of the bundle. Paths are the model's: absolute under one of the three
    roots, or relative (resolved under ``/scratch``). Every path is hostile input to the
    Rust sandbox: resolved one name at a time, never through a link, never out of its root,
    within the run's size and quota limits. A refused request raises
    :class:`provrun.SandboxError`, whose message names the path and the rule.

    Results are the same objects the built-in tools of ``provrun run`` give a model.
    """

    def __init__(self, inner: _core.Sandbox) -> None:
        self._inner = inner

    def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> dict[str, Any]:
        """One page of a file as text: ``content``, ``offset``, ``bytes``, ``total_size``,
        ``truncated`` and ``next_offset`` (read on from there), ``note``; a page that is
        not UTF-8 is ``binary`` and described by its ``sha256`` instead of shown."""
        return json.loads(self._inner.read_file(path, offset, limit))

    def read_text(self, path: str) -> str:
        """A whole text file, read page by page. Raises :class:`provrun.SandboxError` for
        a file that is not UTF-8 text."""
        parts: list[str] = []
        offset: int | None = None
        while True:
            page = self.read_file(path, offset)
            if page["binary"]:
                raise _core.SandboxError(f"file `{page['path']}` is binary, not text: {page.get('note')}")
            parts.append(page["content"])
            if not page["truncated"]:
                return "".join(parts)
            offset = page["next_offset"]

    def write_file(self, path: str, content: str | bytes) -> dict[str, Any]:
        """Write a whole file under ``/output`` or ``/scratch`` (never ``/input``):
        ``path``, ``bytes``, ``created``, ``replaced_bytes``."""
        data = content.encode() if isinstance(content, str) else bytes(content)
        return json.loads(self._inner.write_file(path, data))

    def str_replace(self, path: str, old: str, new: str) -> dict[str, Any]:
        """Replace the one occurrence of ``old`` with ``new`` in a text file: ``path``,
        ``line``, ``bytes``."""
        return json.loads(self._inner.str_replace(path, old, new))

    def list_dir(self, path: str = "/") -> dict[str, Any]:
        """A folder's entries (``name``, ``kind``, ``size``), sorted; ``/`` lists the
        three roots."""
        return json.loads(self._inner.list_dir(path))

    @property
    def limits(self) -> dict[str, Any]:
        """The limits in force (the ``[limits]`` keys of an agent spec)."""
        return json.loads(self._inner.limits)
