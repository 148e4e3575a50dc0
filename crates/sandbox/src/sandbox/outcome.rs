//! What the file operations return: [`ReadOutcome`] (and how a page is encoded,
//! [`ReadAs`]), [`WriteOutcome`], [`ReplaceOutcome`] and [`CopyOutcome`].

use serde::Serialize;

/// What `read_file` returns: one page of a file as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadOutcome {
    /// The file, as a virtual path.
    pub path: String,
    /// The text read (empty for a binary page; base64 for [`ReadAs::Base64`]); a text page
    /// never ends in the middle of a UTF-8 character unless the file does.
    pub content: String,
    /// Byte offset the page starts at.
    pub offset: u64,
    /// Bytes of the file this page covers.
    pub bytes: u64,
    /// Size of the whole file in bytes.
    pub total_size: u64,
    /// Whether the file goes on after this page (the output was cut).
    pub truncated: bool,
    /// Where the next page starts, when `truncated`.
    pub next_offset: Option<u64>,
    /// Whether invalid UTF-8 was replaced. Always `false` now: a page that is not UTF-8
    /// is binary (see `binary`) and not shown; kept so that callers still build.
    pub lossy: bool,
    /// A sentence for the model about cuts, paging and replacements; `None` when the whole
    /// file was returned as is.
    pub note: Option<String>,
    /// Whether the page is binary (it holds a NUL byte or is not UTF-8): read as text, its
    /// bytes are not shown (`content` is empty) but described by `bytes` and `sha256`.
    pub binary: bool,
    /// SHA-256 hex of the page's bytes, for a binary page or a base64 read.
    pub sha256: Option<String>,
    /// How `content` is encoded.
    pub encoding: ReadAs,
}

/// How [`Sandbox::read_file_as`](super::Sandbox::read_file_as) returns a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadAs {
    /// As text; a binary page is described (size, digest), not shown.
    #[default]
    Text,
    /// As base64 of the page's bytes (any file).
    Base64,
}

/// What `write_file` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteOutcome {
    /// The file, as a virtual path.
    pub path: String,
    /// Bytes written.
    pub bytes: u64,
    /// Whether the file is new (false: an existing file was replaced).
    pub created: bool,
    /// Size of the file it replaced, if any.
    pub replaced_bytes: Option<u64>,
}

/// What `str_replace` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplaceOutcome {
    /// The file, as a virtual path.
    pub path: String,
    /// 1-based line where the replaced text started.
    pub line: usize,
    /// Size of the file after the edit.
    pub bytes: u64,
}

/// What `copy_from_host` and `copy_to_host` return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CopyOutcome {
    /// Where the bytes came from (`host:…` for the host folder, else a virtual path).
    pub from: String,
    /// Where they went.
    pub to: String,
    /// Bytes copied.
    pub bytes: u64,
}
