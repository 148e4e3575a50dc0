//! The payloads of what the runtime observes a program do besides its traffic: each
//! process it started (`process_ran`) and how each trail of them ended
//! (`trail_recorded`), each file of a wrapped program's workspace it changed
//! (`file_changed`) and the change as a whole (`workspace_changed`), and each tool call
//! seen on the wire (`tool_call_seen`). All are `observed`: the runtime saw them itself.

use serde::{Deserialize, Serialize};

use super::{BlobRef, EventType, Payload};

fn is_false(b: &bool) -> bool {
    !*b
}

/// Which trail a process belongs to: a tool call's command, a wrapped program, or an MCP
/// stdio server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrailOwner {
    /// `command` (a `run_command` or manifest command tool's call), `program` (the program
    /// `provrun wrap` ran) or `mcp_server` (a stdio MCP server).
    pub kind: String,
    /// For a command: the call's `call_id`, as in its `tool_called` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// For a command: the call's `run_call_id`, as in its `tool_called` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_call_id: Option<String>,
    /// For an MCP server: its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// How many arguments and bytes an argument vector had, when the record holds less.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgvTotal {
    /// Arguments in all.
    pub args: u64,
    /// Bytes in all.
    pub bytes: u64,
}

/// Payload of `process_ran`: one program image that ran in a sandbox (a process from the
/// exec that loaded it, or from its fork for a process's first image, until it exited or
/// execed another), as the kernel reported it to the tracer outside the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRan {
    /// The trail it belongs to.
    pub owner: TrailOwner,
    /// Its number in the trail, from 1.
    pub id: u64,
    /// The image that started it (forked its process, or was replaced by it); `null` for
    /// the trail's first.
    pub parent: Option<u64>,
    /// Its process id, as the host numbers processes.
    pub pid: u32,
    /// Loaded by an exec (false: a fork that exited without one, running its parent's
    /// image).
    pub exec: bool,
    /// Its arguments, capped, known secrets masked.
    pub argv: Vec<String>,
    /// How many arguments and bytes there were, when `argv` was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv_cut: Option<ArgvTotal>,
    /// The executable, as the sandbox names it.
    pub exe: String,
    /// SHA-256 hex of the executable's bytes, as mapped.
    pub exe_sha256: Option<String>,
    /// The executable's size.
    pub exe_size: Option<u64>,
    /// Why the executable was not hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe_error: Option<String>,
    /// The working folder at the exec.
    pub cwd: Option<String>,
    /// The user, as the host numbers users.
    pub uid: Option<u32>,
    /// When it began (RFC 3339 UTC, microseconds).
    pub started: String,
    /// When it ended; `null` when the trail ended first.
    pub ended: Option<String>,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// Ended by exec of another image in the same process.
    #[serde(default, skip_serializing_if = "is_false")]
    pub replaced: bool,
}
impl Payload for ProcessRan {
    const TYPE: EventType = EventType::ProcessRan;
}

/// Payload of `trail_recorded`: how one trail ended, after its `process_ran` events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrailRecorded {
    /// The trail.
    pub owner: TrailOwner,
    /// How processes were observed: `ptrace`.
    pub mechanism: String,
    /// Images recorded (`process_ran` events).
    pub processes: u64,
    /// Images counted but not recorded, over the cap.
    pub not_recorded: u64,
    /// Execs in the trail, recorded or not.
    pub execs: u64,
    /// Processes forked in the trail, recorded or not.
    pub forks: u64,
    /// The tracer followed the tree to its last process's end.
    pub complete: bool,
    /// What went wrong, when it did.
    pub error: Option<String>,
}
impl Payload for TrailRecorded {
    const TYPE: EventType = EventType::TrailRecorded;
}

/// Payload of `file_changed`: one entry of a wrapped program's workspace that it created,
/// modified or deleted, compared with the workspace when the program started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChanged {
    /// Path relative to the workspace (as `output_produced` paths are), `/`-separated,
    /// escaped as `output_skipped.path` is when not UTF-8.
    pub path: String,
    /// `created`, `modified` or `deleted`.
    pub change: String,
    /// What it is (after the change, or before a deletion): `file`, `symlink` or `other`.
    pub kind: String,
    /// SHA-256 hex before (a link: of its target text); `null` when created or not hashed.
    pub before_sha256: Option<String>,
    /// SHA-256 hex after; `null` when deleted or not hashed.
    pub after_sha256: Option<String>,
    /// Size before.
    pub before_size: Option<u64>,
    /// Size after.
    pub after_size: Option<u64>,
}
impl Payload for FileChanged {
    const TYPE: EventType = EventType::FileChanged;
}

/// Payload of `workspace_changed`: a wrapped program's changes to its workspace as a
/// whole, after their `file_changed` events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceChanged {
    /// Entries created.
    pub created: u64,
    /// Entries modified.
    pub modified: u64,
    /// Entries deleted.
    pub deleted: u64,
    /// Files past the snapshot's hashing budget (compared by size, inode and mtime only).
    pub unhashed: u64,
    /// The workspace was a git repository.
    pub git: bool,
    /// The change as `git diff` prints it (unified, `text/x-diff`), when it was a git
    /// repository and the diff could be made.
    pub diff: Option<BlobRef>,
    /// Why there is no diff of a git repository.
    pub diff_error: Option<String>,
}
impl Payload for WorkspaceChanged {
    const TYPE: EventType = EventType::WorkspaceChanged;
}

/// Payload of `tool_call_seen`: a tool call a wrapped program's model asked for, as the
/// response on the wire said, and the result the program sent back, as a later request on
/// the wire carried it (matched by call id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallSeen {
    /// `STEP.N`: the `N`th call of the response to model request `STEP`.
    pub run_call_id: String,
    /// The call's id on the wire.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments as the response sent them (cut to a few KiB).
    pub arguments: String,
    /// The arguments' size in bytes.
    pub arguments_size: u64,
    /// The model request (`STEP`) that first carried a result for it; `null` when none did.
    pub answered_in: Option<u64>,
    /// The result the program sent (its text, cut to a few KiB).
    pub result: Option<String>,
    /// The result's size in bytes.
    pub result_size: Option<u64>,
    /// The program marked the result an error (Anthropic's `is_error`), when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_error: Option<bool>,
}
impl Payload for ToolCallSeen {
    const TYPE: EventType = EventType::ToolCallSeen;
}
