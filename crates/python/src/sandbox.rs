//! [`Sandbox`]: provrun's file sandbox over `/input` (read-only), `/output` and
//! `/scratch`, for tools written in Python. Every path is a model's path, checked by the
//! sandbox crate's rules; a refusal raises `provrun.SandboxError` naming the rule.

use pyo3::prelude::*;

use crate::error::{BindingError, to_json};

/// The sandbox a run's tools see (`provrun._core.Sandbox`). Results come back as JSON
/// text, the same objects the built-in tools of a `provrun run` give the model.
#[pyclass(module = "provrun._core", frozen)]
pub struct Sandbox {
    inner: provrun_sandbox::Sandbox,
}

impl Sandbox {
    /// Wrap a sandbox.
    pub fn new(inner: provrun_sandbox::Sandbox) -> Self {
        Sandbox { inner }
    }
}

#[pymethods]
impl Sandbox {
    /// One page of a file as text (`offset` in bytes, `limit` at most the read limit):
    /// `{path, content, offset, bytes, total_size, truncated, next_offset, note, binary,
    /// sha256, ...}`.
    #[pyo3(signature = (path, offset=None, limit=None))]
    fn read_file(
        &self,
        py: Python<'_>,
        path: &str,
        offset: Option<u64>,
        limit: Option<u64>,
    ) -> PyResult<String> {
        let page = py
            .detach(|| self.inner.read_file(path, offset, limit))
            .map_err(BindingError::from)?;
        Ok(to_json(&page))
    }

    /// Write a whole file in `/output` or `/scratch` (through a temporary file renamed
    /// over it): `{path, bytes, created, replaced_bytes}`.
    fn write_file(&self, py: Python<'_>, path: &str, content: Vec<u8>) -> PyResult<String> {
        let out = py
            .detach(|| self.inner.write_file(path, &content))
            .map_err(BindingError::from)?;
        Ok(to_json(&out))
    }

    /// Replace the one occurrence of `old` with `new` in a text file: `{path, line, bytes}`.
    fn str_replace(&self, py: Python<'_>, path: &str, old: &str, new: &str) -> PyResult<String> {
        let out = py
            .detach(|| self.inner.str_replace(path, old, new))
            .map_err(BindingError::from)?;
        Ok(to_json(&out))
    }

    /// List a folder (`/` lists the three roots): `{path, entries: [{name, kind, size}],
    /// total, truncated}`.
    fn list_dir(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        let out = py
            .detach(|| self.inner.list_dir(path))
            .map_err(BindingError::from)?;
        Ok(to_json(&out))
    }

    /// The sandbox's limits, as JSON text.
    #[getter]
    fn limits(&self) -> String {
        to_json(self.inner.limits())
    }
}
