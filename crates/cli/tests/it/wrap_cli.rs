//! `provrun wrap` under the conventions every command keeps: the stop signals (SIGINT,
//! SIGTERM, SIGHUP passed on to the program, the bundle finished `cancelled`, exit 128 +
//! the signal; a second one kills the program's tree), `PROVRUN_BUILDER_ID` and the
//! current statement format.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::support::cli::s;
use crate::support::wrap::{assert_verifies, of_kind, provrun, wrap_ready};

/// A program that says `ready`, then waits; on SIGTERM or SIGINT it writes which it got
/// into the workspace and exits 3. Given `stubborn` it ignores them instead, and waits on.
const WAITER: &str = r#"
import signal, sys, time
def stop(sig, frame):
    open("signal.txt", "w").write(signal.Signals(sig).name)
    sys.exit(3)
handler = signal.SIG_IGN if sys.argv[1:] == ["stubborn"] else stop
signal.signal(signal.SIGTERM, handler)
signal.signal(signal.SIGINT, handler)
print("ready", flush=True)
time.sleep(60)
"#;

/// `provrun wrap` of the waiter (with `args` after the script), once it said `ready`.
fn start_waiter(dir: &Path, args: &[&str]) -> Child {
    let scripts = dir.join("scripts");
    std::fs::create_dir(&scripts).unwrap();
    std::fs::write(scripts.join("wait.py"), WAITER).unwrap();
    let mut child = provrun()
        .args(["wrap", "--out", &s(&dir.join("bundle")), "--read-only"])
        .arg(&scripts)
        .args(["--", "/usr/bin/python3", &s(&scripts.join("wait.py"))])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    child
}

fn send(child: &Child, signal: i32) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    let sig = rustix::process::Signal::from_named_raw(signal).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

/// Waits for wrap: its exit code and stderr.
fn ended(mut child: Child) -> (Option<i32>, String) {
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap().code(), stderr)
}

/// The bundle verifies and is finished `cancelled`, its `program_exited` naming the
/// signal passed on; that event's payload.
fn cancelled_bundle(bundle: &Path, name: &str) -> Value {
    assert_verifies(bundle);
    let finished = &of_kind(bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["status"], "cancelled", "{finished}");
    let exited = of_kind(bundle, "program_exited")[0]["payload"].clone();
    assert_eq!(exited["forwarded_signal"], name);
    exited
}

fn signalled_run(signal: i32, name: &str, code: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let child = start_waiter(tmp.path(), &[]);
    send(&child, signal);
    let (status, stderr) = ended(child);
    // wrap's code is 128 + the signal, as for `run`; the program's own is recorded.
    assert_eq!(status, Some(code), "{stderr}");
    assert!(stderr.contains(&format!("{name} passed on")), "{stderr}");
    let bundle = tmp.path().join("bundle");
    let exited = cancelled_bundle(&bundle, name);
    assert_eq!(exited["exit_code"], 3, "{exited}");
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/signal.txt")).unwrap(),
        name
    );
}

#[test]
fn sigterm_is_passed_on_and_the_bundle_ends_cancelled() {
    if wrap_ready("sigterm_is_passed_on_and_the_bundle_ends_cancelled") {
        signalled_run(libc::SIGTERM, "SIGTERM", 143);
    }
}

#[test]
fn ctrl_c_is_passed_on_and_the_bundle_ends_cancelled() {
    if wrap_ready("ctrl_c_is_passed_on_and_the_bundle_ends_cancelled") {
        signalled_run(libc::SIGINT, "SIGINT", 130);
    }
}

#[test]
fn sighup_is_passed_on_and_the_bundle_ends_cancelled() {
    if wrap_ready("sighup_is_passed_on_and_the_bundle_ends_cancelled") {
        // The waiter does not catch SIGHUP: it dies of it, and the bundle still ends.
        let tmp = tempfile::tempdir().unwrap();
        let child = start_waiter(tmp.path(), &[]);
        send(&child, libc::SIGHUP);
        let (status, stderr) = ended(child);
        assert_eq!(status, Some(129), "{stderr}");
        let exited = cancelled_bundle(&tmp.path().join("bundle"), "SIGHUP");
        assert_eq!(exited["exit_code"], 129, "{exited}");
    }
}

#[test]
fn a_second_signal_kills_a_program_that_ignores_the_first_and_the_bundle_still_ends() {
    if !wrap_ready(
        "a_second_signal_kills_a_program_that_ignores_the_first_and_the_bundle_still_ends",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut child = start_waiter(tmp.path(), &["stubborn"]);
    send(&child, libc::SIGTERM);
    // The first is passed on (and ignored): wrap waits on.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "wrap ended on the first signal"
    );
    send(&child, libc::SIGINT);
    let (status, stderr) = ended(child);
    // The code of the first signal, the one passed on; the process was not ended at once
    // (as `run` is on a second signal): the bundle is finished.
    assert_eq!(status, Some(143), "{stderr}");
    assert!(stderr.contains("killed"), "{stderr}");
    let exited = cancelled_bundle(&tmp.path().join("bundle"), "SIGTERM");
    // Killed: 128 + SIGKILL through bubblewrap, or the signal itself.
    assert!(
        exited["exit_code"] == 137 || exited["signal"] == 9,
        "not killed: {exited}"
    );
}

#[test]
fn the_builder_id_is_honoured_and_the_statement_is_the_current_format() {
    if !wrap_ready("the_builder_id_is_honoured_and_the_statement_is_the_current_format") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wrapped = |name: &str, builder: Option<&str>| {
        let bundle = tmp.path().join(name);
        let mut cmd = provrun();
        if let Some(b) = builder {
            cmd.env("PROVRUN_BUILDER_ID", b);
        }
        let out = cmd
            .args(["wrap", "--out", &s(&bundle), "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (bundle, out)
    };
    // By default the builder is wrap itself, as a URI under the project's base.
    let (bundle, out) = wrapped("default", None);
    assert_eq!(out.status.code(), Some(0));
    assert_verifies(&bundle);
    let started = &of_kind(&bundle, "run_started")[0]["payload"];
    assert_eq!(
        started["statement"],
        provrun_evidence::STATEMENT_FORMAT,
        "{started}"
    );
    let builder = started["builder"].as_str().unwrap();
    assert!(builder.starts_with("provrun-wrap/"), "{builder}");
    let statement: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("statement.json")).unwrap()).unwrap();
    assert_eq!(
        statement["predicate"]["runDetails"]["builder"]["id"],
        provrun_evidence::builder_uri(builder)
    );
    assert_eq!(
        statement["predicate"]["buildDefinition"]["buildType"],
        provrun_evidence::BUILD_TYPE
    );

    // An organisation's own builder, recorded as given.
    let ours = "https://ci.example.com/agents/wrap-1";
    let (bundle, out) = wrapped("ours", Some(ours));
    assert_eq!(out.status.code(), Some(0));
    assert_verifies(&bundle);
    assert_eq!(
        of_kind(&bundle, "run_started")[0]["payload"]["builder"],
        ours
    );
    let statement: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("statement.json")).unwrap()).unwrap();
    assert_eq!(statement["predicate"]["runDetails"]["builder"]["id"], ours);
    // replay still knows it for a wrapped run.
    let again = provrun()
        .args([
            "replay",
            &s(&bundle),
            "--out",
            &s(&tmp.path().join("again")),
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("provrun wrap"));

    // One that is not a URI is a usage error, before anything is written.
    let (bundle, out) = wrapped("bad", Some("our ci"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("PROVRUN_BUILDER_ID"));
    assert!(!bundle.exists());
}
