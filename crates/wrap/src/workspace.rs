//! A `--workspace` folder's final files, copied into the bundle's `output/` so that the
//! recorder's output rules judge them as they judge any run's outputs.
//!
//! The copy mirrors the recorder's walk (names in byte order, never following a link, the
//! same quota counted in the same order): a regular file that fits in what the quota has
//! left is copied; one that does not is made as a sparse file of the same length, which
//! the recorder then leaves out as `over_quota` without reading it. Symbolic links are
//! copied as links and FIFOs and sockets made again, so that the recorder records them as
//! `not_regular`; folders deeper than the recorder walks are made empty, and it records
//! them as `too_deep`. The workspace itself is never changed.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;

/// As deep as the recorder walks `output/` (`provrun-evidence`'s outputs).
const MAX_DEPTH: usize = 64;

/// What the copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Regular files copied with their bytes.
    pub files: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Entries made only for the recorder to leave out (links, special files, files over
    /// the quota, folders too deep).
    pub left_for_the_recorder: u64,
    /// Entries that could not be made again (device nodes), not in the bundle.
    pub not_copied: Vec<String>,
}

/// Copies the tree under `from` into `to` (an empty folder), with `quota` bytes for the
/// regular files with UTF-8 paths, taken in path order.
///
/// # Errors
///
/// The I/O error of reading `from` or making an entry under `to`.
pub fn copy_tree(from: &Path, to: &Path, quota: u64) -> io::Result<Copied> {
    let mut copied = Copied::default();
    let mut budget = quota;
    walk(from, to, &[], 0, &mut budget, &mut copied)?;
    Ok(copied)
}

fn walk(
    from: &Path,
    to: &Path,
    prefix: &[u8],
    depth: usize,
    budget: &mut u64,
    copied: &mut Copied,
) -> io::Result<()> {
    let mut names: Vec<Vec<u8>> = fs::read_dir(from)?
        .map(|e| e.map(|e| e.file_name().as_bytes().to_vec()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        let mut rel = prefix.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(&name);
        let name = OsStr::from_bytes(&name);
        let (src, dst) = (from.join(name), to.join(name));
        let meta = match fs::symlink_metadata(&src) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let utf8 = std::str::from_utf8(&rel).is_ok();
        let kind = meta.file_type();
        if kind.is_dir() {
            fs::create_dir(&dst)?;
            if !utf8 || depth + 1 > MAX_DEPTH {
                copied.left_for_the_recorder += 1;
                continue;
            }
            if let Err(e) = walk(&src, &dst, &rel, depth + 1, budget, copied) {
                // What it held so far stays; the rest is said to be missing.
                copied
                    .not_copied
                    .push(format!("{}: {e}", String::from_utf8_lossy(&rel)));
            }
        } else if kind.is_file() {
            let size = meta.len();
            if utf8 && size <= *budget {
                *budget -= size;
                copy_file(&src, &dst)?;
                copied.files += 1;
                copied.bytes += size;
            } else {
                fs::File::create(&dst)?.set_len(size)?;
                copied.left_for_the_recorder += 1;
            }
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
            copied.left_for_the_recorder += 1;
        } else if kind.is_fifo() {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &dst,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )?;
            copied.left_for_the_recorder += 1;
        } else if kind.is_socket() {
            // A bound socket leaves its file behind when the listener goes.
            drop(std::os::unix::net::UnixListener::bind(&dst)?);
            copied.left_for_the_recorder += 1;
        } else {
            copied
                .not_copied
                .push(String::from_utf8_lossy(&rel).into_owned());
        }
    }
    Ok(())
}

/// Copies one regular file's bytes, opened without following a link.
fn copy_file(src: &Path, dst: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut input = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow())
        .open(src)?;
    let mut output = fs::File::create(dst)?;
    io::copy(&mut input, &mut output)?;
    Ok(())
}

/// `O_NOFOLLOW`, for `custom_flags`.
fn nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_copied_within_the_quota_and_the_rest_is_made_for_the_recorder() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("ws"), tmp.path().join("out"));
        fs::create_dir_all(from.join("sub")).unwrap();
        fs::create_dir(&to).unwrap();
        fs::write(from.join("a.txt"), "aaaa").unwrap();
        fs::write(from.join("sub/b.txt"), "bb").unwrap();
        fs::write(from.join("z.bin"), vec![0u8; 100]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", from.join("link")).unwrap();
        let copied = copy_tree(&from, &to, 10).unwrap();
        assert_eq!((copied.files, copied.bytes), (2, 6));
        assert_eq!(copied.left_for_the_recorder, 2);
        assert_eq!(fs::read(to.join("a.txt")).unwrap(), b"aaaa");
        assert_eq!(fs::read(to.join("sub/b.txt")).unwrap(), b"bb");
        // Over the quota: the same length, no bytes read.
        assert_eq!(fs::metadata(to.join("z.bin")).unwrap().len(), 100);
        assert!(
            fs::symlink_metadata(to.join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // The workspace is as it was.
        assert_eq!(fs::read(from.join("z.bin")).unwrap(), vec![0u8; 100]);
    }
}
