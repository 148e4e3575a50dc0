//! `Sandbox::spawn_program`: a long-lived confined child talking over its pipes, with
//! only the environment it is given, killed on demand.

use std::io::{BufRead, BufReader, Write};

use provrun_sandbox::{Limits, Sandbox, SandboxError};

fn sandbox(tmp: &tempfile::TempDir) -> Sandbox {
    let input = tmp.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    Sandbox::new(
        &input,
        tmp.path().join("output"),
        tmp.path().join("scratch"),
        Limits::default(),
    )
    .unwrap()
}

#[test]
fn a_child_talks_over_its_pipes_with_only_the_named_environment_and_dies_on_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let support = Sandbox::command_support();
    let sb = sandbox(&tmp);
    let argv: Vec<String> = [
        "/bin/sh",
        "-c",
        "printf '%s|%s\\n' \"$GREETING\" \"$CARGO\"; exec cat",
    ]
    .map(String::from)
    .into();
    let env = [("GREETING".to_string(), "hi".to_string())];
    if !support.is_complete() {
        let err = sb.spawn_program(&argv, &env, &[]).unwrap_err();
        assert!(
            matches!(err, SandboxError::ConfinementMissing { .. }),
            "{err:?}"
        );
    }
    let sb = sb.allow_degraded_commands(true);
    let mut child = sb.spawn_program(&argv, &env, &[]).unwrap();
    let mut stdin = child.take_stdin().unwrap();
    let mut lines = BufReader::new(child.take_stdout().unwrap()).lines();
    // The named variable is there; the host's (cargo sets CARGO for tests) is not.
    assert_eq!(lines.next().unwrap().unwrap(), "hi|");
    stdin.write_all(b"ping\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "ping");
    assert!(child.exit_status().is_none(), "it runs until killed");
    child.kill();
    assert!(child.exit_status().is_some(), "killed and reaped");
    assert!(lines.next().is_none(), "its stdout closed with it");
}

#[test]
fn stderr_is_kept_and_an_exit_is_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let sb = sandbox(&tmp).allow_degraded_commands(true);
    let argv: Vec<String> = ["/bin/sh", "-c", "echo broken >&2; exit 3"]
        .map(String::from)
        .into();
    let mut child = sb.spawn_program(&argv, &[], &[]).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.take_stdout().unwrap(), &mut out).unwrap();
    assert_eq!(out, "");
    // stdout closed: the program is gone; wait for its stderr to be read to the end.
    // (Bounded, so a regression fails instead of hanging the suite.)
    let mut status = None;
    for _ in 0..6000 {
        status = child.exit_status();
        if status.is_some() && child.stderr_closed() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(child.stderr_closed(), "stderr never reached its end");
    let status = status.expect("the child exited");
    assert!(status.contains("exit code"), "{status}");
    assert!(
        child.stderr_text().contains("broken"),
        "{}",
        child.stderr_text()
    );
}

#[test]
fn an_empty_argv_or_a_missing_program_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let sb = sandbox(&tmp).allow_degraded_commands(true);
    assert!(sb.spawn_program(&[], &[], &[]).is_err());
}

/// The network interfaces `/proc/net/dev` lists.
fn interfaces(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, _)| n.trim().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn a_server_has_no_network_unless_granted_it() {
    let support = Sandbox::command_support();
    if support.degraded.iter().any(|l| l == "namespaces") {
        eprintln!(
            "SKIP a_server_has_no_network_unless_granted_it: no network namespace here ({})",
            support.missing_summary()
        );
        return;
    }
    let host = interfaces(&std::fs::read_to_string("/proc/net/dev").unwrap());
    let argv: Vec<String> = [
        "/bin/sh",
        "-c",
        "cat /proc/net/dev; test -e /etc/resolv.conf && echo resolv",
    ]
    .map(String::from)
    .into();
    let seen = |network: bool| {
        let tmp = tempfile::tempdir().unwrap();
        let sb = sandbox(&tmp).allow_degraded_commands(true);
        let mut child = sb.spawn_server(&argv, &[], &[], network).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.take_stdout().unwrap(), &mut out).unwrap();
        child.kill();
        out
    };
    let off = seen(false);
    assert_eq!(interfaces(&off), ["lo"], "{off}");
    assert!(!off.contains("resolv"));
    let on = seen(true);
    assert_eq!(interfaces(&on), host, "{on}");
    if std::path::Path::new("/etc/resolv.conf").exists() {
        assert!(
            on.contains("resolv"),
            "a networked server resolves names: {on}"
        );
    }
}

#[test]
fn as_root_a_spawned_server_runs_as_the_command_user_with_its_program_bound_from_a_closed_folder() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let support = Sandbox::command_support();
    if !support
        .layers
        .get("namespaces")
        .is_some_and(|l| l.available)
    {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!(
                "CI must run this test with bubblewrap: {}",
                support.missing_summary()
            );
        }
        eprintln!("\n** WARNING: no bubblewrap: the spawned server's user is not checked **\n");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The program sits in a folder only its owner may enter (like a temporary folder).
    let closed = tmp.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let program = closed.join("server.sh");
    std::fs::write(
        &program,
        "#!/bin/sh\nid -u > /output/made.txt\nid -u\nexec cat\n",
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sb = sandbox(&tmp).allow_degraded_commands(true);
    let user = sb.command_user();
    let argv = vec![program.display().to_string()];
    let mut child = sb
        .spawn_program(&argv, &[], std::slice::from_ref(&program))
        .unwrap();
    let mut lines = BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "1000",
        "{}",
        child.stderr_text()
    );
    child.kill();
    let made = std::fs::metadata(tmp.path().join("output/made.txt")).unwrap();
    assert_eq!((made.uid(), made.gid()), (user.uid, user.gid));
    if user.runtime_uid == 0 {
        assert_eq!(user.uid, 65536);
        assert_ne!(made.uid(), 0, "the server's file is root's on the host");
    }
}
