//! Machine set-up for `cargo xtask ci`: make sure bubblewrap is there for the command
//! confinement tests.
//!
//! - `bwrap` present and able to build a sandbox: nothing to do.
//! - Missing, and we are root with `apt-get`: install the `bubblewrap` package.
//! - Still not usable: under CI (`CI=true`) that is a failure, since the confinement tests
//!   must run for real there; elsewhere the tests run and skip themselves, and this prints
//!   a loud warning saying so.

use std::process::{Command, Stdio};

/// Whether `bwrap` can create the namespaces the command sandbox uses.
fn bwrap_works() -> Result<(), String> {
    let out = Command::new("bwrap")
        .args([
            "--unshare-all",
            "--unshare-user",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "true",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`bwrap` could not be started: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`bwrap` cannot create namespaces here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn apt_install() -> Result<(), String> {
    println!(
        "\n==> setup: installing bubblewrap (apt-get update && apt-get install -y bubblewrap)"
    );
    let status = Command::new("sh")
        .args([
            "-c",
            "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap",
        ])
        .status()
        .map_err(|e| format!("apt-get could not be started: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("apt-get install bubblewrap failed ({status})"))
    }
}

/// Makes sure the command confinement tests can run; see the module docs.
pub fn confinement() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let mut problem = match bwrap_works() {
        Ok(()) => {
            println!("\n==> setup: bubblewrap works; the confinement tests run for real");
            return Ok(());
        }
        Err(e) => e,
    };
    if !have("bwrap") {
        if is_root() && have("apt-get") {
            match apt_install().and_then(|()| bwrap_works()) {
                Ok(()) => {
                    println!("==> setup: bubblewrap installed and working");
                    return Ok(());
                }
                Err(e) => problem = e,
            }
        } else {
            problem = "`bwrap` is not installed, and installing it needs root and apt-get".into();
        }
    }
    if ci {
        return Err(format!(
            "setup: CI must run the command confinement tests, but {problem}"
        ));
    }
    eprintln!(
        "\n\
         ############################################################################\n\
         ##  WARNING: run_command confinement cannot be tested on this machine.    ##\n\
         ##  {problem}\n\
         ##  The confinement tests will SKIP themselves. Install bubblewrap and    ##\n\
         ##  allow unprivileged user namespaces to run them (CI=true fails here).  ##\n\
         ############################################################################\n"
    );
    Ok(())
}
