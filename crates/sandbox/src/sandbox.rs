//! The `Sandbox` type: three cap-std roots, the quota, the optional host folder, and the
//! operations behind the built-in file tools.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::Serialize;

use crate::error::{Result, SandboxError};
use crate::fsops::{self, DirListing, Quota, Usage};
use crate::limits::Limits;
use crate::path::{Root, VirtualPath, parse_host_path};

/// A file sandbox over three host directories, seen by the agent as `/input` (read-only),
/// `/output` and `/scratch` (writable).
///
/// Each root is a cap-std [`Dir`] opened at construction, and every access is relative to
/// one of these handles, walks one name at a time, and never follows a symbolic link.
/// `/input` has no write path at all. A run that will be idle a while (waiting on a model)
/// may give the handles back with [`Sandbox::release_handles`]; the next operation opens the
/// root again by its host path and refuses it unless it is still the same directory (device
/// and inode), so a folder swapped in meanwhile is never used.
///
/// Cloning is cheap (the state is behind an `Arc`); clones share the quota. All operations
/// block on file I/O: call them from a blocking thread (`spawn_blocking` or a pool).
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
    host: Option<Arc<HostGrant>>,
    allow_degraded: bool,
    /// When set, a running command is killed, tree and all (see [`Sandbox::with_stop`]).
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

struct Inner {
    input: RootHandle,
    output: RootHandle,
    scratch: RootHandle,
    paths: RootPaths,
    limits: Limits,
    quota: Quota,
    // Declared last so the directory handles close before a temporary scratch is removed.
    _temp_scratch: Option<tempfile::TempDir>,
}

struct HostGrant {
    dir: Dir,
    path: PathBuf,
    /// The sandbox's own folders (canonical) that lie inside the host folder: never written
    /// through the host tools.
    roots_inside: Vec<(PathBuf, Root)>,
}

/// The host directories behind the three roots (for the command runner's mounts and for
/// collecting the bundle; never shown to a model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootPaths {
    /// Host directory behind `/input`.
    pub input: PathBuf,
    /// Host directory behind `/output`.
    pub output: PathBuf,
    /// Host directory behind `/scratch`.
    pub scratch: PathBuf,
}

impl RootPaths {
    /// The host directory behind `root`.
    pub fn get(&self, root: Root) -> &Path {
        match root {
            Root::Input => &self.input,
            Root::Output => &self.output,
            Root::Scratch => &self.scratch,
        }
    }
}

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

/// How [`Sandbox::read_file_as`] returns a page.
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

fn show_virtual(root: Root, names: &[String]) -> String {
    let mut s = String::from(root.as_str());
    for n in names {
        s.push('/');
        s.push_str(n);
    }
    s
}

fn show_host(names: &[String]) -> String {
    format!(
        "host:{}",
        if names.is_empty() {
            ".".to_owned()
        } else {
            names.join("/")
        }
    )
}

fn open_root(path: &Path, create: bool) -> Result<Dir> {
    let result = if create {
        Dir::create_ambient_dir_all(path, ambient_authority())
            .and_then(|()| Dir::open_ambient_dir(path, ambient_authority()))
    } else {
        Dir::open_ambient_dir(path, ambient_authority())
    };
    result.map_err(|e| SandboxError::io("opening sandbox root", path.display().to_string(), e))
}

/// Device and inode of an open directory: what "the same folder" means on reopening.
fn identity(dir: &Dir, path: &Path) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(dir).map_err(|e| {
        SandboxError::io("opening sandbox root", path.display().to_string(), e.into())
    })?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// One root's directory handle. Open from construction until [`RootHandle::release`];
/// opened again on next use, and only if it is still the directory first opened.
struct RootHandle {
    root: Root,
    path: PathBuf,
    identity: (u64, u64),
    dir: Mutex<Option<Arc<Dir>>>,
}

impl RootHandle {
    fn open(root: Root, path: &Path, create: bool) -> Result<RootHandle> {
        let dir = open_root(path, create)?;
        Ok(RootHandle {
            root,
            path: path.to_owned(),
            identity: identity(&dir, path)?,
            dir: Mutex::new(Some(Arc::new(dir))),
        })
    }

    /// The handle, reopened by path (and checked) if it was released.
    fn get(&self) -> Result<Arc<Dir>> {
        let mut slot = self.dir.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = slot.as_ref() {
            return Ok(Arc::clone(dir));
        }
        let dir = open_root(&self.path, false)?;
        if identity(&dir, &self.path)? != self.identity {
            return Err(SandboxError::RootReplaced {
                root: self.root.as_str(),
                path: self.path.display().to_string(),
            });
        }
        let dir = Arc::new(dir);
        *slot = Some(Arc::clone(&dir));
        tracing::trace!(root = self.root.as_str(), "sandbox root reopened");
        Ok(dir)
    }

    /// Closes the handle (once no operation in flight still uses it).
    fn release(&self) {
        self.dir.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Whether the handle is open now.
    fn is_open(&self) -> bool {
        self.dir.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }
}

impl Sandbox {
    /// Opens a sandbox over existing `input` and over `output` and `scratch` (created if
    /// missing), with `limits`. Files already in `output` and `scratch` count against the
    /// quota.
    pub fn new(
        input: impl AsRef<Path>,
        output: impl AsRef<Path>,
        scratch: impl AsRef<Path>,
        limits: Limits,
    ) -> Result<Sandbox> {
        Self::build(
            input.as_ref(),
            output.as_ref(),
            scratch.as_ref(),
            limits,
            None,
        )
    }

    /// Like [`Sandbox::new`], with `/scratch` on a fresh temporary directory that is removed
    /// when the last clone of the sandbox is dropped.
    pub fn with_temp_scratch(
        input: impl AsRef<Path>,
        output: impl AsRef<Path>,
        limits: Limits,
    ) -> Result<Sandbox> {
        let temp = tempfile::Builder::new()
            .prefix("provrun-scratch-")
            .tempdir()
            .map_err(|e| {
                SandboxError::io("creating scratch directory", "a temporary directory", e)
            })?;
        let scratch = temp.path().to_owned();
        Self::build(
            input.as_ref(),
            output.as_ref(),
            &scratch,
            limits,
            Some(temp),
        )
    }

    fn build(
        input: &Path,
        output: &Path,
        scratch: &Path,
        limits: Limits,
        temp: Option<tempfile::TempDir>,
    ) -> Result<Sandbox> {
        limits.check()?;
        let input_dir = RootHandle::open(Root::Input, input, false)?;
        let output_dir = RootHandle::open(Root::Output, output, true)?;
        let scratch_dir = RootHandle::open(Root::Scratch, scratch, true)?;
        let quota = Quota {
            max_bytes: limits.max_total_bytes,
            max_files: limits.max_files,
            used: Mutex::new(Usage::default()),
        };
        let inner = Inner {
            input: input_dir,
            output: output_dir,
            scratch: scratch_dir,
            paths: RootPaths {
                input: input.to_owned(),
                output: output.to_owned(),
                scratch: scratch.to_owned(),
            },
            limits,
            quota,
            _temp_scratch: temp,
        };
        let sandbox = Sandbox {
            inner: Arc::new(inner),
            host: None,
            allow_degraded: false,
            stop: None,
        };
        sandbox.recount()?;
        tracing::debug!(
            input = %input.display(),
            output = %output.display(),
            scratch = %scratch.display(),
            "sandbox opened"
        );
        Ok(sandbox)
    }

    /// Grants the host tools access to `dir` (which must exist) and nothing outside it.
    /// Without a grant, `list_host_files`, `copy_from_host` and `copy_to_host` are refused.
    pub fn with_host_dir(mut self, dir: impl AsRef<Path>) -> Result<Sandbox> {
        let dir = dir.as_ref();
        let shown = dir.display().to_string();
        let path = std::fs::canonicalize(dir)
            .map_err(|e| SandboxError::io("opening host folder", shown.clone(), e))?;
        let handle = Dir::open_ambient_dir(&path, ambient_authority())
            .map_err(|e| SandboxError::io("opening host folder", shown, e))?;
        let roots_inside = Root::ALL
            .into_iter()
            .filter_map(|root| {
                let canonical = std::fs::canonicalize(self.inner.paths.get(root)).ok()?;
                canonical.starts_with(&path).then_some((canonical, root))
            })
            .collect();
        self.host = Some(Arc::new(HostGrant {
            dir: handle,
            path,
            roots_inside,
        }));
        Ok(self)
    }

    /// Lets `run_command` run when a confinement layer is missing on this machine (the agent
    /// spec's `allow_degraded_sandbox`): every available layer is still applied, and each
    /// outcome names the missing ones. Without it, such commands are refused.
    pub fn allow_degraded_commands(mut self, allow: bool) -> Sandbox {
        self.allow_degraded = allow;
        self
    }

    /// Stop commands when `flag` is set: a command that is running when it becomes `true`
    /// (or that starts after) is killed with everything it started, and its outcome says
    /// `cancelled`. A runtime sets it when its run is cancelled.
    pub fn with_stop(mut self, flag: Arc<std::sync::atomic::AtomicBool>) -> Sandbox {
        self.stop = Some(flag);
        self
    }

    /// Whether the stop flag given to [`Sandbox::with_stop`] is set.
    pub fn stop_requested(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Whether commands may run with missing confinement layers.
    pub fn degraded_allowed(&self) -> bool {
        self.allow_degraded
    }

    /// The limits this sandbox enforces.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The host directories behind the roots.
    pub fn root_paths(&self) -> &RootPaths {
        &self.inner.paths
    }

    /// The granted host folder (canonical), if any.
    pub fn host_dir(&self) -> Option<&Path> {
        self.host.as_deref().map(|h| h.path.as_path())
    }

    /// Bytes and entries counted against the quota in /output and /scratch.
    pub fn usage(&self) -> Usage {
        self.inner.quota.usage()
    }

    /// Recounts the quota's usage from disk (after something outside the sandbox API, such as
    /// a command, changed /output or /scratch).
    pub fn recount(&self) -> Result<Usage> {
        let mut total = Usage::default();
        for root in [Root::Output, Root::Scratch] {
            let u = self.measure(root)?;
            total.bytes = total.bytes.saturating_add(u.bytes);
            total.files = total.files.saturating_add(u.files);
        }
        self.inner.quota.set(total);
        Ok(total)
    }

    /// Parses `path` with this sandbox's limits.
    pub fn parse_path(&self, path: &str) -> Result<VirtualPath> {
        VirtualPath::parse(path, &self.inner.limits)
    }

    /// Closes the handles of the three roots until an operation needs one again; for a run
    /// about to be idle (waiting on a model), so that thousands of idle runs hold no
    /// descriptors for their sandboxes. The next operation on a root opens it again by its
    /// host path and fails with [`SandboxError::RootReplaced`] if that is no longer the
    /// directory first opened. Operations in flight keep their handle until they finish.
    /// The host folder's handle (if granted) is kept.
    pub fn release_handles(&self) {
        for root in Root::ALL {
            self.handle(root).release();
        }
    }

    /// How many of the three roots have an open handle now (0 after
    /// [`Sandbox::release_handles`], until an operation needs one).
    pub fn open_handles(&self) -> usize {
        Root::ALL
            .into_iter()
            .filter(|&root| self.handle(root).is_open())
            .count()
    }

    /// Bytes and entries under one root, from disk.
    pub(crate) fn measure(&self, root: Root) -> Result<Usage> {
        fsops::scan_usage(&*self.dir(root)?, self.inner.limits.max_depth)
            .map_err(|e| SandboxError::io("measuring", root.as_str(), e))
    }

    fn handle(&self, root: Root) -> &RootHandle {
        match root {
            Root::Input => &self.inner.input,
            Root::Output => &self.inner.output,
            Root::Scratch => &self.inner.scratch,
        }
    }

    /// The open handle of `root` (reopened and checked if it was released).
    pub(crate) fn root_dir(&self, root: Root) -> Result<Arc<Dir>> {
        self.dir(root)
    }

    fn dir(&self, root: Root) -> Result<Arc<Dir>> {
        self.handle(root).get()
    }

    /// Parse the path of a file (not a folder): a trailing slash is refused.
    fn file_path(&self, path: &str) -> Result<VirtualPath> {
        let vp = self.parse_path(path)?;
        refuse_trailing_slash(path)?;
        Ok(vp)
    }

    fn writable(&self, path: &str) -> Result<VirtualPath> {
        let vp = self.file_path(path)?;
        if !vp.root().is_writable() {
            return Err(SandboxError::InputReadOnly {
                path: vp.to_string(),
            });
        }
        Ok(vp)
    }

    fn host(&self) -> Result<&HostGrant> {
        self.host
            .as_deref()
            .ok_or(SandboxError::HostAccessNotGranted)
    }

    /// Reads one page of a file as text: [`Sandbox::read_file_as`] with [`ReadAs::Text`].
    pub fn read_file(
        &self,
        path: &str,
        offset: Option<u64>,
        limit: Option<u64>,
    ) -> Result<ReadOutcome> {
        self.read_file_as(path, offset, limit, ReadAs::Text)
    }

    /// Reads one page of a file.
    ///
    /// `offset` (default 0) is a byte offset; `limit` (default and maximum
    /// `Limits::max_read_bytes`) bounds what is returned, counted on what the model
    /// receives: the page's text as a JSON string (a control character escaped as `\u0001`
    /// counts 6) or its base64. When the file goes on past the page, `truncated` is set,
    /// `next_offset` says where to continue and `note` says so in words. A text page is
    /// shortened by up to 3 bytes so as not to split a UTF-8 character. Read as text, a
    /// page holding a NUL byte or bytes that are not UTF-8 is binary: its content is not
    /// shown, only its size and SHA-256 (`binary`, `sha256`, and the note); a caller that
    /// wants the bytes asks for a base64 slice ([`ReadAs::Base64`]). An offset past the end is an error; an
    /// offset equal to the size gives an empty page.
    pub fn read_file_as(
        &self,
        path: &str,
        offset: Option<u64>,
        limit: Option<u64>,
        how: ReadAs,
    ) -> Result<ReadOutcome> {
        let vp = self.file_path(path)?;
        let root = vp.root();
        let show = |n: &[String]| show_virtual(root, n);
        let (mut file, total) = fsops::open_read(&*self.dir(root)?, vp.names(), &show)?;
        let shown = vp.to_string();
        let offset = offset.unwrap_or(0);
        if offset > total {
            return Err(SandboxError::OffsetPastEnd {
                path: shown,
                offset,
                size: total,
            });
        }
        let max = self.inner.limits.max_read_bytes;
        let asked = limit.unwrap_or(max);
        let budget = asked.min(max);
        // Base64 gives 4 characters for 3 bytes; at least one group.
        let byte_budget = match how {
            ReadAs::Text => budget,
            ReadAs::Base64 => (budget / 4 * 3).max(3),
        };
        let want = byte_budget.min(total - offset);
        if offset > 0 {
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| SandboxError::io("reading", shown.clone(), e))?;
        }
        let mut buf = Vec::with_capacity(want.min(fsops::INITIAL_BUFFER) as usize);
        (&mut file)
            .take(want)
            .read_to_end(&mut buf)
            .map_err(|e| SandboxError::io("reading", shown.clone(), e))?;
        let mut notes: Vec<String> = Vec::new();
        let (content, binary, sha256) = match how {
            ReadAs::Base64 => {
                use base64::Engine as _;
                let digest = page_digest(&buf);
                (
                    base64::engine::general_purpose::STANDARD.encode(&buf),
                    false,
                    digest,
                )
            }
            ReadAs::Text => {
                if offset + (buf.len() as u64) < total {
                    trim_partial_char(&mut buf);
                }
                if buf.contains(&0) || std::str::from_utf8(&buf).is_err() {
                    let digest = page_digest(&buf);
                    (String::new(), true, digest)
                } else {
                    let mut text = String::from_utf8(buf).unwrap_or_default();
                    // What the model receives is the text as a JSON string: cut where
                    // that would pass the budget.
                    let mut used = 0u64;
                    let mut cut = None;
                    for (i, c) in text.char_indices() {
                        used += json_len(c);
                        if used > budget {
                            cut = Some(i);
                            break;
                        }
                    }
                    if let Some(i) = cut {
                        text.truncate(i);
                        notes.push(format!(
                            "the page was shortened to {} bytes so that, escaped as JSON, it stays within {budget} characters",
                            text.len()
                        ));
                    }
                    buf = Vec::new();
                    (text, false, None)
                }
            }
        };
        let bytes = match (how, binary) {
            (ReadAs::Text, false) => content.len() as u64,
            _ => want,
        };
        drop(buf);
        let end = offset + bytes;
        let truncated = end < total;
        if truncated {
            let why = if asked > max {
                format!("the limit {asked} is above the per-read maximum of {max} bytes")
            } else if asked < total - offset {
                format!("the page size was {asked} bytes")
            } else {
                format!("at most {max} bytes are returned per read")
            };
            notes.insert(
                0,
                format!(
                    "output cut: showing bytes {offset}..{end} of {total} ({why}); call read_file with offset={end} to read on"
                ),
            );
        }
        if binary {
            notes.push(format!(
                "binary content (a NUL byte or bytes that are not UTF-8), not shown: bytes {offset}..{end} of {total}, sha256 {}",
                sha256.as_deref().unwrap_or("")
            ));
        } else if how == ReadAs::Base64 {
            notes.push(format!(
                "base64 of bytes {offset}..{end} of {total}, sha256 {}",
                sha256.as_deref().unwrap_or("")
            ));
        }
        Ok(ReadOutcome {
            path: shown,
            content,
            offset,
            bytes,
            total_size: total,
            truncated,
            next_offset: truncated.then_some(end),
            lossy: false,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            binary,
            sha256,
            encoding: how,
        })
    }

    /// Writes `content` to a file in /output or /scratch, replacing it whole.
    ///
    /// Parent directories are created inside the root. The bytes go to a temporary file in
    /// the same directory, which is then renamed over the target. Refused: /input (read-only),
    /// content over `Limits::max_write_bytes`, a target that is a link, directory, FIFO,
    /// device or socket, or has more than one hard link, any link along the path, and writes
    /// that would break the quota.
    pub fn write_file(&self, path: &str, content: impl AsRef<[u8]>) -> Result<WriteOutcome> {
        let vp = self.writable(path)?;
        self.write_vp(&vp, content.as_ref())
    }

    fn write_vp(&self, vp: &VirtualPath, content: &[u8]) -> Result<WriteOutcome> {
        let max = self.inner.limits.max_write_bytes;
        if content.len() as u64 > max {
            return Err(SandboxError::WriteTooLarge {
                path: vp.to_string(),
                size: content.len() as u64,
                max,
            });
        }
        let root = vp.root();
        let show = |n: &[String]| show_virtual(root, n);
        let w = fsops::atomic_write(
            &*self.dir(root)?,
            vp.names(),
            content,
            &show,
            Some(&self.inner.quota),
        )?;
        tracing::debug!(path = %vp, bytes = content.len(), "sandbox write");
        Ok(WriteOutcome {
            path: vp.to_string(),
            bytes: content.len() as u64,
            created: w.created,
            replaced_bytes: w.old_size,
        })
    }

    /// Replaces the one occurrence of `old` with `new` in a text file in /output or /scratch.
    ///
    /// `old` must occur exactly once (overlapping occurrences count), else the error says how
    /// many times it occurs. Refused: binary files (not UTF-8, or holding NUL bytes), an empty
    /// `old`, files or results over `Limits::max_write_bytes`, and everything `write_file`
    /// refuses.
    pub fn str_replace(&self, path: &str, old: &str, new: &str) -> Result<ReplaceOutcome> {
        let vp = self.writable(path)?;
        let shown = vp.to_string();
        if old.is_empty() {
            return Err(SandboxError::EmptyPattern { path: shown });
        }
        let root = vp.root();
        let show = |n: &[String]| show_virtual(root, n);
        let bytes = fsops::read_whole(
            &*self.dir(root)?,
            vp.names(),
            &show,
            self.inner.limits.max_write_bytes,
        )?;
        if bytes.contains(&0) {
            return Err(SandboxError::BinaryFile { path: shown });
        }
        let text = String::from_utf8(bytes).map_err(|_| SandboxError::BinaryFile {
            path: shown.clone(),
        })?;
        let (count, first) = count_overlapping(&text, old);
        let at = match (count, first) {
            (1, Some(at)) => at,
            _ => return Err(SandboxError::MatchCount { path: shown, count }),
        };
        let mut edited = String::with_capacity(text.len() - old.len() + new.len());
        edited.push_str(&text[..at]);
        edited.push_str(new);
        edited.push_str(&text[at + old.len()..]);
        let line = text[..at].matches('\n').count() + 1;
        let w = self.write_vp(&vp, edited.as_bytes())?;
        Ok(ReplaceOutcome {
            path: shown,
            line,
            bytes: w.bytes,
        })
    }

    /// Lists a directory: names sorted, each with its kind and size, at most
    /// `Limits::max_list_entries` (the listing says how many there were). Links are listed as
    /// links, never followed. `/` lists the three roots.
    pub fn list_dir(&self, path: &str) -> Result<DirListing> {
        if path.trim_end_matches('/').is_empty() && !path.is_empty() {
            return Ok(DirListing {
                path: "/".to_owned(),
                entries: Root::ALL
                    .into_iter()
                    .map(|r| fsops::DirEntryInfo {
                        name: r.name().to_owned(),
                        kind: fsops::EntryKind::Dir,
                        size: 0,
                    })
                    .collect(),
                total: 3,
                truncated: false,
            });
        }
        let vp = self.parse_path(path)?;
        let root = vp.root();
        let show = |n: &[String]| show_virtual(root, n);
        fsops::list(
            &*self.dir(root)?,
            vp.names(),
            &show,
            self.inner.limits.max_list_entries,
        )
    }

    /// Lists a directory of the granted host folder (`path` relative to it; `.` is the folder
    /// itself), like [`Sandbox::list_dir`]. Refused without a host grant.
    pub fn list_host_files(&self, path: &str) -> Result<DirListing> {
        let host = self.host()?;
        let names = parse_host_path(path, &host.path, &self.inner.limits)?;
        fsops::list(
            &host.dir,
            &names,
            &show_host,
            self.inner.limits.max_list_entries,
        )
    }

    /// Copies a regular file from the granted host folder into /output or /scratch, with the
    /// same rules and quota as `write_file`. Refused without a host grant.
    pub fn copy_from_host(&self, host_path: &str, path: &str) -> Result<CopyOutcome> {
        let host = self.host()?;
        let names = parse_host_path(host_path, &host.path, &self.inner.limits)?;
        refuse_trailing_slash(host_path)?;
        let vp = self.writable(path)?;
        let bytes = fsops::read_whole(
            &host.dir,
            &names,
            &show_host,
            self.inner.limits.max_write_bytes,
        )?;
        let w = self.write_vp(&vp, &bytes)?;
        tracing::info!(from = %show_host(&names), to = %vp, bytes = w.bytes, "copied from host");
        Ok(CopyOutcome {
            from: show_host(&names),
            to: w.path,
            bytes: w.bytes,
        })
    }

    /// Copies a regular file from the sandbox (any root) into the granted host folder,
    /// creating parent directories there and replacing an existing file atomically. The same
    /// rules as `write_file` apply on the host side (no links, no special files, no hard-linked
    /// targets, `Limits::max_write_bytes`); the sandbox quota does not. A target inside one of
    /// the sandbox's own folders (when the host folder contains the bundle) is refused, so the
    /// staged inputs cannot be rewritten from the host side. Refused without a host grant.
    pub fn copy_to_host(&self, path: &str, host_path: &str) -> Result<CopyOutcome> {
        let host = self.host()?;
        let vp = self.file_path(path)?;
        let names = parse_host_path(host_path, &host.path, &self.inner.limits)?;
        refuse_trailing_slash(host_path)?;
        let target = names.iter().fold(host.path.clone(), |p, n| p.join(n));
        if let Some((_, inside)) = host
            .roots_inside
            .iter()
            .find(|(dir, _)| target.starts_with(dir))
        {
            return Err(SandboxError::HostPathInSandbox {
                path: crate::path::shown(host_path),
                root: inside.as_str(),
            });
        }
        let root = vp.root();
        let show = |n: &[String]| show_virtual(root, n);
        let max = self.inner.limits.max_write_bytes;
        let bytes = fsops::read_whole(&*self.dir(root)?, vp.names(), &show, max)?;
        fsops::atomic_write(&host.dir, &names, &bytes, &show_host, None)?;
        tracing::info!(from = %vp, to = %show_host(&names), bytes = bytes.len(), "copied to host");
        Ok(CopyOutcome {
            from: vp.to_string(),
            to: show_host(&names),
            bytes: bytes.len() as u64,
        })
    }
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("roots", &self.inner.paths)
            .field("limits", &self.inner.limits)
            .field("host_dir", &self.host_dir())
            .field("allow_degraded", &self.allow_degraded)
            .finish()
    }
}

/// Drops an incomplete UTF-8 sequence at the end of `buf` (a page cut mid-character), as long
/// as something remains.
/// Characters `c` takes in a JSON string.
fn json_len(c: char) -> u64 {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8() as u64,
    }
}

fn trim_partial_char(buf: &mut Vec<u8>) {
    let len = buf.len();
    // Find the start of the last character: at most 3 continuation bytes back.
    let mut start = len;
    for back in 1..=4.min(len) {
        let b = buf[len - back];
        if b & 0xC0 != 0x80 {
            start = len - back;
            break;
        }
    }
    if start == len {
        return;
    }
    let lead = buf[start];
    let need = match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return,
    };
    if len - start < need && start > 0 {
        buf.truncate(start);
    }
}

/// Counts occurrences of `needle` in `hay`, overlapping ones included, and the first position.
fn count_overlapping(hay: &str, needle: &str) -> (usize, Option<usize>) {
    let mut count = 0;
    let mut first = None;
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let at = from + i;
        first.get_or_insert(at);
        count += 1;
        let step = hay[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
        if from > hay.len() {
            break;
        }
    }
    (count, first)
}

/// A file's path may not end with `/` (or `/.`): refused once it parses.
fn refuse_trailing_slash(path: &str) -> Result<()> {
    if path.ends_with('/') || path.ends_with("/.") || path == "." {
        return Err(SandboxError::TrailingSlash {
            path: crate::path::shown(path),
        });
    }
    Ok(())
}

/// The SHA-256 of a page's bytes in hex, with the `digest` feature (on in every runtime
/// build); `None` in the light build without it.
fn page_digest(bytes: &[u8]) -> Option<String> {
    #[cfg(feature = "digest")]
    {
        Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes)))
    }
    #[cfg(not(feature = "digest"))]
    {
        let _ = bytes;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_matches_count() {
        assert_eq!(count_overlapping("aaa", "aa"), (2, Some(0)));
        assert_eq!(count_overlapping("abc", "x"), (0, None));
        assert_eq!(count_overlapping("héllo héllo", "héllo"), (2, Some(0)));
    }

    #[test]
    fn partial_chars_are_trimmed() {
        let mut b = "aé".as_bytes()[..2].to_vec();
        trim_partial_char(&mut b);
        assert_eq!(b, b"a");
        let mut b = "aé".as_bytes().to_vec();
        trim_partial_char(&mut b);
        assert_eq!(b, "aé".as_bytes());
        let mut b = "€".as_bytes()[..2].to_vec();
        trim_partial_char(&mut b);
        assert_eq!(b.len(), 2, "nothing left to keep, so the bytes stay");
    }
}
