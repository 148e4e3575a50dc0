//! Reading a finished or paused bundle back: the agent spec it ran, its recorded model
//! responses (and a model that answers with them), the calls a paused run waits on, its
//! message history (where a conversation's next turn starts), and
//! the recorded MCP servers' answers that a replay gives instead of reaching them.
//!
//! ```no_run
//! # fn demo() -> Result<(), provrun_agent::AgentError> {
//! let bundle = std::path::Path::new("/tmp/bundle");
//! for call in provrun_agent::read::waiting_calls(bundle)? {
//!     println!("{} waits: {}", call.run_call_id, call.name);
//! }
//! # Ok(()) }
//! ```

pub use crate::recorded::{
    recorded_agent, recorded_messages, recorded_responses, replay_model, waiting_calls,
};
pub use crate::remote::RecordedMcp;
