"""provrun.backends.pydantic_ai: evidence for PydanticAI agents.

The agent sees three folders: ``/input`` (the staged inputs, read-only), ``/output``
(what the run hands back) and ``/scratch`` (working space, not part of the bundle).
provrun, not the agent, writes the evidence: one PydanticAI capability,
:func:`evidence_capability`, sees every step of the run:

- each model request, streamed or not, writes ``model_called``: ``observed``, with the
  exact bytes that crossed the provider client's HTTP transport, or ``parsed`` for a model
  with no wire bytes (FunctionModel, TestModel);
- each call of a function tool, from any toolset or capability, writes ``tool_called``;
- a call that waits for approval, or is deferred, writes ``tool_called`` with
  ``deferred`` set, and again when it runs (or is denied, or the caller answers it);
- the output tool writes ``tool_called`` with ``output_tool`` set; in a streamed request
  before the ``model_called`` whose response asked for it, because PydanticAI checks the
  output while the stream is still open;
- each tool the provider ran itself writes ``tool_called`` with ``provider_run`` set and
  confidence ``parsed``.

:class:`PydanticAIBackend` runs an agent spec with its tools from a registry, and after
the run imports the whole message history as one ``trace_imported`` event (``parsed``).
Needs ``pip install 'provrun[pydantic-ai]'``.
"""

from ._backend import TRACE_FORMAT, PydanticAIBackend
from ._capability import EvidenceCapability, evidence_capability

__all__ = ["TRACE_FORMAT", "EvidenceCapability", "PydanticAIBackend", "evidence_capability"]
