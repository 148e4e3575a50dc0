//! The one error type of the sandbox: every refusal names the rule the request broke.

use std::io;

/// Everything that can go wrong in a sandbox call, staging or construction.
///
/// The `Display` text is written for the model that sent the request: it names the path
/// (virtual, never a host path) and the rule that was broken, so a tool can pass it on as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `run_command` was refused because a confinement layer is missing on this machine.
    #[error(
        "run_command refused: this machine lacks confinement layer(s): {missing}. Commands run \
         only fully confined unless the agent spec sets `allow_degraded_sandbox = true`"
    )]
    ConfinementMissing {
        /// Each missing layer and why.
        missing: String,
    },

    /// The runtime runs as root, commands are to run as a dedicated unprivileged user
    /// (`Limits::command_uid`), and that user cannot run them: bubblewrap cannot build the
    /// sandbox as that user (most often: unprivileged user namespaces are not allowed), or
    /// the runtime's own user namespace does not map the uid. Refused rather than run as
    /// root on the host.
    #[error(
        "run_command refused: commands run as uid {uid} (gid {gid}) when provrun runs as root, \
         and that user cannot run them here: {reason}. Allow unprivileged user namespaces, or \
         map the uid into provrun's user namespace (see docs/sandbox.md; `provrun doctor` \
         checks both), or set `command_uid = 0` in [limits] to run commands as root on the \
         host (recorded in the evidence)"
    )]
    CommandUserUnavailable {
        /// The host uid commands were to run as.
        uid: u32,
        /// The host gid commands were to run as.
        gid: u32,
        /// What bubblewrap (or starting it) answered.
        reason: String,
    },

    /// The process trail could not be recorded for a command (its tracer could not
    /// start or attach, e.g. `ptrace` is forbidden here): the command was not run.
    #[error(
        "the process trail cannot be recorded, so the command was not run: {reason} (the \
         trail needs ptrace from the runtime's user; allow_degraded_sandbox runs commands \
         without it, on record)"
    )]
    TrailUnavailable {
        /// What went wrong.
        reason: String,
    },

    /// Two host folders of a run overlap (one is equal to or inside the other).
    #[error(
        "{first} {how} {second}: the bundle, the folder /scratch is made in (TMPDIR), each \
         input and the host folder must be separate folders, none inside another"
    )]
    RootsOverlap {
        /// The first root and its path.
        first: String,
        /// How they overlap ("is inside", "is the same folder as").
        how: String,
        /// The second root and its path.
        second: String,
    },

    /// A host folder of a run cannot be resolved (to compare it with the others).
    #[error("{root} `{path}` cannot be used: {message}")]
    RootUnusable {
        /// Which root.
        root: String,
        /// Its path as given.
        path: String,
        /// What is wrong.
        message: String,
    },

    /// A command, one of its arguments or its environment holds a NUL byte, which no
    /// program can be given: refused before anything is started.
    #[error("the command's {what} contains a NUL byte, which a command cannot contain")]
    NulInCommand {
        /// What held it: `command line` or `environment`.
        what: &'static str,
    },

    /// The inputs to stage are larger, together, than `Limits::max_input_bytes`.
    #[error(
        "the inputs hold {total} bytes, over the input limit of {max} bytes (raise `max_input_bytes` in [limits], or pass --max-input-bytes)"
    )]
    InputTooLarge {
        /// Apparent bytes of the inputs planned so far (at least this many).
        total: u64,
        /// The limit.
        max: u64,
    },

    /// The confined command could not be started or watched.
    #[error("the command could not be run: {message}")]
    CommandStart {
        /// What went wrong.
        message: String,
    },

    /// The path was empty.
    #[error("the path is empty: give a path under /input, /output or /scratch")]
    EmptyPath,

    /// The whole path is longer than `Limits::max_path_bytes`.
    #[error("path `{path}` is too long: {len} bytes, the limit is {max}")]
    PathTooLong {
        /// The path, cut short for display.
        path: String,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },

    /// One component of the path is longer than `Limits::max_name_bytes`.
    #[error("a name in path `{path}` is too long: {len} bytes, the limit is {max}")]
    NameTooLong {
        /// The path, cut short for display.
        path: String,
        /// The length of the long name in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },

    /// The path holds a NUL byte.
    #[error("path `{path}` contains a NUL byte, which no path may contain")]
    NulByte {
        /// The path with the NUL shown as `\0`.
        path: String,
    },

    /// The path holds a control character (newline, tab, escape, …).
    #[error("path `{path}` contains a control character, which sandbox paths may not contain")]
    ControlCharacter {
        /// The path with control characters escaped.
        path: String,
    },

    /// The path holds a backslash.
    #[error(
        "path `{path}` contains a backslash: use `/` to separate names; backslashes are not allowed"
    )]
    Backslash {
        /// The path.
        path: String,
    },

    /// The path is a URL (`file://…` or any `scheme://`).
    #[error("path `{path}` is a URL: give a plain path under /input, /output or /scratch")]
    UrlScheme {
        /// The path.
        path: String,
    },

    /// The path starts with `~` (a home directory).
    #[error(
        "path `{path}` refers to a home directory (`~`): give a path under /input, /output or /scratch"
    )]
    HomeDirectory {
        /// The path.
        path: String,
    },

    /// An absolute path that does not start with one of the three roots.
    #[error("path `{path}` is outside the sandbox: it must start with /input, /output or /scratch")]
    OutsideSandbox {
        /// The path.
        path: String,
    },

    /// An absolute path whose first name only looks like a root (other case, Unicode
    /// look-alike letters, invisible characters, full-width forms).
    #[error(
        "path `{path}` starts with `/{found}`, which only looks like the root /{meant}: roots are matched exactly (case-sensitive, plain ASCII)"
    )]
    LookAlikeRoot {
        /// The path.
        path: String,
        /// The first name as given.
        found: String,
        /// The root it resembles: `input`, `output` or `scratch`.
        meant: &'static str,
    },

    /// `..` would climb above the root the path starts in.
    #[error("path `{path}` uses `..` to leave the {root} root, which is not allowed")]
    Traversal {
        /// The path.
        path: String,
        /// The root it tried to leave (`/input`, `/output`, `/scratch` or `the host folder`).
        root: String,
    },

    /// More nested names than `Limits::max_depth`.
    #[error("path `{path}` is too deep: {depth} levels, the limit is {max}")]
    TooDeep {
        /// The path.
        path: String,
        /// Its depth below the root.
        depth: usize,
        /// The limit.
        max: usize,
    },

    /// A path that names a file (read, write, replace, copy) but ends with a slash (or
    /// `/.`), which only a folder's path may.
    #[error("path `{path}` ends with `/`, but a file is meant: drop the trailing slash")]
    TrailingSlash {
        /// The path as given.
        path: String,
    },

    /// A write, replace or copy into `/input`.
    #[error("path `{path}` is in /input, which is read-only: write to /output or /scratch instead")]
    InputReadOnly {
        /// The virtual path.
        path: String,
    },

    /// The path names a directory (or a root) where a file is needed.
    #[error("path `{path}` is a directory, not a file")]
    IsADirectory {
        /// The virtual path.
        path: String,
    },

    /// A name along the path, or the path itself, is not a directory where one is needed.
    #[error("path `{path}` is not a directory")]
    NotADirectory {
        /// The virtual path.
        path: String,
    },

    /// Nothing exists at the path.
    #[error("path `{path}` does not exist")]
    NotFound {
        /// The virtual path.
        path: String,
    },

    /// A symbolic link along the path: the sandbox never follows links.
    #[error("{}", symlink_message(path, link))]
    SymlinkRefused {
        /// The virtual path asked for.
        path: String,
        /// The virtual path of the link.
        link: String,
    },

    /// The path names a FIFO, device, socket or other non-regular file.
    #[error(
        "path `{path}` is a {kind}, not a regular file: only regular files can be read or written"
    )]
    NotARegularFile {
        /// The virtual path.
        path: String,
        /// What it is instead (`FIFO`, `character device`, …).
        kind: &'static str,
    },

    /// The target file has more than one hard link.
    #[error(
        "path `{path}` has {links} hard links: the sandbox does not write through a file that is linked elsewhere"
    )]
    HardLinked {
        /// The virtual path.
        path: String,
        /// Its link count.
        links: u64,
    },

    /// A whole-file operation on a file larger than it may handle.
    #[error("file `{path}` is {size} bytes, more than the {max} bytes this operation handles")]
    FileTooLarge {
        /// The virtual path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },

    /// The content to write is larger than `Limits::max_write_bytes`.
    #[error("writing {size} bytes to `{path}` exceeds the per-write limit of {max} bytes")]
    WriteTooLarge {
        /// The virtual path.
        path: String,
        /// The content size.
        size: u64,
        /// The limit.
        max: u64,
    },

    /// The write would take /output + /scratch above `Limits::max_total_bytes`.
    #[error(
        "writing `{path}` would use {needed} bytes in /output and /scratch, over the quota of {max} bytes ({used} in use)"
    )]
    QuotaBytes {
        /// The virtual path.
        path: String,
        /// Bytes in use after the write.
        needed: u64,
        /// Bytes in use before it.
        used: u64,
        /// The quota.
        max: u64,
    },

    /// The write would take /output + /scratch above `Limits::max_files`.
    #[error(
        "writing `{path}` would need {needed} files and directories in /output and /scratch, over the quota of {max}"
    )]
    QuotaFiles {
        /// The virtual path.
        path: String,
        /// Entries in use after the write.
        needed: u64,
        /// The quota.
        max: u64,
    },

    /// `read_file` was asked to start past the end of the file.
    #[error("offset {offset} is past the end of `{path}`, which has {size} bytes")]
    OffsetPastEnd {
        /// The virtual path.
        path: String,
        /// The offset asked for.
        offset: u64,
        /// The file size.
        size: u64,
    },

    /// `str_replace` on a file that is not UTF-8 text.
    #[error(
        "file `{path}` is binary (not UTF-8 text, or contains NUL bytes): str_replace edits text files only"
    )]
    BinaryFile {
        /// The virtual path.
        path: String,
    },

    /// `str_replace` with an empty `old` string.
    #[error("the text to replace is empty: give the exact text that occurs once in `{path}`")]
    EmptyPattern {
        /// The virtual path.
        path: String,
    },

    /// `str_replace` found the text zero or several times.
    #[error("found {count} matches of the text to replace in `{path}`; it must match exactly once")]
    MatchCount {
        /// The virtual path.
        path: String,
        /// How many times it occurs (overlapping occurrences counted).
        count: usize,
    },

    /// A host tool was used but the run granted no host folder.
    #[error("host file access is not granted for this run (the run spec names no host folder)")]
    HostAccessNotGranted,

    /// A host path that is not inside the granted host folder.
    #[error("host path `{path}` is outside the granted host folder: give a path relative to it")]
    OutsideHostDir {
        /// The host path as given.
        path: String,
    },

    /// `copy_to_host` aimed at a host path that is one of the sandbox's own folders (the
    /// granted host folder contains the bundle or scratch).
    #[error(
        "host path `{path}` is inside the sandbox's {root} folder: copy_to_host cannot write there"
    )]
    HostPathInSandbox {
        /// The host path as given.
        path: String,
        /// The root whose folder it is in.
        root: &'static str,
    },

    /// Staging: two inputs would land on the same name in /input.
    #[error("cannot stage `{source_path}`: the name `{name}` is already taken in /input")]
    StageNameClash {
        /// The name in /input.
        name: String,
        /// The host path being staged.
        source_path: String,
    },

    /// Staging: an input is, or contains, a symbolic link.
    #[error(
        "cannot stage `{source_path}`: it is a symbolic link, and inputs are never staged through links (pass the link's target instead)"
    )]
    StageSymlink {
        /// The host path of the link.
        source_path: String,
    },

    /// Staging: an input is, or contains, a FIFO, device, socket or other special file.
    #[error(
        "cannot stage `{source_path}`: it is a {kind}; only regular files and directories can be staged"
    )]
    StageSpecialFile {
        /// The host path.
        source_path: String,
        /// What it is.
        kind: &'static str,
    },

    /// Staging: an input has no usable file name (e.g. `/` or `..`) or a name that is not UTF-8.
    #[error("cannot stage `{source_path}`: {reason}")]
    StageBadName {
        /// The host path.
        source_path: String,
        /// Why the name is unusable.
        reason: &'static str,
    },

    /// A `Limits` value that would make the sandbox unusable.
    #[error("limit `{field}` is invalid: {reason}")]
    InvalidLimit {
        /// The field of `Limits`.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A root's handle was released while the run was idle, and the host path now names
    /// another directory than the one the sandbox was opened over.
    #[error(
        "sandbox root {root} was replaced: `{path}` is no longer the directory the sandbox was \
         opened over, so it is not used"
    )]
    RootReplaced {
        /// The root (`/input`, `/output` or `/scratch`).
        root: &'static str,
        /// The host path that now names another directory.
        path: String,
    },

    /// An operating-system error not covered by a rule above.
    #[error("{op} `{path}` failed: {source}")]
    Io {
        /// What was being done (`reading`, `writing`, `listing`, …).
        op: &'static str,
        /// The virtual (or, for setup and staging, host) path.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn symlink_message(path: &str, link: &str) -> String {
    if path == link {
        format!("path `{path}` is a symbolic link: the sandbox never follows links")
    } else {
        format!(
            "path `{path}` goes through the symbolic link `{link}`: the sandbox never follows links"
        )
    }
}

impl SandboxError {
    pub(crate) fn io(op: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        SandboxError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;
