//! One binary for everything: a program that links `provrun-sandbox` can carry the
//! confinement helper itself instead of shipping `provrun-confine` beside it.
//!
//! The helper is the first program bubblewrap runs inside a command sandbox (see
//! [`crate::confine`]). When a program calls [`arg0_dispatch`] first thing in `main`, the
//! sandbox starts *that same executable* as the helper, under the name `provrun-confine`
//! (bubblewrap binds it read-only at `/run/provrun-confine`; without bubblewrap it is
//! started with `argv[0]` set to `provrun-confine`). [`arg0_dispatch`] recognises that name
//! in `argv[0]`, runs the helper and never returns; under any other name it returns at
//! once and marks the running executable as one that can serve as its own helper.
//!
//! A program that does not call it still works the old way: the helper binary is looked for
//! through `$PROVRUN_CONFINE`, next to the executable, or on `PATH`.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::command::HELPER_NAME;

/// Set once [`arg0_dispatch`] has run in this process and returned.
static SELF_HELPER: AtomicBool = AtomicBool::new(false);

/// Whether `argv0` names the helper: its last path component is `provrun-confine`.
fn names_helper(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name() == Some(OsStr::new(HELPER_NAME))
}

/// Call this first thing in `main` of any binary that runs commands through
/// `provrun-sandbox` (directly or through the agent runtime):
///
/// ```no_run
/// // first thing in `fn main()`:
/// provrun_sandbox::arg0_dispatch();
/// // … the program proper …
/// ```
///
/// Started as the confinement helper (`argv[0]` ends in `provrun-confine`), it applies the
/// rlimits, Landlock and the seccomp filter and execs the sandboxed command, or exits with
/// the helper's status; it never returns then. Otherwise it returns immediately and the
/// sandbox will use this executable as its helper, so a lone copy of the program runs
/// commands fully confined with no helper binary installed and no variable set. An
/// explicit `$PROVRUN_CONFINE` still wins.
pub fn arg0_dispatch() {
    let mut args = std::env::args_os();
    if let Some(argv0) = args.next()
        && names_helper(&argv0)
    {
        std::process::exit(crate::confine::helper_main(args));
    }
    SELF_HELPER.store(true, Ordering::SeqCst);
}

/// Whether [`arg0_dispatch`] ran in this process (so the executable is its own helper).
pub(crate) fn self_is_helper() -> bool {
    SELF_HELPER.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_helper_name_dispatches() {
        assert!(names_helper(OsStr::new("provrun-confine")));
        assert!(names_helper(OsStr::new("/run/provrun-confine")));
        assert!(!names_helper(OsStr::new("provrun")));
        assert!(!names_helper(OsStr::new("/usr/bin/provrun-confine-old")));
        assert!(!names_helper(OsStr::new("")));
    }
}
