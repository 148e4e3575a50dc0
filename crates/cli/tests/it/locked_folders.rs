//! A hostile command that locks folders (`chmod 000`) under /output, with provrun running
//! as a user other than root (the test drops to uid 65534 with `setpriv` when it runs as
//! root): later commands and file tools still work, the quota still counts what a locked
//! folder holds, and the outputs are collected into a bundle that verifies.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::cli::{events, s};
use serde_json::{Value, json};

/// The uid and gid the test runs provrun as when it is root.
const NOBODY: u32 = 65534;

fn my_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// `provrun ARGS` as a user other than root, with TMPDIR and HOME in `dir` (which that
/// user then owns).
fn provrun_unprivileged(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = if my_uid() == 0 {
        // A copy of the binary in `dir`: the checkout may sit where that user cannot go.
        let binary = dir.join("provrun");
        if !binary.exists() {
            std::fs::copy(env!("CARGO_BIN_EXE_provrun"), &binary).unwrap();
            std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let owner = format!("{NOBODY}:{NOBODY}");
        let chowned = Command::new("chown")
            .args(["-R", &owner, &s(dir)])
            .status()
            .unwrap();
        assert!(chowned.success());
        let mut c = Command::new("setpriv");
        c.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ]);
        c.arg(&binary);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_provrun"))
    };
    cmd.args(args)
        .env("TMPDIR", dir)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn call<'a>(log: &'a [Value], id: &str) -> &'a Value {
    &log.iter()
        .find(|e| e["type"] == "tool_called" && e["payload"]["call_id"] == id)
        .unwrap_or_else(|| panic!("no call {id}"))["payload"]
}

#[test]
fn folders_a_command_locks_neither_disable_later_commands_nor_hide_bytes_from_the_quota() {
    if !Path::new("/usr/bin/bwrap").is_file() && std::env::var("CI").as_deref() != Ok("true") {
        eprintln!("\n** WARNING: bubblewrap is not installed: locked-folder test skipped **\n");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"locker\"\nmodel = \"script:script.json\"\ntools = [\"run_command\", \"write_file\", \"list_dir\"]\n\
         allow_degraded_sandbox = true\n[limits]\nmax_total_bytes = 500000\n",
    )
    .unwrap();
    let script = json!([
        // 300 kB hidden in a folder, which is then locked.
        {"tool_calls": [{"id": "lock", "name": "run_command", "arguments": {"command":
            "mkdir -p /output/locked/inner && head -c 300000 /dev/zero > /output/locked/inner/big && chmod 000 /output/locked"}}]},
        // /output itself locked.
        {"tool_calls": [{"id": "root", "name": "run_command", "arguments": {"command": "chmod 000 /output"}}]},
        // Commands and file tools go on.
        {"tool_calls": [{"id": "after", "name": "run_command", "arguments": {"command": "echo after > /output/after.txt && ls /output/locked"}}]},
        {"tool_calls": [{"id": "list", "name": "list_dir", "arguments": {"path": "/output"}}]},
        // The locked 300 kB still count: 250 kB more is over the 500 kB quota.
        {"tool_calls": [{"id": "more", "name": "write_file", "arguments": {"path": "/output/more.txt", "content": "m".repeat(250_000)}}]},
        {"tool_calls": [{"id": "small", "name": "write_file", "arguments": {"path": "/output/small.txt", "content": "s"}}]},
        {"text": "done"}
    ]);
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
    let bundle = dir.path().join("bundle");
    let out = provrun_unprivileged(
        dir.path(),
        &[
            "run",
            &s(&dir.path().join("agent.toml")),
            "--out",
            &s(&bundle),
            "--verify",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = events(&bundle);
    for id in ["lock", "root", "after", "list"] {
        let c = call(&log, id);
        assert_eq!(c["ok"], true, "{id}: {c}");
        assert!(
            !c["result"].to_string().contains("Permission denied"),
            "{id}: {c}"
        );
    }
    assert!(
        call(&log, "after")["result"]
            .as_str()
            .unwrap()
            .contains("inner"),
        "the locked folder is readable again"
    );
    let more = call(&log, "more");
    assert_eq!(more["ok"], false, "{more}");
    assert!(more["result"].as_str().unwrap().contains("quota"), "{more}");
    assert_eq!(call(&log, "small")["ok"], true);
    // The outputs, the locked folder's included, are in a bundle that verifies.
    assert_eq!(
        std::fs::metadata(bundle.join("output/locked/inner/big"))
            .unwrap()
            .len(),
        300_000
    );
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/after.txt")).unwrap(),
        "after\n"
    );
    let verified = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(["verify", &s(&bundle)])
        .output()
        .unwrap();
    assert_eq!(verified.status.code(), Some(0));
}
