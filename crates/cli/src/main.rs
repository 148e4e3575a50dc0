//! The `provrun` binary: a thin shell over [`provrun_cli::main_with_args`].

use std::process::ExitCode;

fn main() -> ExitCode {
    provrun_cli::main_with_args(std::env::args_os())
}
