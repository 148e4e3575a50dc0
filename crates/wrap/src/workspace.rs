//! A `--workspace` folder at the end of a run: its set-id bits stripped and its device
//! nodes removed on the host ([`disarm`]), then its final files copied into the bundle's
//! `output/` ([`copy_workspace`]) so that the recorder's output rules judge them as they
//! judge any run's outputs.
//!
//! The copy mirrors the recorder's walk (names in byte order, never following a link, the
//! same quota counted in the same order): a regular file that fits in what the quota has
//! left is copied; one that does not is made as a sparse file of the same length, which
//! the recorder then leaves out as `over_quota` without reading it. Symbolic links are
//! copied as links and FIFOs and sockets made again, so that the recorder records them as
//! `not_regular`; folders deeper than the recorder walks are made empty, and it records
//! them as `too_deep`. What cannot be made again or read — a device node, a file or
//! folder provrun may not read (`chmod 000`, when provrun is not root) — is left out and
//! described for an `output_skipped` event of its own (`not_regular`, `unreadable`), and
//! the copy goes on with the rest. The copy itself changes nothing in the workspace.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use provrun_evidence::{OutputSkipped, escape_path_bytes};

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
    /// Entries that could not be made again or read, not in the bundle (each also in
    /// [`CopyReport::left_out`]).
    pub not_copied: Vec<String>,
}

/// What [`copy_workspace`] did, and what it left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// The counts.
    pub copied: Copied,
    /// The entries left out, each as the `output_skipped` event that records it (in path
    /// order), to be recorded just before the bundle is finished.
    pub left_out: Vec<OutputSkipped>,
}

/// Copies the tree under `from` into `to` (an empty folder), with `quota` bytes for the
/// regular files with UTF-8 paths, taken in path order.
///
/// # Errors
///
/// The I/O error of reading `from` itself or making an entry under `to`.
pub fn copy_tree(from: &Path, to: &Path, quota: u64) -> io::Result<Copied> {
    copy_workspace(from, to, quota).map(|r| r.copied)
}

/// [`copy_tree`], with what it left out described.
///
/// # Errors
///
/// The I/O error of reading `from` itself or making an entry under `to` (an entry of
/// `from` that cannot be read is left out, not an error).
pub fn copy_workspace(from: &Path, to: &Path, quota: u64) -> io::Result<CopyReport> {
    let mut report = CopyReport::default();
    let mut budget = quota;
    walk(from, to, &[], 0, &mut budget, &mut report)?;
    Ok(report)
}

/// Records `rel` as left out, for `reason`.
fn leave_out(report: &mut CopyReport, rel: &[u8], kind: &str, reason: &str, size: Option<u64>) {
    report
        .copied
        .not_copied
        .push(String::from_utf8_lossy(rel).into_owned());
    report.left_out.push(OutputSkipped {
        path: escape_path_bytes(rel),
        path_hex: hex::encode(rel),
        kind: kind.to_owned(),
        reason: reason.to_owned(),
        size,
    });
}

fn walk(
    from: &Path,
    to: &Path,
    prefix: &[u8],
    depth: usize,
    budget: &mut u64,
    report: &mut CopyReport,
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
            Err(_) => {
                leave_out(report, &rel, "unknown", "unreadable", None);
                continue;
            }
        };
        let utf8 = std::str::from_utf8(&rel).is_ok();
        let kind = meta.file_type();
        if kind.is_dir() {
            if utf8 && depth < MAX_DEPTH && fs::read_dir(&src).is_err() {
                // A folder provrun may not read is left out whole, as the recorder leaves
                // out one it cannot read.
                leave_out(report, &rel, "directory", "unreadable", None);
                continue;
            }
            fs::create_dir(&dst)?;
            if !utf8 || depth + 1 > MAX_DEPTH {
                report.copied.left_for_the_recorder += 1;
                continue;
            }
            walk(&src, &dst, &rel, depth + 1, budget, report)?;
        } else if kind.is_file() {
            let size = meta.len();
            if utf8 && size <= *budget {
                match copy_file(&src, &dst) {
                    Ok(()) => {
                        *budget -= size;
                        report.copied.files += 1;
                        report.copied.bytes += size;
                    }
                    Err(_) => {
                        let _ = fs::remove_file(&dst);
                        leave_out(report, &rel, "file", "unreadable", Some(size));
                    }
                }
            } else {
                fs::File::create(&dst)?.set_len(size)?;
                report.copied.left_for_the_recorder += 1;
            }
        } else if kind.is_symlink() {
            match fs::read_link(&src) {
                Ok(target) => {
                    std::os::unix::fs::symlink(target, &dst)?;
                    report.copied.left_for_the_recorder += 1;
                }
                Err(_) => leave_out(report, &rel, "symlink", "unreadable", None),
            }
        } else if kind.is_fifo() {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &dst,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )?;
            report.copied.left_for_the_recorder += 1;
        } else if kind.is_socket() {
            // A bound socket leaves its file behind when the listener goes.
            drop(std::os::unix::net::UnixListener::bind(&dst)?);
            report.copied.left_for_the_recorder += 1;
        } else {
            let kind = if kind.is_char_device() {
                "char_device"
            } else if kind.is_block_device() {
                "block_device"
            } else {
                "unknown"
            };
            leave_out(report, &rel, kind, "not_regular", None);
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

/// What [`disarm`] changed in a workspace on the host.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Disarmed {
    /// Regular files whose set-uid or set-gid bit was cleared (paths relative to the
    /// workspace, lossy UTF-8).
    pub set_id_cleared: Vec<String>,
    /// Device nodes removed, each as the `output_skipped` event that records it.
    pub devices_removed: Vec<OutputSkipped>,
    /// Entries that could not be checked or changed, with why.
    pub failed: Vec<String>,
}

/// Makes what the program left in the workspace `root` on the host harmless to the
/// host's other users, once the run has ended: clears the set-uid and set-gid bits of
/// every regular file (a copy of an interpreter left set-uid to the sandbox's user would
/// give anyone that user), and removes every device node (which the program cannot make,
/// and which has no place in a workspace). Walks without following a link, as deep as it
/// goes.
pub fn disarm(root: &Path) -> Disarmed {
    disarm_and_hand_back(root, None)
}

/// [`disarm`], and with `hand_back` = `(uid, (to_uid, to_gid))`, every entry owned by
/// `uid` (the sandbox's user, once the run is over) given to `to_uid` and `to_gid` (the
/// workspace folder's owner before the run), links themselves included: nothing of the
/// workspace stays owned by a uid a later sandbox may run as.
pub fn disarm_and_hand_back(root: &Path, hand_back: Option<(u32, (u32, u32))>) -> Disarmed {
    let mut done = Disarmed::default();
    if let Some((uid, to)) = hand_back {
        give_back(root, uid, to, &mut done, ".");
    }
    disarm_in(root, &[], &mut done, 0, hand_back);
    done
}

/// Gives `path` (not following a link) to `to` when `uid` owns it.
fn give_back(path: &Path, uid: u32, to: (u32, u32), done: &mut Disarmed, shown: &str) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    if meta.uid() != uid {
        return;
    }
    let owner = (
        Some(rustix::fs::Uid::from_raw(to.0)),
        Some(rustix::fs::Gid::from_raw(to.1)),
    );
    if let Err(e) = rustix::fs::chownat(
        rustix::fs::CWD,
        path,
        owner.0,
        owner.1,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        done.failed.push(format!("{shown}: handing it back: {e}"));
    }
}

fn disarm_in(
    dir: &Path,
    prefix: &[u8],
    done: &mut Disarmed,
    depth: usize,
    hand_back: Option<(u32, (u32, u32))>,
) {
    let rel_of = |name: &[u8]| {
        let mut rel = prefix.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name);
        rel
    };
    let shown_dir = || {
        let shown: &[u8] = if prefix.is_empty() { b"." } else { prefix };
        String::from_utf8_lossy(shown).into_owned()
    };
    // A folder of the runtime's own that it may not list (`chmod 000`, or `0311` with a
    // set-uid file inside that others can run by name) is opened for the walk, then
    // given back its mode.
    let mut restore = None;
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(first) => {
            let opened = fs::symlink_metadata(dir)
                .ok()
                .filter(|m| m.is_dir() && m.uid() == rustix::process::geteuid().as_raw());
            let retried = opened.and_then(|m| {
                let mode = m.mode() & 0o7777;
                set_dir_mode(dir, mode | 0o700).ok()?;
                restore = Some(mode);
                fs::read_dir(dir).ok()
            });
            match retried {
                Some(e) => e,
                None => {
                    if let Some(mode) = restore {
                        let _ = set_dir_mode(dir, mode);
                    }
                    done.failed.push(format!("{}: {first}", shown_dir()));
                    return;
                }
            }
        }
    };
    for entry in entries.flatten() {
        let rel = rel_of(entry.file_name().as_bytes());
        let shown = String::from_utf8_lossy(&rel).into_owned();
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        if let Some((uid, to)) = hand_back {
            give_back(&path, uid, to, done, &shown);
        }
        if kind.is_dir() {
            // Deeper than any real tree; a loop of bind mounts would not end otherwise.
            if depth < 4096 {
                disarm_in(&path, &rel, done, depth + 1, hand_back);
            }
        } else if kind.is_file() && meta.mode() & 0o6000 != 0 {
            let mode = meta.mode() & 0o1777;
            match set_mode_no_follow(&path, mode) {
                Ok(()) => done.set_id_cleared.push(shown),
                Err(e) => done.failed.push(format!("{shown}: {e}")),
            }
        } else if kind.is_char_device() || kind.is_block_device() {
            match fs::remove_file(&path) {
                Ok(()) => done.devices_removed.push(OutputSkipped {
                    path: escape_path_bytes(&rel),
                    path_hex: hex::encode(&rel),
                    kind: if kind.is_char_device() {
                        "char_device"
                    } else {
                        "block_device"
                    }
                    .to_owned(),
                    reason: "not_regular".to_owned(),
                    size: None,
                }),
                Err(e) => done.failed.push(format!("{shown}: {e}")),
            }
        }
    }
    if let Some(mode) = restore
        && let Err(e) = set_dir_mode(dir, mode)
    {
        done.failed.push(format!(
            "{}: its mode could not be restored: {e}",
            shown_dir()
        ));
    }
}

/// `chmod` of a folder, not following a link.
fn set_dir_mode(dir: &Path, mode: u32) -> io::Result<()> {
    let fd = rustix::fs::open(
        dir,
        rustix::fs::OFlags::PATH
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    rustix::fs::chmodat(
        rustix::fs::CWD,
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)),
        rustix::fs::Mode::from_raw_mode(mode),
        rustix::fs::AtFlags::empty(),
    )?;
    Ok(())
}

/// `chmod` of a regular file opened without following a link (the entry cannot be swapped
/// for a link to a file elsewhere between the look and the change).
fn set_mode_no_follow(path: &Path, mode: u32) -> io::Result<()> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Ok(());
    }
    // `fchmod` does not take an `O_PATH` descriptor; its `/proc/self/fd` link does.
    rustix::fs::chmodat(
        rustix::fs::CWD,
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)),
        rustix::fs::Mode::from_raw_mode(mode),
        rustix::fs::AtFlags::empty(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

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

    #[test]
    fn set_id_bits_are_cleared_on_the_host_and_nothing_else_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        fs::create_dir(ws.join("bin")).unwrap();
        fs::write(ws.join("bin/python"), "x").unwrap();
        fs::set_permissions(ws.join("bin/python"), fs::Permissions::from_mode(0o6755)).unwrap();
        fs::write(ws.join("plain"), "x").unwrap();
        fs::set_permissions(ws.join("plain"), fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("/usr/bin/passwd", ws.join("link")).unwrap();
        let done = disarm(ws);
        assert_eq!(done.set_id_cleared, ["bin/python"]);
        assert!(done.failed.is_empty(), "{done:?}");
        let mode = |p: &str| fs::metadata(ws.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("bin/python"), 0o755);
        assert_eq!(mode("plain"), 0o640);
        // A link is not followed.
        assert!(
            fs::symlink_metadata(ws.join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
