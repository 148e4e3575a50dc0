//! The process trail: every process a confined command starts, observed by a tracer
//! outside the sandbox, with the SHA-256 of the bytes that ran.

use provrun_sandbox::{Limits, Sandbox, TrailSink};
use sha2::Digest as _;

use crate::common::{Env, confinement_ready};

fn sha256_of(path: &str) -> String {
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn a_commands_children_are_recorded_with_the_digest_of_what_ran() {
    if !confinement_ready() {
        return;
    }
    let env = Env::new();
    let sink = TrailSink::new();
    let sb = env.sb.clone().with_trail_sink(sink.clone());
    let out = sb
        .run_command("echo hi; /usr/bin/true; ls /input >/dev/null; exit 3", None)
        .unwrap();
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    let trails = sink.take();
    assert_eq!(trails.len(), 1);
    let trail = &trails[0];
    eprintln!("{trail:#?}");
    assert!(trail.summary.complete, "{:?}", trail.summary);
    let root = &trail.processes[0];
    assert_eq!(root.parent, None);
    assert_eq!(root.argv[..2], ["/bin/sh", "-c"]);
    assert_eq!(root.exit_code, Some(3));
    let truth = trail
        .processes
        .iter()
        .find(|p| p.argv == ["/usr/bin/true"])
        .expect("true is recorded");
    assert_eq!(truth.parent, Some(root.id));
    assert_eq!(truth.exe, "/usr/bin/true");
    assert_eq!(
        truth.exe_sha256.as_deref(),
        Some(sha256_of("/usr/bin/true").as_str())
    );
    assert_eq!(truth.exit_code, Some(0));
    assert_eq!(truth.cwd.as_deref(), Some("/scratch"));
    assert!(trail.processes.iter().any(|p| p.argv == ["ls", "/input"]));
    let _ = (Limits::default(), Sandbox::command_support());
}
