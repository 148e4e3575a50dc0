//! `provrun run --steer-file FILE`: a person steers a running agent by appending lines to
//! a file. The file is followed while the run goes on: before every model request, the
//! lines completed since the last look (those already there when the run starts
//! included) are sent to the run with [`provrun_agent::RunControl::steer_from`], one
//! message per line. Empty lines are ignored, a line not yet ended by a newline waits for
//! it, a file that does not exist yet is read once it does.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use crate::inert::inert;

/// Most bytes read from the file in one look (the rest is read at the next request).
const MAX_READ: u64 = 1024 * 1024;

/// Follows one steering file.
#[derive(Debug)]
pub(crate) struct SteerFile {
    path: PathBuf,
    /// How far the file has been read.
    offset: u64,
    /// The bytes read after the last newline: a line still being written.
    partial: Vec<u8>,
    /// The last problem reported, so it is said once, not before every request.
    reported: Option<String>,
}

impl SteerFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            partial: Vec::new(),
            reported: None,
        }
    }

    fn report(&mut self, problem: String) {
        if self.reported.as_deref() != Some(problem.as_str()) {
            eprintln!("provrun: --steer-file: {}", inert(&problem));
            self.reported = Some(problem);
        }
    }

    /// The lines completed since the last call, without their line ends; empty ones
    /// left out.
    pub(crate) fn new_lines(&mut self) -> Vec<String> {
        let shown = self.path.display().to_string();
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                self.report(format!("cannot read `{shown}`: {e}"));
                return Vec::new();
            }
        };
        let len = match file.metadata() {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => {
                self.report(format!("`{shown}` is not a regular file"));
                return Vec::new();
            }
            Err(e) => {
                self.report(format!("cannot read `{shown}`: {e}"));
                return Vec::new();
            }
        };
        if len < self.offset {
            // Rewritten shorter, not appended to: what it held before is not sent again.
            self.report(format!(
                "`{shown}` got shorter; only lines appended from now on are read"
            ));
            self.offset = len;
            self.partial.clear();
            return Vec::new();
        }
        let mut read = Vec::new();
        let got = file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.take(MAX_READ).read_to_end(&mut read));
        if let Err(e) = got {
            self.report(format!("cannot read `{shown}`: {e}"));
            return Vec::new();
        }
        self.offset += read.len() as u64;
        self.partial.extend_from_slice(&read);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        let mut lines = Vec::new();
        for raw in complete.split(|&b| b == b'\n') {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            match std::str::from_utf8(raw) {
                Ok(line) if line.trim().is_empty() => {}
                Ok(line) => lines.push(line.to_string()),
                Err(_) => self.report(format!(
                    "a line of `{shown}` is not UTF-8; it is not sent to the agent"
                )),
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_read_as_they_are_completed_and_empty_ones_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("steer.txt");
        let mut follow = SteerFile::new(path.clone());
        // Not there yet: nothing, and no error.
        assert!(follow.new_lines().is_empty());
        std::fs::write(&path, "first\n\n   \nsec").unwrap();
        assert_eq!(follow.new_lines(), vec!["first"]);
        // The unfinished line waits for its newline.
        assert!(follow.new_lines().is_empty());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"ond\r\nthird\n").unwrap();
        assert_eq!(follow.new_lines(), vec!["second", "third"]);
        assert!(follow.new_lines().is_empty());
        // A line that is not UTF-8 is left out; the next ones still come.
        f.write_all(b"\xff\xfe\nfourth\n").unwrap();
        assert_eq!(follow.new_lines(), vec!["fourth"]);
        // Rewritten shorter: the old lines are not sent again, new appends are.
        std::fs::write(&path, "x\n").unwrap();
        assert!(follow.new_lines().is_empty());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"fifth\n").unwrap();
        assert_eq!(follow.new_lines(), vec!["fifth"]);
    }
}
