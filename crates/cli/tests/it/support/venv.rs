//! Python virtualenvs for the tests that check provrun against real Python programs: a
//! throwaway one under target/ from a requirements file, or one per pinned package in the
//! CI cache; and the two facts every such test asks first (are we in CI, where is its
//! cache).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtualenv `name` under the test target's temporary folder, made once, with the
/// packages of `requirements` (a file relative to the repository root) installed from
/// PyPI; ready when `python -c probe` succeeds. Returns its `python`; `Err` says why not.
pub(crate) fn virtualenv(name: &str, requirements: &str, probe: &str) -> Result<PathBuf, String> {
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
    make_venv(&venv)?;
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

/// Whether the tests run under CI (`CI=true` or `CI=1`), where a missing real program is
/// a failure instead of a loud skip.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The cache the CI set-up installs real programs into (`cargo xtask ci`):
/// `$PROVRUN_CI_CACHE`, else `~/.cache/provrun-ci`.
pub(crate) fn ci_cache() -> PathBuf {
    std::env::var_os("PROVRUN_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/provrun-ci")
        })
}

/// The virtualenv `folder` of the CI cache with the pinned `package` (pip's form,
/// `name==version`) installed; made when `ready` (given the venv) says it is not there
/// yet. Returns the venv's folder; `Err` says what failed.
pub(crate) fn cached_virtualenv(
    folder: &str,
    package: &str,
    ready: impl Fn(&Path) -> bool,
) -> Result<PathBuf, String> {
    let venv = ci_cache().join(folder);
    if ready(&venv) {
        return Ok(venv);
    }
    make_venv(&venv)?;
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", package])
        .output()
        .map_err(|e| e.to_string())?;
    if pip.status.success() && ready(&venv) {
        Ok(venv)
    } else {
        Err(format!(
            "pip could not install {package}: {}",
            String::from_utf8_lossy(&pip.stderr).trim()
        ))
    }
}

/// A fresh, empty virtualenv at `venv` (`python3 -m venv --clear`); `Err` says why not.
fn make_venv(venv: &Path) -> Result<(), String> {
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(venv)
        .output()
        .map_err(|e| format!("python3 is not available ({e})"))?;
    if made.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`python3 -m venv` failed (on Debian: apt-get install python3-venv): {}",
            String::from_utf8_lossy(&made.stderr).trim()
        ))
    }
}
