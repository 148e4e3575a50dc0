//! `cargo xtask python`: build provrun's Python package and run its pytest suite
//! (python/tests) against real PydanticAI, as `cargo xtask ci` does after the Rust tests.
//!
//! The test packages (python/tests/requirements.txt: pydantic-ai-slim with the OpenAI SDK,
//! maturin, pytest, all pinned) are installed once into a virtualenv in the CI cache
//! (`${PROVRUN_CI_CACHE:-~/.cache/provrun-ci}/provrun-python-…`, keyed by the pinned
//! PydanticAI version and remade when the requirements change). Each run then builds the
//! `provrun` binary and the wheel (`maturin build --profile dev`: the workspace's compiled
//! dependencies are reused, so it takes seconds, not a release build's minutes), installs
//! the wheel into a throwaway virtualenv under target/ that sees the cached packages
//! through a `.pth` file, and runs pytest with `PROVRUN_BIN` naming the binary. Without
//! Python the step is skipped with a loud warning, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, root, run, setup};

/// The PydanticAI the suite is pinned to (python/tests/requirements.txt says the same).
pub(crate) const PYDANTIC_AI: &str = "2.68.0";

fn requirements() -> PathBuf {
    root().join("python/tests/requirements.txt")
}

/// The cached virtualenv with the suite's packages, made (or remade, when the pinned
/// requirements changed) when needed. Returns its `python`.
pub(crate) fn suite_venv() -> Result<PathBuf, String> {
    let venv = setup::ci_cache().join(format!("provrun-python-pydantic-ai-{PYDANTIC_AI}"));
    let python = venv.join("bin/python");
    let wanted = std::fs::read_to_string(requirements())
        .map_err(|e| format!("{}: {e}", requirements().display()))?;
    let marker = venv.join(".provrun-requirements");
    if python.exists() && std::fs::read_to_string(&marker).is_ok_and(|t| t == wanted) {
        return Ok(python);
    }
    let mut make = Command::new("python3");
    make.args(["-m", "venv", "--clear"]).arg(&venv);
    run("python: make the cached virtualenv", make)?;
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-r",
    ])
    .arg(requirements());
    run("python: install the test packages", pip)?;
    std::fs::write(&marker, wanted).map_err(|e| format!("{}: {e}", marker.display()))?;
    Ok(python)
}

/// The `site-packages` folder of the virtualenv whose interpreter is `python`.
pub(crate) fn site_packages(python: &Path) -> Result<String, String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot say where its packages are",
            python.display()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Build the binary (unless `built`, and it is there) and the wheel, install the wheel into
/// a fresh virtualenv under target/ and run pytest there.
fn build_and_test(cached: &Path, pytest_args: &[String], built: bool) -> Result<(), String> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    if !(built && target.join("debug/provrun").is_file()) {
        let mut bin = cargo();
        bin.args(["build", "--locked", "-p", "provrun-cli", "--bin", "provrun"]);
        run("python: build the provrun binary", bin)?;
    }
    let wheels = target.join("python/wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    let mut wheel = Command::new(cached.with_file_name("maturin"));
    wheel
        .current_dir(root().join("python"))
        .args(["build", "--locked", "--profile", "dev", "--interpreter"])
        .arg(cached)
        .arg("--out")
        .arg(&wheels)
        .env("CARGO_TARGET_DIR", &target);
    run("python: build the wheel (maturin, dev profile)", wheel)?;
    let built = std::fs::read_dir(&wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or("maturin built no wheel")?;
    let venv = target.join("python/venv");
    let mut make = Command::new("python3");
    make.args(["-m", "venv", "--clear", "--without-pip"])
        .arg(&venv);
    run("python: make the throwaway virtualenv", make)?;
    let python = venv.join("bin/python");
    let pth = PathBuf::from(site_packages(&python)?).join("provrun-test-packages.pth");
    std::fs::write(&pth, format!("{}\n", site_packages(cached)?))
        .map_err(|e| format!("{}: {e}", pth.display()))?;
    let mut install = Command::new(cached);
    install
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-index",
            "--target",
        ])
        .arg(site_packages(&python)?)
        .arg(&built);
    run("python: install the wheel", install)?;
    let mut pytest = Command::new(&python);
    pytest
        .current_dir(root())
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .args(pytest_args)
        .env("PROVRUN_BIN", target.join("debug/provrun"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run("python: pytest python/tests", pytest)
}

/// `cargo xtask python [PYTEST ARGS…]`; see the module docs.
pub(crate) fn python(args: &[String]) -> Result<(), String> {
    suite(args, false)
}

/// The suite as `cargo xtask ci` runs it, right after `cargo test --workspace` built the
/// `provrun` binary into the same target folder (a `cargo build -p provrun-cli` would
/// resolve other features and build much of the workspace again).
pub(crate) fn after_tests() -> Result<(), String> {
    suite(&[], true)
}

fn suite(args: &[String], built: bool) -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let cached = match suite_venv() {
        Ok(python) => python,
        Err(e) if ci => return Err(format!("python: CI must run the Python suite, but {e}")),
        Err(e) => {
            eprintln!(
                "\n==> python: WARNING: {e}; the Python package's tests are SKIPPED (CI=true fails here)"
            );
            return Ok(());
        }
    };
    build_and_test(&cached, args, built)
}

/// Makes sure the Python package's suite (`cargo xtask python`) finds its pinned packages
/// (python/tests/requirements.txt: pydantic-ai-slim, the OpenAI SDK, maturin, pytest) in
/// the cache, installing them once when missing. Under CI a failure fails; elsewhere the
/// suite is skipped loudly.
pub(crate) fn python_suite() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match suite_venv() {
        Ok(python) => {
            println!(
                "\n==> setup: the Python suite's packages are in {}; `cargo xtask python` runs for real",
                python
                    .parent()
                    .and_then(|p| p.parent())
                    .unwrap_or(&python)
                    .display()
            );
            Ok(())
        }
        Err(e) if ci => Err(format!(
            "setup: CI must run the Python package's suite, but {e}"
        )),
        Err(e) => {
            eprintln!(
                "\n==> setup: WARNING: {e}; the Python package's suite will SKIP itself (CI=true fails here)"
            );
            Ok(())
        }
    }
}
