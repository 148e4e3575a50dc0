//! The built-in sandbox tools: thin wrappers that turn the sandbox's results into text.
//!
//! Every rule (which paths are allowed, limits, link and FIFO refusals, quotas) lives in
//! `provrun-sandbox`; these fns only translate arguments in and results out. They are
//! sync, so `acall` runs them on the blocking pool, off the async executor.

use std::fmt::Write as _;

use provrun_sandbox::{DirListing, SandboxError};

use crate::Tool;
use crate::context::RunContext;
use crate::output::ToolOutput;
use crate::tool;

/// The names of the built-in tools, sorted.
pub const BUILTIN_TOOLS: [&str; 8] = [
    "copy_from_host",
    "copy_to_host",
    "list_dir",
    "list_host_files",
    "read_file",
    "run_command",
    "str_replace",
    "write_file",
];

/// The sandbox tool set, offered under the one name `sandbox` (an agent spec's
/// `tools = ["sandbox"]` or `sandbox = true`): the file tools and `run_command`. The host
/// tools are not in it; an agent names them one by one.
pub const SANDBOX_TOOLS: [&str; 5] = [
    "read_file",
    "write_file",
    "str_replace",
    "list_dir",
    "run_command",
];

/// The name that stands for [`SANDBOX_TOOLS`] in an agent's tool list.
pub const SANDBOX_TOOL_SET: &str = "sandbox";

fn failed(e: SandboxError) -> ToolOutput {
    ToolOutput::fail(e.to_string())
}

fn render_listing(listing: &DirListing) -> String {
    let mut text = String::new();
    if listing.entries.is_empty() {
        let _ = write!(text, "{} is empty", listing.path);
        return text;
    }
    for entry in &listing.entries {
        let _ = writeln!(
            text,
            "{}{}\t{}",
            entry.name,
            entry.kind.marker(),
            entry.size
        );
    }
    if listing.truncated {
        let _ = writeln!(
            text,
            "[listing cut: showing {} of {} entries]",
            listing.entries.len(),
            listing.total
        );
    }
    text
}

/// What a tool is by being, or not being, one of the built-ins.
impl Tool {
    /// Whether this is one of the built-in tools that only read the sandbox within its size
    /// limits (`read_file`, `list_dir`, as linked, not a replacement of the same name).
    /// A runtime may call such a tool with [`Tool::call`] right on its async task, as it
    /// does its own small evidence writes, instead of handing it to the blocking pool: the
    /// hand-off would cost more than the call.
    pub fn is_bounded_builtin_read(&self) -> bool {
        is_bounded_read(self)
    }

    /// Whether calls of this tool only read, so that a runtime may let them overlap with
    /// each other: category `read`, not destructive, and not a tool that reaches the host
    /// folder (`list_host_files`). Every other tool, a manifest or MCP tool not marked
    /// `read` included, may conflict with other calls and runs alone, in the model's order.
    pub fn is_read_only(&self) -> bool {
        self.category() == crate::ToolCategory::Read
            && !self.is_destructive()
            && !reaches_host(self)
    }

    /// Whether a call runs a program under the sandbox's OS confinement (the built-in
    /// `run_command`, a manifest's `command` tool): its evidence then records the
    /// confinement, and `provrun verify` requires that record.
    pub fn runs_program(&self) -> bool {
        self.declared_runs_program() || is_run_command(self)
    }
}

/// Whether `tool` is the linked `read_file` or `list_dir` (see
/// [`Tool::is_bounded_builtin_read`]).
fn is_bounded_read(tool: &Tool) -> bool {
    tool.same_as(&ReadFileTool::tool()) || tool.same_as(&ListDirTool::tool())
}

/// Whether `tool` is the built-in `run_command` (as linked).
fn is_run_command(tool: &Tool) -> bool {
    tool.same_as(&RunCommandTool::tool())
}

/// Whether `tool` is one of the linked host-folder tools (see [`Tool::is_read_only`]).
fn reaches_host(tool: &Tool) -> bool {
    tool.same_as(&ListHostFilesTool::tool())
        || tool.same_as(&CopyFromHostTool::tool())
        || tool.same_as(&CopyToHostTool::tool())
}

/// Read a text file from /input, /output or /scratch (relative paths are under /scratch).
///
/// Long files are returned a page at a time: pass `offset` (bytes) to continue where the
/// previous page said it stopped.
#[tool(category = "read", summary = "Read {path}")]
pub(crate) fn read_file(
    ctx: &RunContext,
    /// The file, e.g. `/input/notes.txt`.
    #[schemars(example = "/input/notes.txt")]
    path: String,
    /// Byte offset to start reading at (default 0).
    offset: Option<u64>,
    /// Most bytes to return (default and ceiling: the run's read limit).
    limit: Option<u64>,
) -> ToolOutput {
    match ctx.sandbox().read_file(&path, offset, limit) {
        Ok(read) => {
            let mut text = read.content;
            if let Some(note) = read.note {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                let _ = write!(text, "[{note}]");
            }
            ToolOutput::succeed(text)
        }
        Err(e) => failed(e),
    }
}

/// Write a text file in /output or /scratch, replacing it if it exists.
///
/// Parent folders are created as needed. /input is read-only.
#[tool(
    destructive,
    category = "write",
    summary = "Write {path}",
    confirm = "Write {path}, replacing any existing file?"
)]
pub(crate) fn write_file(
    ctx: &RunContext,
    /// The file to write, e.g. `/output/summary.md`.
    #[schemars(example = "/output/summary.md")]
    path: String,
    /// The whole new content of the file.
    #[schemars(example = "# Summary\n")]
    content: String,
) -> ToolOutput {
    match ctx.sandbox().write_file(&path, content.as_bytes()) {
        Ok(w) => ToolOutput::succeed(format!(
            "{} {} ({} bytes)",
            if w.created { "created" } else { "replaced" },
            w.path,
            w.bytes
        )),
        Err(e) => failed(e),
    }
}

/// Replace one exact occurrence of `old` with `new` in a text file in /output or /scratch.
///
/// Fails, changing nothing, unless `old` occurs exactly once.
#[tool(
    destructive,
    category = "write",
    summary = "Edit {path}",
    confirm = "Edit {path}?"
)]
pub(crate) fn str_replace(
    ctx: &RunContext,
    /// The file to edit.
    path: String,
    /// The exact text to find; it must occur exactly once.
    old: String,
    /// The text to put in its place.
    new: String,
) -> ToolOutput {
    match ctx.sandbox().str_replace(&path, &old, &new) {
        Ok(r) => ToolOutput::succeed(format!(
            "replaced 1 occurrence in {} at line {} (file now {} bytes)",
            r.path, r.line, r.bytes
        )),
        Err(e) => failed(e),
    }
}

/// List a folder in /input, /output or /scratch: one entry a line, with a `/` after
/// folders and the size in bytes. Links are shown, never followed.
#[tool(category = "read", summary = "List {path}")]
pub(crate) fn list_dir(
    ctx: &RunContext,
    /// The folder, e.g. `/input`.
    #[schemars(example = "/input")]
    path: String,
) -> ToolOutput {
    match ctx.sandbox().list_dir(&path) {
        Ok(listing) => ToolOutput::succeed(render_listing(&listing)),
        Err(e) => failed(e),
    }
}

/// Run a shell command in the sandbox, with /input read-only and /output and /scratch
/// writable, no network, and a time limit.
#[tool(
    destructive,
    category = "execute",
    summary = "Run `{command}`",
    confirm = "Run `{command}`?"
)]
pub(crate) fn run_command(
    ctx: &RunContext,
    /// The command line, run by `sh -c`.
    #[schemars(example = "ls -l /input")]
    command: String,
    /// Seconds before the command and everything it started are killed (default 30).
    timeout_s: Option<u64>,
) -> ToolOutput {
    let timeout = timeout_s.map(std::time::Duration::from_secs);
    match ctx.sandbox().run_command(&command, timeout) {
        Ok(outcome) if outcome.success() => {
            ToolOutput::succeed(outcome.render()).with_confinement(&outcome.confinement)
        }
        Ok(outcome) => ToolOutput::fail(outcome.render()).with_confinement(&outcome.confinement),
        Err(e) => failed(e),
    }
}

/// List a folder in the host folder that this run was granted (refused when none was).
#[tool(category = "read", summary = "List host folder {path}")]
pub(crate) fn list_host_files(
    ctx: &RunContext,
    /// The folder, relative to the granted host folder (`.` for its root).
    #[schemars(example = ".")]
    path: String,
) -> ToolOutput {
    match ctx.sandbox().list_host_files(&path) {
        Ok(listing) => ToolOutput::succeed(render_listing(&listing)),
        Err(e) => failed(e),
    }
}

/// Copy a file from the granted host folder into /output or /scratch.
#[tool(category = "write", summary = "Copy host file {host_path} to {path}")]
pub(crate) fn copy_from_host(
    ctx: &RunContext,
    /// The file, relative to the granted host folder.
    host_path: String,
    /// Where to put it, e.g. `/scratch/data.csv`.
    #[schemars(example = "/scratch/data.csv")]
    path: String,
) -> ToolOutput {
    match ctx.sandbox().copy_from_host(&host_path, &path) {
        Ok(c) => ToolOutput::succeed(format!("copied {} to {} ({} bytes)", c.from, c.to, c.bytes)),
        Err(e) => failed(e),
    }
}

/// Copy a file from the sandbox out to the granted host folder, replacing any file there.
#[tool(
    destructive,
    category = "write",
    summary = "Copy {path} to host file {host_path}",
    confirm = "Copy {path} out to the host folder as {host_path}?"
)]
pub(crate) fn copy_to_host(
    ctx: &RunContext,
    /// The sandbox file, e.g. `/output/report.md`.
    #[schemars(example = "/output/report.md")]
    path: String,
    /// Where to put it, relative to the granted host folder.
    host_path: String,
) -> ToolOutput {
    match ctx.sandbox().copy_to_host(&path, &host_path) {
        Ok(c) => ToolOutput::succeed(format!("copied {} to {} ({} bytes)", c.from, c.to, c.bytes)),
        Err(e) => failed(e),
    }
}
