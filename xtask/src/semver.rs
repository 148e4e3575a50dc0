//! `cargo xtask semver`: the public API of every published library crate compared with
//! the previous landed main by cargo-semver-checks, so a breaking change is a decision
//! (a version bump and a CHANGELOG line), not an accident.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{cargo, root, run};

/// The cargo-semver-checks release CI installs and this task expects.
pub const VERSION: &str = "0.51.0";

/// The file naming the commit the public API is compared with: the main that landed
/// last. Whoever lands a new main sets it to the commit that landed before.
const BASELINE_FILE: &str = "xtask/semver-baseline";

/// Crates whose contract is not their Rust API: the CLI's is its flags, exit codes and
/// files (tested by its own tests), the Python package's is Python.
const EXCLUDED: &[&str] = &["provrun-cli", "provrun-python"];

/// Runs the comparison. Skips with a loud warning, and succeeds, when cargo-semver-checks
/// is missing outside CI or the baseline commit is not in this clone (a shallow one).
pub fn semver() -> Result<(), String> {
    if !crate::setup::cargo_tool("cargo-semver-checks", "semver-checks", VERSION)? {
        return Ok(());
    }
    let root = root();
    let baseline = std::fs::read_to_string(root.join(BASELINE_FILE))
        .map_err(|e| format!("semver: {BASELINE_FILE}: {e}"))?;
    let baseline = baseline.trim();
    if !has_commit(&root, baseline) {
        eprintln!(
            "\n##  WARNING: the semver baseline {baseline} ({BASELINE_FILE}) is not in this \
             clone (shallow?): the public API is NOT compared. Fetch it and run \
             `cargo xtask semver`.\n"
        );
        return Ok(());
    }
    let mut check = cargo();
    check.args([
        "semver-checks",
        "check-release",
        "--workspace",
        "--baseline-rev",
        baseline,
    ]);
    for crate_name in EXCLUDED {
        check.args(["--exclude", crate_name]);
    }
    run(&format!("semver (against {baseline})"), check)
}

/// Whether `rev` names a commit this clone holds.
fn has_commit(root: &Path, rev: &str) -> bool {
    Command::new("git")
        .args(["cat-file", "-e", &format!("{rev}^{{commit}}")])
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
