//! `run_command` and manifest command tools, end to end through the registry and a real
//! sandbox. Skipped with a loud warning where this machine cannot confine commands (a
//! failure under `CI=true`).

use provrun_sandbox::{Limits, Sandbox};
use provrun_tools::{RunContext, RunDeps, RunInfo, ToolRegistry};

fn ready() -> bool {
    let support = Sandbox::command_support();
    if support.is_complete() {
        return true;
    }
    let why = support.missing_summary();
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("CI must run the command tool tests for real, but this machine lacks: {why}");
    }
    eprintln!(
        "\n**********************************************************************\n\
         **  WARNING: COMMAND TOOL TESTS SKIPPED: this machine lacks: {why}\n\
         **  (build the workspace so target/…/provrun-confine exists, and     **\n\
         **  install bubblewrap)                                             **\n\
         **********************************************************************\n"
    );
    false
}

#[allow(clippy::disallowed_methods)] // the test sets up the host folders the sandbox opens
fn ctx() -> (RunContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["input", "output", "scratch"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    std::fs::write(dir.path().join("input/a.txt"), "one two three\n").unwrap();
    let sandbox = Sandbox::new(
        dir.path().join("input"),
        dir.path().join("output"),
        dir.path().join("scratch"),
        Limits::default(),
    )
    .unwrap();
    let ctx = RunContext::new(RunDeps {
        sandbox,
        run: RunInfo {
            run_id: "run-cmd".to_string(),
            declarer: None,
        },
    });
    (ctx, dir)
}

#[test]
fn run_command_runs_confined_and_reports_the_exit_code() {
    if !ready() {
        return;
    }
    let (ctx, _dir) = ctx();
    let registry = ToolRegistry::linked();
    let out = registry
        .call(
            "run_command",
            r#"{"command": "wc -w < /input/a.txt > /output/n.txt; cat /output/n.txt"}"#,
            Some(&ctx),
        )
        .unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(out.content, "exit code 0\n--- stdout ---\n3\n");
    let written = ctx
        .sandbox()
        .read_file("/output/n.txt", None, None)
        .unwrap();
    assert_eq!(written.content, "3\n");
    let out = registry
        .call(
            "run_command",
            r#"{"command": "echo no > /input/a.txt", "timeout_s": 5}"#,
            Some(&ctx),
        )
        .unwrap();
    assert!(!out.ok, "{out:?}");
    assert!(out.content.starts_with("exit code "), "{out:?}");
    assert!(out.content.contains("Read-only file system"), "{out:?}");
    let out = registry
        .call(
            "run_command",
            r#"{"command": "sleep 30", "timeout_s": 1}"#,
            Some(&ctx),
        )
        .unwrap();
    assert!(!out.ok && out.content.contains("timed out"), "{out:?}");
}

#[test]
#[allow(clippy::disallowed_methods)] // writes the test's own manifest
fn manifest_command_tools_get_json_on_stdin_and_return_stdout() {
    if !ready() {
        return;
    }
    let (ctx, _dir) = ctx();
    let tools = tempfile::tempdir().unwrap();
    std::fs::write(
        tools.path().join("t.toml"),
        r#"
        [[tools]]
        name = "echo_args"
        description = "Echo the arguments."
        command = ["sh", "-c", "cat; ls /input"]

        [[tools]]
        name = "failing"
        description = "Fails."
        command = ["sh", "-c", "echo bad >&2; exit 4"]

        [[tools]]
        name = "env_leak"
        description = "Shows its environment."
        command = ["env"]
        "#,
    )
    .unwrap();
    let mut registry = ToolRegistry::empty();
    registry.load_folder(tools.path()).unwrap();
    let out = registry
        .call("echo_args", r#"{"text": "a b"}"#, Some(&ctx))
        .unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(out.content, "{\"text\":\"a b\"}\na.txt\n");
    let out = registry.call("failing", "{}", Some(&ctx)).unwrap();
    assert!(!out.ok);
    assert!(
        out.content.starts_with("exit code 4") && out.content.contains("bad"),
        "{out:?}"
    );
    let out = registry.call("env_leak", "{}", Some(&ctx)).unwrap();
    let mut names: Vec<&str> = out
        .content
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    names.sort();
    assert_eq!(names, ["HOME", "LANG", "PATH", "PWD", "TMPDIR"], "{out:?}");
}
