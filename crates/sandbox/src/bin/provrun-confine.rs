//! `provrun-confine`: the helper bubblewrap runs inside a command sandbox. It applies the
//! rlimits, Landlock and the seccomp filter to itself, then execs the command (see
//! `provrun_sandbox::confine`). It must be installed next to the program that uses
//! `provrun-sandbox` (or named by `$PROVRUN_CONFINE`).

fn main() {
    let code = provrun_sandbox::confine::helper_main(std::env::args_os().skip(1));
    std::process::exit(code);
}
