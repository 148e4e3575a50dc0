"""provrun.tools: the tools agents call, and where they are found.

A tool is a function in the PydanticAI form: an async (or plain) function whose first
argument is ``RunContext[RunDeps]`` (PydanticAI's run context, whose ``deps`` are a
:class:`RunDeps`). Each tool has an execution mode, one of :data:`TOOL_MODES`; only
``in_process`` runs now: ``client_round_trip`` is for tools the caller runs when asked,
``remote_mcp`` for tools that run elsewhere and are imported into the evidence.

A :class:`ToolRegistry` finds tools in two places: the entry point group
``provrun.tools`` (one function per entry, named by the entry), and tools folders, in
which each module lists its tools in ``TOOLS``. The PydanticAI backend records every tool
through its evidence capability, so each call writes ``tool_called``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._context import RunContext as ProvrunContext
    from ._sandbox import Sandbox

__all__ = ["ENTRY_POINT_GROUP", "TOOL_MODES", "RunDeps", "Tool", "ToolRegistry"]

TOOL_MODES: tuple[str, ...] = ("in_process", "client_round_trip", "remote_mcp")
"""The execution modes a tool may have; only ``in_process`` runs now."""

ENTRY_POINT_GROUP = "provrun.tools"
"""The entry point group the registry loads: each entry is one tool function, named by
the entry's name."""


@dataclass
class RunDeps:
    """What a tool gets through ``ctx.deps``: the sandbox and the run."""

    sandbox: Sandbox
    """The agent's filesystem sandbox, over ``/input``, ``/output`` and ``/scratch``."""
    run: ProvrunContext
    """The provrun run context; a tool writes evidence through ``run.recorder``."""


@dataclass
class Tool:
    """One tool: the name an agent spec gives it, its function and its execution mode."""

    name: str
    """The name in an agent spec's ``tools``."""
    fn: Callable[..., Any]
    """The function, in the PydanticAI form."""
    mode: str = "in_process"
    """One of :data:`TOOL_MODES`; only ``in_process`` runs now."""


class ToolRegistry:
    """The tools that agents can call, by name.

    Made with the tools of every ``provrun.tools`` entry point, then of each folder in
    ``folders`` (a later tool of the same name replaces an earlier one).
    """

    def __init__(self, folders: list[Path] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._load_entry_points()
        for folder in folders or []:
            self.load_folder(folder)

    def _load_entry_points(self) -> None:
        for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            try:
                loaded = entry.load()
            except Exception as e:  # a broken package names itself, it does not vanish
                raise ValueError(
                    f"the {ENTRY_POINT_GROUP} entry point {entry.name!r} ({entry.value}) cannot be loaded: {e}"
                ) from e
            self.add(_as_tool(loaded, f"entry point {entry.name!r}", name=entry.name))

    def add(self, tool: Tool) -> None:
        """Add one tool; one with the same name is replaced. Raises ``ValueError`` for a
        mode not in :data:`TOOL_MODES`."""
        if tool.mode not in TOOL_MODES:
            raise ValueError(
                f"tool {tool.name!r} has mode {tool.mode!r}, which is not one of {', '.join(TOOL_MODES)}"
            )
        if not callable(tool.fn):
            raise ValueError(f"tool {tool.name!r}: its fn {tool.fn!r} is not callable")
        self._tools[tool.name] = tool

    def load_folder(self, folder: Path) -> None:
        """Import each module in ``folder`` and add the tools in its ``TOOLS`` list.

        A module is a ``NAME.py`` file or a package folder; one whose name starts with
        ``_`` is skipped. Raises ``ValueError`` for a module with no ``TOOLS``, or whose
        ``TOOLS`` holds something that is neither a function nor a :class:`Tool`.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise ValueError(f"the tools folder {str(folder)!r} is not a folder")
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if path.name.startswith("_") or path.name.startswith("."):
                continue
            if path.is_file() and path.suffix == ".py":
                name, location = path.stem, path
            elif path.is_dir() and (path / "__init__.py").is_file():
                name, location = path.name, path / "__init__.py"
            else:
                continue
            module = _import(folder, name, location)
            listed = getattr(module, "TOOLS", None)
            if listed is None:
                raise ValueError(
                    f"module {name!r} in the tools folder {str(folder)!r} has no TOOLS list: "
                    "list its tools in TOOLS, or start its name with `_` to skip it"
                )
            if isinstance(listed, (str, bytes)) or not hasattr(listed, "__iter__"):
                raise ValueError(f"TOOLS in module {name!r} of {str(folder)!r} is not a list")
            for item in listed:
                self.add(_as_tool(item, f"TOOLS in module {name!r} of {str(folder)!r}"))

    def get(self, names: list[str]) -> list[Tool]:
        """Find tools by name, in the order named. Raises ``ValueError`` for a name that is
        not here (naming every missing one, and what is here)."""
        if isinstance(names, str):
            raise ValueError("give a list of tool names, not one string")
        missing = [n for n in names if n not in self._tools]
        if missing:
            known = ", ".join(sorted(self._tools)) or "none"
            raise ValueError(
                f"no tool named {', '.join(repr(n) for n in missing)} in the registry (it has: {known}); "
                f"add it with ToolRegistry.add, a tools folder module's TOOLS, or a {ENTRY_POINT_GROUP} entry point"
            )
        return [self._tools[n] for n in names]

    @property
    def names(self) -> list[str]:
        """Every tool's name, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter([self._tools[n] for n in self.names])

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names!r})"


def _as_tool(item: Any, where: str, *, name: str | None = None) -> Tool:
    """A :class:`Tool` from a ``TOOLS`` item or an entry point's object."""
    if isinstance(item, Tool):
        return item if name is None or item.name == name else Tool(name, item.fn, item.mode)
    if callable(item):
        fn_name = getattr(item, "__name__", None)
        if name is None and not fn_name:
            raise ValueError(f"{where}: {item!r} has no __name__; wrap it in Tool(name, fn)")
        return Tool(name or fn_name, item)
    raise ValueError(f"{where}: {item!r} is neither a function nor a provrun.tools.Tool")


def _import(folder: Path, name: str, location: Path) -> ModuleType:
    """Import the module ``name`` of a tools folder under a name of its own, so folders
    with modules of the same name do not clash and ``sys.path`` is left alone."""
    digest = hashlib.sha256(os.fsencode(folder.resolve())).hexdigest()[:12]
    qualified = f"_provrun_tools_{digest}.{name}"
    parent = f"_provrun_tools_{digest}"
    if parent not in sys.modules:
        package = ModuleType(parent)
        package.__path__ = [str(folder)]
        sys.modules[parent] = package
    spec = importlib.util.spec_from_file_location(
        qualified,
        location,
        submodule_search_locations=[str(location.parent)] if location.name == "__init__.py" else None,
    )
    if spec is None or spec.loader is None:
        raise ValueError(f"module {name!r} in {str(folder)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[qualified]
        raise
    return module
