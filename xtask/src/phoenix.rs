//! Machine set-up for the OpenTelemetry backend test (crates/cli/tests/it/otel_live.rs):
//! Arize Phoenix from PyPI, pinned, installed once into a virtualenv in the CI cache
//! (`phoenix-VERSION`, beside the other pinned installs of setup.rs) and started by the
//! test on loopback. The install is about 860 MB and takes about three minutes; it is made
//! in a `.partial` folder and renamed when complete, so a cut install is never taken for
//! a finished one.

use std::process::Command;

use crate::setup::ci_cache;

/// The Phoenix release the test runs against.
const VERSION: &str = "20.26.1";

/// Makes sure `phoenix-20.26.1/bin/python` in the cache can import Phoenix's server,
/// installing it when missing. Under CI a failed install fails; elsewhere the test skips
/// loudly.
pub(crate) fn phoenix() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let venv = ci_cache().join(format!("phoenix-{VERSION}"));
    let ready = |venv: &std::path::Path| {
        Command::new(venv.join("bin/python"))
            .args(["-c", "import phoenix.server.main"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let install = || -> Result<(), String> {
        if ready(&venv) {
            return Ok(());
        }
        let partial = ci_cache().join(format!("phoenix-{VERSION}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        let _ = std::fs::remove_dir_all(&venv);
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&partial);
        crate::run("setup: make the Phoenix virtualenv", make)?;
        let mut pip = Command::new(partial.join("bin/pip"));
        pip.args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("arize-phoenix=={VERSION}"));
        crate::run("setup: install arize-phoenix", pip)?;
        std::fs::rename(&partial, &venv)
            .map_err(|e| format!("cannot rename {}: {e}", partial.display()))?;
        if ready(&venv) {
            Ok(())
        } else {
            Err("Phoenix does not import after its install".into())
        }
    };
    match install() {
        Ok(()) => {
            println!(
                "\n==> setup: arize-phoenix {VERSION} is in {}; the OpenTelemetry backend test runs for real",
                venv.display()
            );
            Ok(())
        }
        Err(e) if ci => Err(format!(
            "setup: CI must run the OpenTelemetry backend test, but {e}"
        )),
        Err(e) => {
            eprintln!(
                "\n==> setup: WARNING: {e}; the OpenTelemetry backend test will SKIP itself (CI=true fails here)"
            );
            Ok(())
        }
    }
}
