//! [`verify`]: `provrun verify`'s checks of a bundle folder, for Python.

use pyo3::prelude::*;

use crate::error::to_json;

/// Verify the bundle folder `path` offline; returns the report as JSON text
/// (`{"ok", "complete", "status"?, "checks": [{"code", "status", "detail"}]}`, exactly
/// what `provrun verify --json` prints), which `provrun.verify` turns into objects.
#[pyfunction]
pub(crate) fn verify(py: Python<'_>, path: std::path::PathBuf) -> String {
    let report = py.detach(|| provrun_evidence::verify(&path));
    to_json(&report)
}
