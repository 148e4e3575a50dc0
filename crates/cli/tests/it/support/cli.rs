//! Small helpers many of the CLI's test modules share: the `provrun` binary in a clean
//! environment, its exit checked, and readers of a bundle and of paths.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// A bundle's events, each line of its log parsed as JSON.
pub(crate) fn events(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A path as a command-line argument.
pub(crate) fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The environment variables a test's `provrun` must not inherit from whoever runs the
/// tests: log filters, colour switches, a batch array index, a builder id and, below,
/// every `OTEL_*` setting.
const INHERITED: &[&str] = &[
    "RUST_LOG",
    "NO_COLOR",
    "CLICOLOR_FORCE",
    "JOB_COMPLETION_INDEX",
    "PROVRUN_BUILDER_ID",
];

/// The `provrun` binary under test with `args`, in an environment cleared of the
/// settings in [`INHERITED`] and of every `OTEL_*` variable.
pub(crate) fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_provrun"));
    cmd.args(args);
    for key in INHERITED {
        cmd.env_remove(key);
    }
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Runs [`command`] to its end and returns what it printed and how it exited.
pub(crate) fn provrun(args: &[&str]) -> Output {
    command(args).output().expect("the provrun binary runs")
}

/// Bytes a command printed, as text (invalid UTF-8 replaced).
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Fails, showing both streams, unless `out` exited with `code`.
#[track_caller]
pub(crate) fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// [`assert_exit`], then what the command printed on stdout.
#[track_caller]
pub(crate) fn exit(out: &Output, code: i32) -> String {
    assert_exit(out, code);
    text(&out.stdout)
}
