//! Reading in the sandbox: a page of a file as text or base64, bounded by what the model
//! receives ([`Sandbox::read_file_as`]), and a folder's listing.

use std::io::{Read, Seek, SeekFrom};

use super::{ReadAs, ReadOutcome, Sandbox, show_virtual};
use crate::error::{Result, SandboxError};
use crate::fsops::{self, DirListing};
use crate::path::Root;

impl Sandbox {
    /// Reads one page of a file as text: [`Sandbox::read_file_as`] with [`ReadAs::Text`].
    ///
    /// # Errors
    ///
    /// As [`Sandbox::read_file_as`].
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
    ///
    /// # Errors
    ///
    /// A path error for a bad `path` or a trailing slash; [`SandboxError::NotFound`],
    /// [`SandboxError::IsADirectory`], [`SandboxError::SymlinkRefused`] or
    /// [`SandboxError::NotARegularFile`] for what is there; [`SandboxError::OffsetPastEnd`] for
    /// an offset past the end; [`SandboxError::Io`] when reading fails.
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
        let buf = read_bytes(&mut file, offset, want, &shown)?;
        let mut notes: Vec<String> = Vec::new();
        let (content, binary, sha256) = match how {
            ReadAs::Base64 => base64_page(buf),
            ReadAs::Text => {
                let more = offset + (buf.len() as u64) < total;
                text_page(buf, more, budget, &mut notes)
            }
        };
        let bytes = match (how, binary) {
            (ReadAs::Text, false) => content.len() as u64,
            _ => want,
        };
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

    /// Lists a directory: names sorted, each with its kind and size, at most
    /// `Limits::max_list_entries` (the listing says how many there were). Links are listed as
    /// links, never followed. `/` lists the three roots.
    ///
    /// # Errors
    ///
    /// A path error for a bad `path`; [`SandboxError::NotFound`],
    /// [`SandboxError::NotADirectory`] or [`SandboxError::SymlinkRefused`] for what is there;
    /// [`SandboxError::Io`] when listing fails.
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
}

/// Characters `c` takes in a JSON string.
fn json_len(c: char) -> u64 {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8() as u64,
    }
}

/// Drops an incomplete UTF-8 sequence at the end of `buf` (a page cut mid-character), as long
/// as something remains.
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

/// Reads `want` bytes of `file` from `offset` (`shown` names it in an error).
fn read_bytes(file: &mut std::fs::File, offset: u64, want: u64, shown: &str) -> Result<Vec<u8>> {
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| SandboxError::io("reading", shown.to_owned(), e))?;
    }
    let mut buf = Vec::with_capacity(want.min(fsops::INITIAL_BUFFER) as usize);
    file.take(want)
        .read_to_end(&mut buf)
        .map_err(|e| SandboxError::io("reading", shown.to_owned(), e))?;
    Ok(buf)
}

/// A page read as base64: its content, never binary, and its SHA-256.
fn base64_page(buf: Vec<u8>) -> (String, bool, Option<String>) {
    use base64::Engine as _;
    let digest = page_digest(&buf);
    (
        base64::engine::general_purpose::STANDARD.encode(&buf),
        false,
        digest,
    )
}

/// A page read as text: its content, whether it is binary, and its SHA-256 (for a binary
/// page only, whose content is not shown). When `more` follows the page, a character cut
/// at its end is left for the next page. Text is cut where, escaped as a JSON string, it
/// would pass `budget` characters, and a note says so.
fn text_page(
    mut buf: Vec<u8>,
    more: bool,
    budget: u64,
    notes: &mut Vec<String>,
) -> (String, bool, Option<String>) {
    if more {
        trim_partial_char(&mut buf);
    }
    if buf.contains(&0) || std::str::from_utf8(&buf).is_err() {
        let digest = page_digest(&buf);
        return (String::new(), true, digest);
    }
    let mut text = String::from_utf8(buf).unwrap_or_default();
    // What the model receives is the text as a JSON string: cut where that would pass
    // the budget.
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
    (text, false, None)
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
