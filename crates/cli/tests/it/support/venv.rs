//! A throwaway Python virtualenv under target/ for the tests that check provrun against
//! real Python programs (the dsse_interop, import_pydantic_ai, kubernetes, mcp_published
//! and object_store modules), which use it as `crate::support::venv`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtualenv `name` under the test target's temporary folder, made once, with the
/// packages of `requirements` (a file relative to the repository root) installed from
/// PyPI; ready when `python -c probe` succeeds. Returns its `python`; `Err` says why not.
pub fn virtualenv(name: &str, requirements: &str, probe: &str) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let python = venv.join("bin/python");
    let ready = |p: &Path| {
        Command::new(p)
            .args(["-c", probe])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ready(&python) {
        return Ok(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("python3 is not available ({e})"))?;
    if !made.status.success() {
        return Err(format!(
            "`python3 -m venv` failed (on Debian: apt-get install python3-venv): {}",
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    let pip = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(root.join(requirements))
        .output()
        .map_err(|e| format!("pip could not start: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "pip could not install {requirements} from PyPI: {}",
            String::from_utf8_lossy(&pip.stderr).trim()
        ));
    }
    if ready(&python) {
        Ok(python)
    } else {
        Err("the virtualenv was made but its packages do not import".into())
    }
}
