//! `provrun cat BUNDLE DIGEST`: one blob's exact bytes on stdout, from either blob layout.

use std::io::Write as _;
use std::path::PathBuf;

use provrun_evidence::EvidenceError;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Arguments of `provrun cat`.
#[derive(Debug, clap::Args)]
pub(crate) struct CatArgs {
    /// The bundle: a folder, a .tar of one (as `batch` uploads), or its URL
    /// (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar).
    bundle: PathBuf,
    /// The blob's SHA-256: 64 lower-case hex digits, as in a blob ref's `digest.sha256`
    /// (a `sha256:` prefix is accepted).
    digest: String,
}

pub(crate) fn cat(args: &CatArgs) -> u8 {
    let hex = args.digest.strip_prefix("sha256:").unwrap_or(&args.digest);
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return fail(
            EXIT_USAGE,
            format!(
                "cat: {:?} is not a SHA-256 digest (64 lower-case hex digits)",
                args.digest
            ),
        );
    }
    let loaded = match crate::open::for_reading(&args.bundle, "cat: ", EXIT_FAILED) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let bytes = match provrun_evidence::read_blob_by_digest(loaded.dir(), hex) {
        Ok(b) => b,
        Err(e @ EvidenceError::BlobMissing { .. }) => {
            return fail(EXIT_FAILED, format!("cat: {e}"));
        }
        Err(e) => {
            return fail(
                EXIT_FAILED,
                format!("cat: the blob cannot be read intact: {e}"),
            );
        }
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(&bytes).and_then(|()| out.flush()) {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e) => fail(EXIT_FAILED, format!("cat: cannot write: {e}")),
    }
}
