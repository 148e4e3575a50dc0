"""provrun for Python: verifiable evidence for agent runs.

A run writes a bundle: a hash-chained log of every model request and tool call, the
staged inputs, the outputs and a signed-ready in-toto statement, all checked offline by
:func:`verify` (or ``provrun verify``). The recording, hashing, pack store, sandbox and
verification are provrun's Rust core (the extension module ``provrun._core``); this
package adds the tools registry (:mod:`provrun.tools`) and the PydanticAI layer
(:mod:`provrun.backends.pydantic_ai`).

    ctx = provrun.RunContext.create("bundle", inputs=["notes.txt"])
    ...  # an agent with provrun.backends.pydantic_ai.evidence_capability(ctx)
    ctx.finish()
    assert provrun.verify("bundle").ok
"""

from ._context import Finished, Recorder, RunContext
from ._core import VERSION as __version__
from ._core import EvidenceError, SandboxError
from ._sandbox import Sandbox
from ._spec import AgentSpec, RunResult, RunSpec
from ._verify import Check, VerifyReport, verify

__all__ = [
    "AgentSpec",
    "Check",
    "EvidenceError",
    "Finished",
    "Recorder",
    "RunContext",
    "RunResult",
    "RunSpec",
    "Sandbox",
    "SandboxError",
    "VerifyReport",
    "verify",
]
