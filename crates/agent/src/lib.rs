//! Runs a provrun agent in its sandbox and leaves a complete, verifiable bundle.
//!
//! `provrun-agent` wires the model, the tools, the sandbox and the evidence recorder into
//! one call. It is a placeholder until the agent issue lands.
