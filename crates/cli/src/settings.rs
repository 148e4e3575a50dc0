//! `--set KEY=VALUE` on `run` and `batch`: one of an agent spec's `[settings]` changed for
//! the runs of one command (see `provrun_agent::SettingsSpec::set`).

use provrun_agent::AgentSpec;

/// One `--set` argument as (KEY, VALUE); the value is read later, as TOML.
pub(crate) fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err("expected KEY=VALUE (e.g. temperature=0.2)".to_string()),
    }
}

/// Applies `--set KEY=VALUE` overrides to `agent`'s `[settings]` (the evidence then keeps
/// the spec as it ran, not the file's text) and checks them for its model. The error is a
/// usage error's message.
pub(crate) fn apply_settings(
    agent: &mut AgentSpec,
    set: &[(String, String)],
) -> Result<(), String> {
    if set.is_empty() {
        return Ok(());
    }
    for (key, value) in set {
        agent
            .settings
            .set(key, value)
            .map_err(|e| format!("--set {e}"))?;
    }
    agent.source = None;
    agent
        .check_settings_for(&agent.model)
        .map_err(|e| format!("--set: {e}"))
}
