//! An integration-test file is a crate of its own: this one never names
//! `provrun_downstream`, so the linker drops it and its `#[tool]`s are missing. The error a
//! user then sees must lead to the fix. (`linked.rs` is the same run with the fix.)
//!
//! Do not name `provrun_downstream` here: that would hide the pitfall this test shows.
//!
//! A test binary of its own, not a module of `tests/it`: the modules there name
//! `provrun_downstream`, which would link its tools into this test too.

use provrun::agent::{AgentSpec, RunControl, RunSpec, execute};

#[tokio::test(flavor = "current_thread")]
async fn a_spec_naming_an_unlinked_tool_fails_with_the_fix_in_the_message() {
    let agent = AgentSpec::from_toml_str(
        "name = \"counter\"\nmodel = \"test\"\ntools = [\"word_count\"]\n",
        None,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = RunSpec::new("count", dir.path().join("bundle"));
    let err = execute(&RunControl::new(), &agent, &run)
        .await
        .expect_err("word_count is not linked into this test");
    let message = err.to_string();
    assert!(message.contains("unknown tool `word_count`"), "{message}");
    assert!(message.contains("use my_tools as _;"), "{message}");
    assert!(message.contains("integration-test file"), "{message}");
}
