//! The `provrun` binary: a thin shell over [`provrun_cli::main_with_args`].
//!
//! It is also its own command-confinement helper: started under the name `provrun-confine`
//! (as the sandbox does inside bubblewrap), [`provrun_sandbox::arg0_dispatch`] runs the
//! helper instead of the CLI, so the one binary is all a user installs.

use std::process::ExitCode;

fn main() -> ExitCode {
    provrun_sandbox::arg0_dispatch();
    provrun_cli::main_with_args(std::env::args_os())
}
