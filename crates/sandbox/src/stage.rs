//! Staging: copying the user's input files and folders into the input root, read-only.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::ambient_authority;
use cap_std::fs::{
    Dir, DirBuilder, DirBuilderExt, FileType, MetadataExt, OpenOptions, OpenOptionsExt,
};

use crate::error::{Result, SandboxError};
use crate::fsops::{self, kind_name, walk};
use crate::limits::Limits;
use crate::path::VirtualPath;

/// One thing to copy: a file or a directory, at a relative path under its source and under
/// the input root.
enum Item {
    Dir(Vec<String>),
    File(Vec<String>),
}

/// What one source contributes: the directory its names are relative to, and the items.
struct Plan {
    base: Dir,
    base_path: PathBuf,
    items: Vec<Item>,
    /// Apparent bytes of its files.
    bytes: u64,
}

fn host_io(op: &'static str, path: &Path, e: io::Error) -> SandboxError {
    SandboxError::io(op, path.display().to_string(), e)
}

fn utf8_name(name: &std::ffi::OsStr, full: &Path) -> Result<String> {
    name.to_str()
        .map(str::to_owned)
        .ok_or_else(|| SandboxError::StageBadName {
            source_path: full.display().to_string(),
            reason: "its name is not valid UTF-8",
        })
}

/// Copies the user's inputs into `input_root` (created if missing) and makes them read-only.
///
/// A file is staged as `<input_root>/<its name>`; a directory's contents land at the root
/// (sub-directories kept). Files are copied byte for byte, never hard-linked, and left with
/// mode 0444 (directories keep 0755 so the bundle stays removable). Everything is checked
/// before anything is copied, and refused with an error naming the host path:
/// a name already taken in the input root (by an earlier source or a file already there), a
/// symbolic link (given directly or found inside a folder: links are never followed), a FIFO,
/// device, socket or other special file, names that are not UTF-8 or cannot be written as a
/// sandbox path, and trees deeper than `limits.max_depth`.
///
/// Returns the staged files' paths relative to the input root (`/`-separated), sorted.
///
/// # Errors
///
/// [`SandboxError::StageNameClash`], [`SandboxError::StageSymlink`],
/// [`SandboxError::StageSpecialFile`], [`SandboxError::StageBadName`] or
/// [`SandboxError::TooDeep`] when an input is refused as above;
/// [`SandboxError::InputTooLarge`] when the inputs exceed `limits.max_input_bytes`; and
/// [`SandboxError::Io`] when the input root or a host file cannot be read, created or
/// copied.
pub fn stage_inputs<P: AsRef<Path>>(
    input_root: &Path,
    sources: &[P],
    limits: &Limits,
) -> Result<Vec<String>> {
    let dest = Dir::create_ambient_dir_all(input_root, ambient_authority())
        .and_then(|()| Dir::open_ambient_dir(input_root, ambient_authority()))
        .map_err(|e| host_io("opening input folder", input_root, e))?;
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for entry in dest
        .entries()
        .map_err(|e| host_io("listing", input_root, e))?
    {
        let entry = entry.map_err(|e| host_io("listing", input_root, e))?;
        taken.insert(entry.file_name().to_string_lossy().into_owned());
    }

    let root_md = dest
        .dir_metadata()
        .map_err(|e| host_io("reading", input_root, e))?;
    let root_id = (root_md.dev(), root_md.ino());
    let mut plans = Vec::with_capacity(sources.len());
    let mut total = 0u64;
    for source in sources {
        let plan = plan_source(source.as_ref(), &mut taken, limits, root_id)?;
        total = total.saturating_add(plan.bytes);
        if total > limits.max_input_bytes {
            return Err(SandboxError::InputTooLarge {
                total,
                max: limits.max_input_bytes,
            });
        }
        plans.push(plan);
    }

    let mut staged = Vec::new();
    for plan in &plans {
        for item in &plan.items {
            match item {
                Item::Dir(names) => {
                    let Some((last, parents)) = names.split_last() else {
                        continue;
                    };
                    let show = |n: &[String]| format!("/input/{}", n.join("/"));
                    let parent = walk(&dest, parents, &show, None)?;
                    let mut builder = DirBuilder::new();
                    builder.mode(0o755);
                    parent
                        .create_dir_with(last, &builder)
                        .map_err(|e| host_io("creating", &input_root.join(names.join("/")), e))?;
                }
                Item::File(names) => {
                    copy_one(&plan.base, &plan.base_path, names, &dest, input_root)?;
                    staged.push(names.join("/"));
                }
            }
        }
    }
    staged.sort();
    tracing::info!(files = staged.len(), root = %input_root.display(), "inputs staged");
    Ok(staged)
}

/// Copy `len` bytes of `src` to the empty `dst`, keeping holes where the file system
/// reports them (`SEEK_DATA` / `SEEK_HOLE`): a sparse input stays sparse. Where holes
/// cannot be found, a plain copy.
fn copy_sparse(src: &mut std::fs::File, dst: &mut std::fs::File, len: u64) -> io::Result<()> {
    use rustix::fs::{SeekFrom as Seek, seek};
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut pos = 0u64;
    let mut sparse = true;
    while pos < len {
        let data = match seek(&*src, Seek::Data(pos)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break, // only a hole from here on
            Err(_) => {
                sparse = false;
                break;
            }
        };
        let hole = seek(&*src, Seek::Hole(data)).map_or(len, |h| h.min(len));
        src.seek(SeekFrom::Start(data))?;
        dst.seek(SeekFrom::Start(data))?;
        io::copy(&mut (&mut *src).take(hole.saturating_sub(data)), dst)?;
        pos = hole.max(data + 1);
    }
    if !sparse {
        src.seek(SeekFrom::Start(0))?;
        dst.seek(SeekFrom::Start(0))?;
        io::copy(&mut (&mut *src).take(len), dst)?;
    }
    // A trailing hole: the length, without blocks.
    dst.set_len(len)
}

/// Checks one source and lists what to copy from it. `root_id` (device, inode) is the input
/// root itself, skipped if it lies inside a source folder.
fn plan_source(
    source: &Path,
    taken: &mut BTreeSet<String>,
    limits: &Limits,
    root_id: (u64, u64),
) -> Result<Plan> {
    let md = std::fs::symlink_metadata(source).map_err(|e| host_io("reading input", source, e))?;
    let ft = md.file_type();
    if ft.is_symlink() {
        return Err(SandboxError::StageSymlink {
            source_path: source.display().to_string(),
        });
    }
    if ft.is_file() {
        return plan_file(source, md.len(), taken, limits);
    }
    if !ft.is_dir() {
        return Err(SandboxError::StageSpecialFile {
            source_path: source.display().to_string(),
            kind: fsops::std_kind_name(&ft),
        });
    }
    plan_dir(source, taken, limits, root_id)
}

/// Takes `name` at the top of the input root for `source`; refused when it is taken.
fn claim(name: &str, source: &Path, taken: &mut BTreeSet<String>) -> Result<()> {
    if !taken.insert(name.to_owned()) {
        return Err(SandboxError::StageNameClash {
            name: name.to_owned(),
            source_path: source.display().to_string(),
        });
    }
    Ok(())
}

/// The plan for a source that is a file of `len` bytes: the file alone, under its name.
fn plan_file(
    source: &Path,
    len: u64,
    taken: &mut BTreeSet<String>,
    limits: &Limits,
) -> Result<Plan> {
    let name = source
        .file_name()
        .ok_or_else(|| SandboxError::StageBadName {
            source_path: source.display().to_string(),
            reason: "it has no file name",
        })?;
    let name = utf8_name(name, source)?;
    check_nameable(std::slice::from_ref(&name), source, limits)?;
    claim(&name, source, taken)?;
    let parent = match source.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let base = Dir::open_ambient_dir(&parent, ambient_authority())
        .map_err(|e| host_io("opening input folder", &parent, e))?;
    Ok(Plan {
        base,
        base_path: parent,
        items: vec![Item::File(vec![name])],
        bytes: len,
    })
}

/// One entry found in a source folder.
struct Found {
    /// Its names under the source folder.
    names: Vec<String>,
    /// Its type, links not followed.
    file_type: FileType,
    /// Its host path, for messages.
    full: PathBuf,
    /// Its apparent size.
    len: u64,
}

/// The plan for a source that is a folder: everything under it, walked depth-first,
/// directories before their contents, names sorted for a stable order.
fn plan_dir(
    source: &Path,
    taken: &mut BTreeSet<String>,
    limits: &Limits,
    root_id: (u64, u64),
) -> Result<Plan> {
    let base = Dir::open_ambient_dir(source, ambient_authority())
        .map_err(|e| host_io("opening input folder", source, e))?;
    let mut items = Vec::new();
    let mut bytes = 0u64;
    let mut stack: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(names) = stack.pop() {
        for found in list_folder(&base, source, &names, root_id)? {
            let Found {
                names: child,
                file_type: cft,
                full,
                len,
            } = found;
            if child.len() > limits.max_depth {
                return Err(SandboxError::TooDeep {
                    path: full.display().to_string(),
                    depth: child.len(),
                    max: limits.max_depth,
                });
            }
            check_nameable(&child, &full, limits)?;
            if child.len() == 1 {
                claim(&child[0], source, taken)?;
            }
            if cft.is_symlink() {
                return Err(SandboxError::StageSymlink {
                    source_path: full.display().to_string(),
                });
            } else if cft.is_dir() {
                items.push(Item::Dir(child.clone()));
                stack.push(child);
            } else if cft.is_file() {
                bytes = bytes.saturating_add(len);
                if bytes > limits.max_input_bytes {
                    return Err(SandboxError::InputTooLarge {
                        total: bytes,
                        max: limits.max_input_bytes,
                    });
                }
                items.push(Item::File(child));
            } else {
                return Err(SandboxError::StageSpecialFile {
                    source_path: full.display().to_string(),
                    kind: kind_name(&cft),
                });
            }
        }
    }
    Ok(Plan {
        base,
        base_path: source.to_owned(),
        items,
        bytes,
    })
}

/// The entries of the folder at `names` under the source folder `base` (at host path
/// `source`), in reverse name order (the walk pops them from a stack), without the input
/// root (`root_id`) should it lie inside.
fn list_folder(
    base: &Dir,
    source: &Path,
    names: &[String],
    root_id: (u64, u64),
) -> Result<Vec<Found>> {
    let show = |n: &[String]| source.join(n.join("/")).display().to_string();
    let dir = walk(base, names, &show, None)?;
    let mut children = Vec::new();
    for entry in dir
        .entries()
        .map_err(|e| host_io("listing", &source.join(names.join("/")), e))?
    {
        let entry = entry.map_err(|e| host_io("listing", &source.join(names.join("/")), e))?;
        let mut child = names.to_vec();
        let full = source.join(names.join("/")).join(entry.file_name());
        child.push(utf8_name(&entry.file_name(), &full)?);
        let md = dir
            .symlink_metadata(entry.file_name())
            .map_err(|e| host_io("reading input", &full, e))?;
        if md.is_dir() && (md.dev(), md.ino()) == root_id {
            tracing::warn!(path = %full.display(), "not staging the input folder into itself");
            continue;
        }
        children.push(Found {
            names: child,
            file_type: md.file_type(),
            full,
            len: md.len(),
        });
    }
    children.sort_by(|a, b| b.names.cmp(&a.names));
    Ok(children)
}

/// Refuses names the sandbox could not address later (e.g. with a backslash or newline).
fn check_nameable(names: &[String], full: &Path, limits: &Limits) -> Result<()> {
    let vpath = format!("/input/{}", names.join("/"));
    match VirtualPath::parse(&vpath, limits) {
        Ok(vp) if vp.names() == names => Ok(()),
        _ => Err(SandboxError::StageBadName {
            source_path: full.display().to_string(),
            reason: "its name cannot be used in a sandbox path (a backslash, control character, `..` or an over-long name)",
        }),
    }
}

fn copy_one(
    base: &Dir,
    base_path: &Path,
    names: &[String],
    dest: &Dir,
    input_root: &Path,
) -> Result<()> {
    let src_shown = |n: &[String]| base_path.join(n.join("/")).display().to_string();
    let full = base_path.join(names.join("/"));
    let (mut src, len) = match fsops::open_read(base, names, &src_shown) {
        Ok(x) => x,
        Err(SandboxError::SymlinkRefused { link, .. }) => {
            return Err(SandboxError::StageSymlink { source_path: link });
        }
        Err(SandboxError::NotARegularFile { kind, .. }) => {
            return Err(SandboxError::StageSpecialFile {
                source_path: full.display().to_string(),
                kind,
            });
        }
        Err(e) => return Err(e),
    };
    let Some((last, parents)) = names.split_last() else {
        return Ok(());
    };
    let show = |n: &[String]| format!("/input/{}", n.join("/"));
    let parent = walk(dest, parents, &show, None)?;
    let mut opts = OpenOptions::new();
    opts.write(true)
        .create_new(true)
        .follow(FollowSymlinks::No)
        .nonblock(true)
        .mode(0o444);
    let dst_path = input_root.join(names.join("/"));
    let mut dst = parent
        .open_with(last, &opts)
        .map_err(|e| host_io("staging", &dst_path, e))?
        .into_std();
    copy_sparse(&mut src, &mut dst, len).map_err(|e| host_io("staging", &dst_path, e))?;
    dst.set_permissions(std::fs::Permissions::from_mode(0o444))
        .map_err(|e| host_io("staging", &dst_path, e))?;
    Ok(())
}
