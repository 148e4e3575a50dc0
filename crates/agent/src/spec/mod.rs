//! What a user asks for: [`AgentSpec`] (the agent) and [`RunSpec`] (one run of it), and
//! what they get back: [`RunResult`].
//!
//! In order, each using only those before it: `approve` (the spec's [`ApprovePolicy`]),
//! `settings` (its `[settings]` table: [`SettingsSpec`]), `agent` (the agent spec TOML:
//! [`AgentSpec`], [`ModelRef`]), `run` (the run request:
//! [`RunSpec`], [`ResumeSpec`]) and `result` (a run's result: [`RunResult`],
//! [`RunOutcome`], [`RunUsage`], the waiting calls and the decisions on them).

mod agent;
mod approve;
mod result;
mod run;
mod settings;

pub use agent::{AgentSpec, ModelRef};
pub use approve::ApprovePolicy;
pub use result::{Decision, DeferReason, DeferredCall, RunOutcome, RunResult, RunUsage};
pub(crate) use result::{denial_message, denial_text};
pub use run::{Continuation, ResumeSpec, RunSpec};
pub use settings::{SettingsSpec, ToolChoiceMode, ToolChoiceSpec};
