//! Giving the owner back access to a folder a command locked: a command runs as the
//! runtime's own uid when provrun is not root, so a `chmod 000` folder it leaves under
//! `/output` or `/scratch` is the runtime's, and the runtime may open it again. Without
//! that, the quota could not be measured and every later command would be refused.

use std::io;
use std::os::fd::AsFd;

use cap_std::fs::Dir;

/// When `dir` belongs to this process's user and its owner may not read, write or search
/// it, gives the owner those rights back (the group's and others' are kept) and returns
/// `true`; `false` when there is nothing this process may or need do. The folder is
/// changed through its own descriptor (by `/proc/self/fd`), so no path is looked up and
/// no link followed: a folder swapped meanwhile is not the one changed.
pub(crate) fn restore_own_dir(dir: &Dir) -> io::Result<bool> {
    let st = rustix::fs::fstat(dir.as_fd())?;
    let mode = st.st_mode & 0o7777;
    let is_dir = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
    if !is_dir || st.st_uid != rustix::process::geteuid().as_raw() || mode & 0o700 == 0o700 {
        return Ok(false);
    }
    let link = format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dir.as_fd())
    );
    rustix::fs::chmod(link.as_str(), rustix::fs::Mode::from_raw_mode(mode | 0o700))?;
    tracing::info!(
        mode = format!("{mode:o}"),
        "gave the owner back access to a folder a command locked"
    );
    Ok(true)
}
