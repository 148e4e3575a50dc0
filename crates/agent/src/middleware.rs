//! The evidence capability for code with its own model/tool loop: [`EvidenceModel`]
//! records one `model_called` per request, [`ToolEvidence`] one `tool_called` per call
//! (with its [`CallFlags`] and what decided its result, [`DecidedBy`]), and the names
//! and texts those events carry.

pub use crate::arguments::arguments_value;
pub use crate::capability::{
    CallFlags, DecidedBy, EvidenceModel, OUTPUT_ACCEPTED, TRACE_FORMAT, ToolEvidence,
};
