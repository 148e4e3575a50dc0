//! `python_overhead`: what a bundle costs a PydanticAI run, measured by
//! `crates/bench/python/overhead.py` in one Python process against the release build of
//! provrun's Python package. The wheel is built once per bench (`maturin build --release`)
//! and installed into a throwaway virtualenv under target/ that sees the Python suite's
//! cached packages (PydanticAI, pinned: `cargo xtask setup` installs them).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::dirs::target_dir;
use super::line::Line;
use crate::root;

/// The virtualenv's python with the release wheel installed, made once per bench.
pub(super) fn prepare() -> Result<PathBuf, String> {
    let cached = crate::python::suite_venv()?;
    let wheels = target_dir().join("python/wheels-release");
    let _ = std::fs::remove_dir_all(&wheels);
    eprintln!("==> bench: building provrun's Python package (maturin, release)");
    let out = Command::new(cached.with_file_name("maturin"))
        .current_dir(root().join("python"))
        .args(["build", "--locked", "--release", "--quiet", "--interpreter"])
        .arg(&cached)
        .arg("--out")
        .arg(&wheels)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .map_err(|e| format!("could not start maturin: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "maturin failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or("maturin built no wheel")?;
    let venv = target_dir().join("python/bench-venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear", "--without-pip"])
        .arg(&venv)
        .status()
        .map_err(|e| format!("python3 -m venv: {e}"))?;
    if !made.success() {
        return Err("python3 -m venv failed".into());
    }
    let python = venv.join("bin/python");
    let site = crate::python::site_packages(&python)?;
    let pth = Path::new(&site).join("provrun-test-packages.pth");
    std::fs::write(
        &pth,
        format!("{}\n", crate::python::site_packages(&cached)?),
    )
    .map_err(|e| format!("{}: {e}", pth.display()))?;
    let installed = Command::new(&cached)
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
        .arg(&site)
        .arg(&wheel)
        .status()
        .map_err(|e| format!("pip install: {e}"))?;
    if !installed.success() {
        return Err("installing the wheel failed".into());
    }
    Ok(python)
}

/// Run the scenario once; its figure line.
pub(super) fn run(python: &Path, quick: bool) -> Result<Line, String> {
    let out = Command::new(python)
        .arg(root().join("crates/bench/python/overhead.py"))
        .args(["--runs", if quick { "30" } else { "300" }, "--dir"])
        .arg(target_dir().join("bench-tmp"))
        .output()
        .map_err(|e| format!("could not start python: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python_overhead failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .ok_or("python_overhead printed no JSON")?
        .to_string();
    Ok(Line {
        name: "python_overhead".into(),
        json,
    })
}
