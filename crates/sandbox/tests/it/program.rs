//! `Sandbox::start_program`: a program run for as long as it takes in its own layout —
//! the output root as its working folder at /workspace, the scratch root as its private
//! HOME, read-only grants, loopback ports forwarded to Unix sockets of the host, signals
//! sent to its process group.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use provrun_sandbox::{
    Limits, PortForwards, ProgramChild, ProgramExit, ProgramSignal, ProgramSpec, Sandbox,
    SandboxError,
};

use crate::common::confinement_ready;

struct Roots {
    _tmp: tempfile::TempDir,
    input: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    granted: PathBuf,
    sockets: PathBuf,
}

fn roots() -> Roots {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    let r = Roots {
        input: base.join("input"),
        workspace: base.join("workspace"),
        home: base.join("home"),
        granted: base.join("granted"),
        sockets: base.join("sockets"),
        _tmp: tmp,
    };
    for d in [&r.input, &r.workspace, &r.home, &r.granted, &r.sockets] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(r.input.join("notes.txt"), "from the input\n").unwrap();
    std::fs::write(r.granted.join("tool.txt"), "granted\n").unwrap();
    r
}

fn sandbox(r: &Roots) -> Sandbox {
    Sandbox::new(&r.input, &r.workspace, &r.home, Limits::default()).unwrap()
}

/// A service on a Unix socket: reads one line and answers `pong: LINE`, for every
/// connection, on a thread.
fn socket_service(path: &Path) {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            let _ = BufReader::new(stream.try_clone().unwrap()).read_line(&mut line);
            let _ = write!(stream, "pong: {line}");
        }
    });
}

fn wait(child: &mut ProgramChild, within: Duration) -> ProgramExit {
    let deadline = Instant::now() + within;
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            return exit;
        }
        assert!(Instant::now() < deadline, "the program did not end in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    r.read_to_string(&mut s).unwrap();
    s
}

#[test]
fn a_program_works_in_its_workspace_with_a_private_home_and_reaches_only_the_forwarded_port() {
    if !confinement_ready() {
        return;
    }
    let r = roots();
    socket_service(&r.sockets.join("api.sock"));
    let script = r#"
        set -u
        echo "cwd=$(pwd) home=$HOME tmp=$TMPDIR greeting=$GREETING"
        cat /input/notes.txt > answer.txt
        echo private > "$HOME/state.txt"
        cat /tmp/../input/notes.txt >/dev/null
        cat "$GRANTED/tool.txt"
        if echo x > "$GRANTED/tool.txt" 2>/dev/null; then echo granted-writable; fi
        if echo x > /input/notes.txt 2>/dev/null; then echo input-writable; fi
        exec 3<>/dev/tcp/127.0.0.1/4180
        printf 'ping\n' >&3
        cat <&3
        if (exec 4<>/dev/tcp/127.0.0.1/4181) 2>/dev/null; then echo other-port-open; fi
        exit 3
    "#;
    let spec = ProgramSpec {
        argv: ["/bin/bash", "-c", script].map(String::from).into(),
        env: vec![
            ("GREETING".into(), "hi".into()),
            ("GRANTED".into(), r.granted.display().to_string()),
            // Ignored: HOME and TMPDIR are the sandbox's.
            ("HOME".into(), "/root".into()),
            ("TMPDIR".into(), "/nowhere".into()),
        ],
        read_only: vec![r.granted.clone()],
        forwards: Some(PortForwards {
            dir: r.sockets.clone(),
            ports: vec![(4180, "api.sock".into())],
        }),
    };
    let mut child = sandbox(&r).start_program(&spec).unwrap();
    assert_eq!(child.confinement().mode, "full");
    assert_eq!(child.confinement().limits.timeout_ms, 0);
    let stdout = child.take_stdout().unwrap();
    let stderr = child.take_stderr().unwrap();
    let exit = wait(&mut child, Duration::from_secs(30));
    let (out, err) = (read_all(stdout), read_all(stderr));
    assert_eq!(exit.code, Some(3), "stdout: {out}\nstderr: {err}");
    assert!(
        out.contains("cwd=/workspace home=/home/provrun tmp=/tmp greeting=hi"),
        "{out}\n{err}"
    );
    assert!(out.contains("granted\n"), "{out}");
    assert!(out.contains("pong: ping\n"), "{out}\n{err}");
    for never in ["granted-writable", "input-writable", "other-port-open"] {
        assert!(!out.contains(never), "{never}: {out}");
    }
    assert_eq!(
        std::fs::read_to_string(r.workspace.join("answer.txt")).unwrap(),
        "from the input\n"
    );
    assert_eq!(
        std::fs::read_to_string(r.home.join("state.txt")).unwrap(),
        "private\n"
    );
    assert_eq!(
        std::fs::read_to_string(r.granted.join("tool.txt")).unwrap(),
        "granted\n"
    );
}

#[test]
fn a_signal_reaches_the_program_and_its_exit_code_comes_back() {
    if !confinement_ready() {
        return;
    }
    let r = roots();
    let script = r#"trap 'echo got-term > term.txt; exit 7' TERM; echo started; while :; do sleep 0.05; done"#;
    let spec = ProgramSpec {
        argv: ["/bin/sh", "-c", script].map(String::from).into(),
        ..ProgramSpec::default()
    };
    let mut child = sandbox(&r).start_program(&spec).unwrap();
    let mut lines = BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "started");
    assert!(child.try_wait().unwrap().is_none());
    assert!(child.signal(ProgramSignal::Terminate));
    let exit = wait(&mut child, Duration::from_secs(10));
    assert_eq!(exit.code, Some(7));
    assert_eq!(
        std::fs::read_to_string(r.workspace.join("term.txt")).unwrap(),
        "got-term\n"
    );
    assert!(
        !child.signal(ProgramSignal::Terminate),
        "nothing left to signal"
    );
}

#[test]
fn a_killed_program_takes_its_whole_tree_with_it() {
    if !confinement_ready() {
        return;
    }
    let r = roots();
    // A child in a session of its own would outlive a plain kill of the program.
    let script = "setsid sh -c 'sleep 0.5; echo late > late.txt' & echo started; exec sleep 60";
    let spec = ProgramSpec {
        argv: ["/bin/sh", "-c", script].map(String::from).into(),
        ..ProgramSpec::default()
    };
    let mut child = sandbox(&r).start_program(&spec).unwrap();
    let mut lines = BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "started");
    assert!(child.kill().is_some());
    std::thread::sleep(Duration::from_millis(900));
    assert!(!r.workspace.join("late.txt").exists());
}

#[test]
fn a_forwarded_socket_needs_a_plain_name() {
    let r = roots();
    let spec = ProgramSpec {
        argv: vec!["/bin/true".into()],
        forwards: Some(PortForwards {
            dir: r.sockets.clone(),
            ports: vec![(4180, "../escape.sock".into())],
        }),
        ..ProgramSpec::default()
    };
    let err = sandbox(&r)
        .allow_degraded_commands(true)
        .start_program(&spec)
        .unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::CommandStart { .. } | SandboxError::ConfinementMissing { .. }
        ),
        "{err:?}"
    );
}
