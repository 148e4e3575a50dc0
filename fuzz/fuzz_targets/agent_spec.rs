//! Fuzz target: `AgentSpec::from_toml_str` over arbitrary text. Any text ends as a spec
//! that validates or as a one-line error, never as a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use provrun_agent::AgentSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match AgentSpec::from_toml_str(text, Some(std::path::Path::new("fuzz/agent.toml"))) {
        Ok(spec) => {
            spec.validate("fuzz").expect("a loaded spec validates");
            assert_eq!(spec.source_text(), text);
            assert_eq!(spec.digest().len(), 64);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains('\n'), "a multi-line error: {message}");
        }
    }
});
