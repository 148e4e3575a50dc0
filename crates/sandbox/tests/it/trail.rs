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

/// The hostile program: `/usr/bin/true ROUTE` by every route, then 50 times in a loop.
pub(crate) const HOSTILE: &str = include_str!("hostile_execs.py");

/// The routes the hostile program takes, each `true`'s argument.
pub(crate) const ROUTES: &[&str] = &[
    "fork-exec",
    "posix-spawn",
    "vfork",
    "thread-exec",
    "execveat",
    "memfd-fexecve",
    "memfd-proc",
    "orphan",
];

#[test]
fn no_route_hides_an_exec_and_every_one_is_hashed_as_what_ran() {
    if !confinement_ready() {
        return;
    }
    let env = Env::new();
    std::fs::write(env.scratch.join("hostile.py"), HOSTILE).unwrap();
    let sink = TrailSink::new();
    let sb = env.sb.clone().with_trail_sink(sink.clone());
    let argv = ["/usr/bin/python3", "/scratch/hostile.py"].map(String::from);
    let out = sb.run_program(&argv, None, None).unwrap();
    assert_eq!(out.exit_code, Some(0), "{}", out.render());
    let trail = sink.take().pop().unwrap();
    assert!(trail.summary.complete, "{:?}", trail.summary);
    let truth = sha256_of("/usr/bin/true");
    let runs_of = |arg: &str| {
        trail
            .processes
            .iter()
            .filter(|p| p.exec && p.argv.get(1).map(String::as_str) == Some(arg))
            .collect::<Vec<_>>()
    };
    for route in ROUTES {
        let runs = runs_of(route);
        assert_eq!(runs.len(), 1, "{route}: {runs:#?}");
        let p = runs[0];
        assert_eq!(
            p.exe_sha256.as_deref(),
            Some(truth.as_str()),
            "{route}: {p:#?}"
        );
        assert_eq!(p.exit_code, Some(0), "{route}: {p:#?}");
        assert!(p.parent.is_some(), "{route}");
        if route.starts_with("memfd") {
            assert!(p.exe.starts_with("/memfd:hidden"), "{route}: {}", p.exe);
        } else {
            assert_eq!(p.exe, "/usr/bin/true", "{route}");
        }
    }
    for i in 0..50 {
        let runs = runs_of(&format!("loop-{i}"));
        assert_eq!(runs.len(), 1, "loop-{i}");
        assert_eq!(runs[0].exe_sha256.as_deref(), Some(truth.as_str()));
    }
    // The orphan's parent is the process that forked it, though it was gone by then.
    let orphan = runs_of("orphan")[0];
    let parent = trail
        .processes
        .iter()
        .find(|p| Some(p.id) == orphan.parent)
        .unwrap();
    assert!(!parent.exec && parent.exit_code == Some(0), "{parent:#?}");
    // The child that exited at once, without an exec: recorded with its exit code.
    assert!(
        trail
            .processes
            .iter()
            .any(|p| !p.exec && p.exit_code == Some(7)),
        "{:#?}",
        trail.processes
    );
    // The exec from a thread replaced the whole process: one image, its parent the fork.
    let from_thread = runs_of("thread-exec")[0];
    assert!(trail.processes.iter().all(|p| p.exit_code != Some(9)));
    assert!(from_thread.parent.is_some());
}

#[test]
fn a_fork_storm_under_the_process_limit_ends_in_a_count() {
    if !confinement_ready() {
        return;
    }
    let limits = Limits {
        command_processes: 64,
        ..Limits::default()
    };
    let env = Env::with_limits(limits);
    let sink = TrailSink::new();
    let sb = env
        .sb
        .clone()
        .with_trail_sink(sink.clone())
        .with_trail_limit(100);
    // Execs as fast as the process limit lets it, until the timeout kills the tree.
    let started = std::time::Instant::now();
    let out = sb
        .run_command(
            "while :; do /usr/bin/true & /usr/bin/true & wait; done",
            Some(std::time::Duration::from_secs(3)),
        )
        .unwrap();
    assert!(out.timed_out, "{}", out.render());
    let trail = sink.take().pop().unwrap();
    let s = &trail.summary;
    assert_eq!(s.processes, 100, "{s:?}");
    assert_eq!(trail.processes.len(), 100);
    assert!(s.not_recorded > 100, "{s:?}");
    assert!(s.execs > 200 && s.forks > 200, "{s:?}");
    // It ends with the command, not minutes later.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn secrets_given_to_the_sandbox_never_reach_the_record() {
    if !confinement_ready() {
        return;
    }
    let env = Env::new();
    let sink = TrailSink::new();
    let secret = "sk-live-0123456789abcdef".to_owned();
    let sb = env
        .sb
        .clone()
        .with_trail_sink(sink.clone())
        .with_trail_secrets(vec![secret.clone()]);
    let out = sb
        .run_command(&format!("/usr/bin/env KEY={secret} /usr/bin/true"), None)
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    let trail = sink.take().pop().unwrap();
    let text = serde_json::to_string(&trail).unwrap();
    assert!(!text.contains(&secret), "{text}");
    let env_run = trail
        .processes
        .iter()
        .find(|p| p.exe == "/usr/bin/env")
        .unwrap();
    assert_eq!(env_run.argv[1], format!("KEY={}", "*".repeat(secret.len())));
}

#[test]
fn without_the_trail_nothing_is_recorded_and_nothing_waits() {
    if !confinement_ready() {
        return;
    }
    let env = Env::new();
    let sink = TrailSink::new();
    let sb = env
        .sb
        .clone()
        .with_trail_sink(sink.clone())
        .with_trail(false);
    let out = sb.run_command("/usr/bin/true", None).unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(sink.take().is_empty());
}
