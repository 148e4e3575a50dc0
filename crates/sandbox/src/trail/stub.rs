//! The stub a traced command starts as (`provrun-confine --trail-stub [--arg0 NAME] --
//! PROGRAM ARG…`): it stops itself (`SIGSTOP`) so that the tracer can attach before
//! anything of the command has run, and once continued execs `PROGRAM` (under the name
//! `NAME` when given: the helper started directly must be called `provrun-confine`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;

/// The stub's whole life: returns only when it cannot stop itself or exec the program,
/// with what went wrong (the helper then exits with its "cannot run" status).
pub(crate) fn stub_main(args: impl IntoIterator<Item = OsString>) -> String {
    let mut args = args.into_iter();
    let mut arg0 = None;
    loop {
        match args.next() {
            Some(a) if a == "--arg0" => arg0 = args.next(),
            Some(a) if a == "--" => break,
            _ => return "usage: --trail-stub [--arg0 NAME] -- PROGRAM ARG…".to_owned(),
        }
    }
    let Some(program) = args.next() else {
        return "no program given".to_owned();
    };
    // Held here until the tracer has attached and lets it go on.
    if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
        return format!("cannot stop for the tracer: {e}");
    }
    let mut cmd = std::process::Command::new(&program);
    cmd.args(args);
    if let Some(name) = arg0 {
        cmd.arg0(name);
    }
    let e = cmd.exec();
    format!("cannot run `{}`: {e}", program.to_string_lossy())
}
