//! When provrun runs as root, a command's files are never root's on the host: commands run
//! as the dedicated uid/gid of `[limits]` (`command_uid`/`command_gid`, 65536 by default),
//! `run_started.details.sandbox.command_user` says which, `command_uid = 0` opts out (on
//! record), and where bubblewrap cannot run as that user the command is refused, never
//! run as root.
//!
//! These tests need bubblewrap: without it they are skipped with a loud warning, except
//! under `CI=true`, where that is a failure. Run as another user than root, they check that
//! nothing changes (commands run as provrun's own uid, `mode = "runtime"`).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::cli::events;
use serde_json::{Value, json};

fn bwrap_ready() -> bool {
    let found = ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join("bwrap").is_file());
    if found {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("CI must run the command-user tests for real, but bubblewrap is not installed");
    }
    eprintln!(
        "\n\
         ************************************************************************\n\
         **  WARNING: COMMAND USER TESTS SKIPPED: bubblewrap is not installed  **\n\
         **  (apt-get install bubblewrap); CI=true makes this a failure        **\n\
         ************************************************************************\n"
    );
    false
}

fn my_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn my_gid() -> u32 {
    let out = Command::new("id").arg("-g").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Runs an agent that calls `run_command` with `command` and then answers; `limits` is
/// the `[limits]` table's text; `wrapper` runs provrun under another program.
fn run(dir: &Path, command: &str, limits: &str, wrapper: &[&str]) -> (Output, PathBuf) {
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "name = \"user\"\nmodel = \"script:script.json\"\ntools = [\"run_command\", \"write_file\"]\n\
             allow_degraded_sandbox = true\n[limits]\n{limits}\n"
        ),
    )
    .unwrap();
    let script = json!([
        {"tool_calls": [
            {"id": "w", "name": "write_file", "arguments": {"path": "/output/tool.txt", "content": "tool\n"}},
        ]},
        {"tool_calls": [
            {"id": "c", "name": "run_command", "arguments": {"command": command}},
        ]},
        {"text": "done"}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let bundle = dir.join("bundle");
    let provrun = env!("CARGO_BIN_EXE_provrun");
    let mut argv: Vec<&str> = wrapper.to_vec();
    argv.push(provrun);
    let agent = dir.join("agent.toml").display().to_string();
    let out_arg = bundle.display().to_string();
    argv.extend(["run", &agent, "--out", &out_arg]);
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out, bundle)
}

fn command_call(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_called" && e["payload"]["call_id"] == "c")
        .unwrap()["payload"]
        .clone()
}

fn verifies(bundle: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(["verify", &bundle.display().to_string()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn owner(p: &Path) -> (u32, u32) {
    let md = std::fs::symlink_metadata(p).unwrap();
    (md.uid(), md.gid())
}

#[test]
fn as_root_a_commands_files_belong_to_the_dedicated_user_and_run_started_says_so() {
    if !bwrap_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run(
        dir.path(),
        "id -u > /output/made.txt && mkdir /output/d && echo x > /output/d/f && echo more >> /output/tool.txt",
        "",
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = my_uid() == 0;
    let (uid, gid) = if root {
        (65536, 65536)
    } else {
        (my_uid(), my_gid())
    };
    let ev = events(&bundle);
    let user = &ev[0]["payload"]["details"]["sandbox"]["command_user"];
    assert_eq!(
        *user,
        json!({
            "mode": if root { "dedicated" } else { "runtime" },
            "uid": uid,
            "gid": gid,
            "runtime_uid": my_uid(),
        })
    );
    let call = command_call(&ev);
    assert_eq!(call["ok"], true, "{call}");
    assert_eq!(call["confinement"]["host_uid"], uid, "{call}");
    assert_eq!(call["confinement"]["host_gid"], gid, "{call}");
    let output = bundle.join("output");
    assert_eq!(
        std::fs::read_to_string(output.join("made.txt")).unwrap(),
        "1000\n"
    );
    // What the file tool wrote first, the command could append to.
    assert_eq!(
        std::fs::read_to_string(output.join("tool.txt")).unwrap(),
        "tool\nmore\n"
    );
    for p in ["made.txt", "d", "d/f", "tool.txt"] {
        assert_eq!(owner(&output.join(p)), (uid, gid), "{p}");
        if root {
            assert_ne!(owner(&output.join(p)).0, 0, "{p} is root's on the host");
        }
    }
    // The outputs were recorded and the bundle verifies.
    let produced: Vec<&str> = ev
        .iter()
        .filter(|e| e["type"] == "output_produced")
        .filter_map(|e| e["payload"]["path"].as_str())
        .collect();
    for p in ["made.txt", "d/f", "tool.txt"] {
        assert!(produced.iter().any(|q| q.ends_with(p)), "{p}: {produced:?}");
    }
    verifies(&bundle);
}

#[test]
fn command_uid_zero_opts_out_on_record_and_another_uid_is_used_as_given() {
    if !bwrap_ready() {
        return;
    }
    if my_uid() != 0 {
        eprintln!("\n** NOTE: not root: provrun cannot choose the command user; skipped **\n");
        return;
    }
    for (uid, gid, mode) in [(0u32, 0u32, "root"), (4242, 4343, "dedicated")] {
        let dir = tempfile::tempdir().unwrap();
        let (out, bundle) = run(
            dir.path(),
            "echo x > /output/made.txt",
            &format!("command_uid = {uid}\ncommand_gid = {gid}"),
            &[],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ev = events(&bundle);
        let user = &ev[0]["payload"]["details"]["sandbox"]["command_user"];
        assert_eq!(
            *user,
            json!({"mode": mode, "uid": uid, "gid": gid, "runtime_uid": 0})
        );
        assert_eq!(owner(&bundle.join("output/made.txt")), (uid, gid));
        assert_eq!(command_call(&ev)["confinement"]["host_uid"], uid);
        verifies(&bundle);
    }
}

#[test]
fn as_root_a_command_bubblewrap_cannot_run_as_the_user_is_refused_never_run_as_root() {
    if !bwrap_ready() {
        return;
    }
    if my_uid() != 0 {
        eprintln!("\n** NOTE: not root: no user to drop to; skipped **\n");
        return;
    }
    // RLIMIT_NPROC = 0 binds every uid but root: provrun (root) runs, bubblewrap started
    // as the command user cannot.
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run(
        dir.path(),
        "echo x > /output/made.txt",
        "",
        &["prlimit", "--nproc=0:0"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let call = command_call(&events(&bundle));
    assert_eq!(call["ok"], false, "{call}");
    let text = call["result"].to_string();
    assert!(
        text.contains("commands run as uid 65536 (gid 65536) when provrun runs as root")
            && text.contains("command_uid = 0"),
        "{text}"
    );
    // Nothing ran: no file, as root or otherwise; and no host path reaches the model.
    assert!(!bundle.join("output/made.txt").exists());
    assert!(!text.contains(&dir.path().display().to_string()), "{text}");
    verifies(&bundle);
}

/// Whether `unshare --user --map-root-user` works here (a user namespace that maps only
/// this process's uid, as root); skipped loudly when not, a failure under CI.
fn unshare_ready() -> bool {
    let ok = Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must run the unmapped-user test, but `unshare --user --map-root-user` fails"
        );
        eprintln!("\n** WARNING: `unshare --user --map-root-user` fails here; test skipped **\n");
    }
    ok
}

#[test]
fn as_root_in_a_namespace_without_the_command_uid_commands_are_refused_naming_the_opt_out() {
    if !bwrap_ready() || !unshare_ready() {
        return;
    }
    let unshared = ["unshare", "--user", "--map-root-user"];
    // provrun is root in a user namespace that maps one uid (its own, as 0): the command
    // user 65536 does not exist there. The command is refused with the command-user
    // error and its opt-out, degraded mode or not, never with a chown's EINVAL.
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run(dir.path(), "echo x > /output/made.txt", "", &unshared);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let call = command_call(&events(&bundle));
    assert_eq!(call["ok"], false, "{call}");
    let text = call["result"].as_str().unwrap();
    assert!(
        text.contains("commands run as uid 65536 (gid 65536) when provrun runs as root")
            && text.contains("uid 65536 is not mapped in provrun's user namespace")
            && text.contains("command_uid = 0"),
        "{text}"
    );
    assert!(!text.contains("Invalid argument"), "{text}");
    assert!(!bundle.join("output/made.txt").exists());
    verifies(&bundle);

    // `provrun doctor` says the same, with the fix, and exits 1.
    let out = Command::new("unshare")
        .args(&unshared[1..])
        .args([env!("CARGO_BIN_EXE_provrun"), "doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let user = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "command_user")
        .unwrap()
        .clone();
    assert_eq!(user["status"], "missing", "{user}");
    assert!(
        user["detail"].as_str().unwrap().contains("not mapped"),
        "{user}"
    );
    assert!(
        user["fix"].as_str().unwrap().contains("command_uid = 0"),
        "{user}"
    );

    // The opt-out, on record: the command runs (as the namespace's root).
    let dir = tempfile::tempdir().unwrap();
    let (out, bundle) = run(
        dir.path(),
        "echo x > /output/made.txt",
        "command_uid = 0\ncommand_gid = 0",
        &unshared,
    );
    assert_eq!(out.status.code(), Some(0));
    let call = command_call(&events(&bundle));
    assert_eq!(call["ok"], true, "{call}");
    assert!(bundle.join("output/made.txt").is_file());
    verifies(&bundle);
}
