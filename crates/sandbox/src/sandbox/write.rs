//! Writing in the sandbox: a whole file replaced atomically within the quota, and one
//! exact text replacement ([`Sandbox::str_replace`]).

use super::{ReplaceOutcome, Sandbox, WriteOutcome, show_virtual};
use crate::error::{Result, SandboxError};
use crate::fsops;
use crate::path::VirtualPath;

impl Sandbox {
    /// Writes `content` to a file in /output or /scratch, replacing it whole.
    ///
    /// Parent directories are created inside the root. The bytes go to a temporary file in
    /// the same directory, which is then renamed over the target. Refused: /input (read-only),
    /// content over `Limits::max_write_bytes`, a target that is a link, directory, FIFO,
    /// device or socket, or has more than one hard link, any link along the path, and writes
    /// that would break the quota.
    ///
    /// # Errors
    ///
    /// A path error for a bad `path`; [`SandboxError::InputReadOnly`] for `/input`;
    /// [`SandboxError::WriteTooLarge`], [`SandboxError::QuotaBytes`] or
    /// [`SandboxError::QuotaFiles`] over a limit; a refusal of the target or a link along the
    /// path (see above); [`SandboxError::Io`] when writing fails.
    pub fn write_file(&self, path: &str, content: impl AsRef<[u8]>) -> Result<WriteOutcome> {
        let vp = self.writable(path)?;
        self.write_vp(&vp, content.as_ref())
    }

    pub(super) fn write_vp(&self, vp: &VirtualPath, content: &[u8]) -> Result<WriteOutcome> {
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
    ///
    /// # Errors
    ///
    /// [`SandboxError::EmptyPattern`] for an empty `old`; [`SandboxError::BinaryFile`] for a file
    /// that is not text; [`SandboxError::MatchCount`] unless `old` occurs exactly once;
    /// [`SandboxError::FileTooLarge`] for a file over the write limit; and whatever
    /// [`Sandbox::write_file`] refuses.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_matches_count() {
        assert_eq!(count_overlapping("aaa", "aa"), (2, Some(0)));
        assert_eq!(count_overlapping("abc", "x"), (0, None));
        assert_eq!(count_overlapping("héllo héllo", "héllo"), (2, Some(0)));
    }
}
