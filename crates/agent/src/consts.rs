//! The runtime's fixed names and limits: what runs record as their builder, the tools it
//! adds itself, how much of a tool result it keeps, and how long a cancelled call is
//! given.

pub use crate::backend::{BUILDER, CANCEL_GRACE, MAX_TOOL_RESULT_BYTES};
pub use crate::output::OUTPUT_TOOL;
pub use crate::skills::USE_SKILL_TOOL;
