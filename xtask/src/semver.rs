//! `cargo xtask semver`: the public API of every published library crate compared with
//! the previous landed main by cargo-semver-checks, so a breaking change is a decision
//! (a version bump and a CHANGELOG line), not an accident.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{cargo, root, run};

/// The cargo-semver-checks release CI installs and this task expects.
pub(crate) const VERSION: &str = "0.51.0";

/// The file naming the commit the public API is compared with: the main that landed
/// last. Whoever lands a new main sets it to the commit that landed before.
const BASELINE_FILE: &str = "xtask/semver-baseline";

/// The library crates users link, whose public Rust API is a promise. Not here: the CLI
/// (its contract is its flags, exit codes and files, tested by its own tests), the Python
/// package's core (its contract is Python), the proc-macro crate (checked through the
/// tools crate that re-exports it), and the crates of tests and benchmarks. Named one by
/// one because the workspace is `publish = false`, which `--workspace` would skip.
const CHECKED: &[&str] = &[
    "provrun",
    "provrun-agent",
    "provrun-capture",
    "provrun-evidence",
    "provrun-inspect",
    "provrun-ledger",
    "provrun-mcp",
    "provrun-model",
    "provrun-otel",
    "provrun-rig",
    "provrun-sandbox",
    "provrun-serve",
    "provrun-store",
    "provrun-tools",
    "provrun-view",
    "provrun-wrap",
];

/// Runs the comparison. Skips with a loud warning, and succeeds, when cargo-semver-checks
/// is missing outside CI or the baseline commit is not in this clone (a shallow one).
///
/// cargo-semver-checks would build each crate twice in a scratch workspace of its own
/// (minutes per crate here); instead the rustdoc JSON of every checked crate is made
/// here in the workspace's own target folder, shared by the current tree and the
/// baseline's (unpacked with `git archive` under `target/semver`), so dependencies that
/// clippy and `cargo doc` already checked are not built again.
pub(crate) fn semver() -> Result<(), String> {
    semver_when(install())
}

/// Makes sure cargo-semver-checks is there ([`crate::setup::cargo_tool`]); whether the
/// check can run.
pub(crate) fn install() -> Result<bool, String> {
    crate::setup::cargo_tool("cargo-semver-checks", "semver-checks", VERSION)
}

/// [`semver`] once its tool's install (`installed`, [`install`]'s answer) is known: `ci`
/// installs it while the set-up downloads programs, and compares at the end.
pub(crate) fn semver_when(installed: Result<bool, String>) -> Result<(), String> {
    if !installed? {
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
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let work = target.join("semver");
    let base_src = work.join("baseline-src");
    unpack(&root, baseline, &base_src)?;
    let same_version = version(&root.join("Cargo.toml"))? == version(&base_src.join("Cargo.toml"))?;
    for crate_name in CHECKED {
        let current = rustdoc_json(&root, &target, crate_name, "current")?;
        let Some(base) = rustdoc_json_if_present(&base_src, &target, crate_name)? else {
            println!("semver: {crate_name} is new since {baseline}: nothing to compare");
            continue;
        };
        let mut check = cargo();
        check
            .args(["semver-checks", "check-release", "--baseline-rustdoc"])
            .arg(&base)
            .arg("--current-rustdoc")
            .arg(&current);
        if same_version {
            // The version did not move, so only a change a patch release may make is
            // allowed: a break fails until the version is raised.
            check.args(["--release-type", "patch"]);
        }
        run(&format!("semver: {crate_name} against {baseline}"), check)?;
    }
    Ok(())
}

/// The baseline's tree at `rev`, unpacked afresh into `dest`.
fn unpack(root: &Path, rev: &str, dest: &Path) -> Result<(), String> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| format!("semver: {}: {e}", dest.display()))?;
    }
    std::fs::create_dir_all(dest).map_err(|e| format!("semver: {}: {e}", dest.display()))?;
    let mut archive = Command::new("git")
        .args(["archive", rev])
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("semver: git archive: {e}"))?;
    let stdout = archive
        .stdout
        .take()
        .ok_or("semver: git archive gave no output")?;
    let untar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dest)
        .stdin(stdout)
        .status()
        .map_err(|e| format!("semver: tar: {e}"))?;
    let archived = archive
        .wait()
        .map_err(|e| format!("semver: git archive: {e}"))?;
    if untar.success() && archived.success() {
        Ok(())
    } else {
        Err(format!(
            "semver: could not unpack {rev} into {}",
            dest.display()
        ))
    }
}

/// The workspace version a manifest declares (`[workspace.package] version`).
fn version(manifest: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("semver: {}: {e}", manifest.display()))?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[workspace.package]";
        } else if in_package && let Some(value) = line.strip_prefix("version") {
            return Ok(value
                .trim_start_matches([' ', '='])
                .trim_matches('"')
                .to_owned());
        }
    }
    Err(format!(
        "semver: {} declares no workspace version",
        manifest.display()
    ))
}

/// The rustdoc JSON of `crate_name` in the workspace at `tree`, built in `target` and
/// copied to `target/semver/json/SIDE/` (rustdoc writes every crate's to one place).
fn rustdoc_json(
    tree: &Path,
    target: &Path,
    crate_name: &str,
    side: &str,
) -> Result<PathBuf, String> {
    let mut doc = cargo();
    doc.args([
        "rustdoc",
        "-q",
        "--lib",
        "--locked",
        "-p",
        crate_name,
        "--manifest-path",
    ])
    .arg(tree.join("Cargo.toml"))
    .args(["--", "-Z", "unstable-options", "--output-format", "json"])
    .env("CARGO_TARGET_DIR", target)
    // rustdoc's JSON output is unstable-gated; cargo-semver-checks sets the same.
    .env("RUSTC_BOOTSTRAP", "1");
    run(
        &format!("semver: rustdoc JSON of {crate_name} ({side})"),
        doc,
    )?;
    let file = format!("{}.json", crate_name.replace('-', "_"));
    let dir = target.join("semver/json").join(side);
    std::fs::create_dir_all(&dir).map_err(|e| format!("semver: {}: {e}", dir.display()))?;
    let dest = dir.join(&file);
    std::fs::copy(target.join("doc").join(&file), &dest)
        .map_err(|e| format!("semver: {file}: {e}"))?;
    Ok(dest)
}

/// [`rustdoc_json`] of the baseline, or `None` when the baseline has no such crate.
fn rustdoc_json_if_present(
    base_src: &Path,
    target: &Path,
    crate_name: &str,
) -> Result<Option<PathBuf>, String> {
    let folder = crate_name.strip_prefix("provrun-").unwrap_or("provrun");
    if !base_src
        .join("crates")
        .join(folder)
        .join("Cargo.toml")
        .is_file()
    {
        return Ok(None);
    }
    rustdoc_json(base_src, target, crate_name, "baseline").map(Some)
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
