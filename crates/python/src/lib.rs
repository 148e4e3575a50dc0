//! The Rust core of provrun's Python package, as the extension module `provrun._core`.
//!
//! `pip install ./python` builds this crate with maturin into one stable-ABI extension
//! (CPython 3.10 and later) beside the pure-Python modules of `python/provrun/`. Everything
//! that makes the evidence trustworthy happens here, in the same code `provrun` itself
//! runs: the bundle is opened, recorded into and finished through `provrun-capture`
//! (`Run`), hashed and packed by `provrun-evidence`, tools' files go through the
//! `provrun-sandbox` file sandbox (`Sandbox`), and `verify` is `provrun verify`'s
//! check. Python keeps only the thin layer PydanticAI needs (python/provrun/).
//!
//! Values cross the boundary as JSON text (the Python side uses `json.dumps` and
//! `json.loads`), so this module stays small and every value is checked by serde here.
//! Blocking calls release the GIL.

mod error;
mod run;
mod sandbox;
mod verify;

use pyo3::prelude::*;

/// The package's version: the workspace's, which maturin also gives the wheel, so
/// `provrun.__version__`, `pip show provrun` and `run_started.builder` agree.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `run_started.builder` names unless the caller says otherwise.
pub const BUILDER: &str = concat!("provrun-python/", env!("CARGO_PKG_VERSION"));

/// The module `provrun._core`.
#[pymodule(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("EvidenceError", py.get_type::<error::EvidenceError>())?;
    m.add("SandboxError", py.get_type::<error::SandboxError>())?;
    m.add_class::<run::Run>()?;
    m.add_class::<sandbox::Sandbox>()?;
    m.add_function(wrap_pyfunction!(verify::verify, m)?)?;
    m.add("BUILDER", BUILDER)?;
    m.add("VERSION", VERSION)?;
    Ok(())
}
