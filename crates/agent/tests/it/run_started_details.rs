//! What `run_started` records about the command sandbox: the probed confinement for an
//! agent that may run programs, `null` (and no probe) for one that cannot.

use provrun_agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun_evidence::{EventType, read_events};
use provrun_tools::ToolRegistry;

async fn confinement_recorded(tools: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let mut agent = AgentSpec::new("details", "test");
    agent.tools = tools.iter().map(|t| t.to_string()).collect();
    // The test model calls every tool once; no tool call needs to succeed here.
    let result = Backend::new()
        .with_registry(ToolRegistry::linked())
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    let events = read_events(&bundle).unwrap();
    assert_eq!(events[0].kind, EventType::RunStarted);
    events[0].payload["details"]["sandbox"]["command_confinement"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_command_tools_records_no_confinement() {
    let recorded = confinement_recorded(&["read_file", "list_dir"]).await;
    assert!(recorded.is_null(), "{recorded}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_run_command_records_the_probed_confinement() {
    let recorded = confinement_recorded(&["run_command"]).await;
    assert!(recorded["layers"].is_object(), "{recorded}");
    assert!(recorded["degraded"].is_array(), "{recorded}");
}
