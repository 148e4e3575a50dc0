"""AgentSpec, RunSpec and RunResult: what a backend runs and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["AgentSpec", "RunResult", "RunSpec"]


@dataclass
class AgentSpec:
    """An agent: its name, the model, its instructions and the tools it may call (by the
    names a :class:`provrun.tools.ToolRegistry` knows them by), as an agent spec file
    declares them for ``provrun run``."""

    name: str = "agent"
    """The agent's name (``run_started.agent`` is the run's own)."""
    instructions: str = ""
    """The system instructions."""
    tools: list[str] = field(default_factory=list)
    """Tool names, found in the backend's registry in this order."""
    model: Any = None
    """The model: a PydanticAI model name (``openai:gpt-4o-mini``) or ``Model``; a
    backend given its own model ignores it."""
    max_steps: int | None = None
    """Model requests at most (``None``: PydanticAI's default limit)."""
    stream: bool = False
    """Use the streamed API."""


@dataclass
class RunSpec:
    """One run of an agent: the prompt. The staged inputs and the run's folders are the
    :class:`provrun.RunContext`'s (``/input``, ``/output``, ``/scratch``)."""

    prompt: str
    """The user prompt."""


@dataclass
class RunResult:
    """What a run handed back: the output as text and its counts."""

    output: str
    """The agent's output, as text (also in ``output/response.txt``)."""
    requests: int
    """Model requests made."""
    input_tokens: int
    """Input tokens, as the model reported them."""
    output_tokens: int
    """Output tokens, as the model reported them."""
    tool_calls: int
    """Tool calls run."""
