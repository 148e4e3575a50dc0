//! The fix for the linker pitfall, as a user writes it in an integration-test file: one
//! line names the tools crate, and an agent spec finds its tools by name.

use provrun::agent::{AgentSpec, RunControl, RunSpec, RunStatus, execute};
use provrun_downstream as _;

#[tokio::test(flavor = "current_thread")]
async fn a_spec_finds_the_tools_of_a_named_crate() {
    let agent = AgentSpec::from_toml_str(
        "name = \"counter\"\nmodel = \"test\"\ntools = [\"word_count\"]\n",
        None,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let result = execute(&RunControl::new(), &agent, &RunSpec::new("count", &bundle))
        .await
        .expect("the run starts");
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    let report = provrun::evidence::verify(&bundle);
    assert!(report.ok && report.complete);
    assert_eq!(report.status, Some(provrun::evidence::RunStatus::Finished));
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    assert!(log.contains("\"tool_called\"") && log.contains("word_count"));
}
