//! `provrun redact BUNDLE --out NEW (--blob DIGEST | --path output/FILE | --match REGEX)…
//! --reason TEXT [--sign-key FILE]`: a copy of a finished bundle without the chosen
//! content, which still verifies (docs/evidence.md §8).

use std::path::PathBuf;

use provrun_evidence::EvidenceError;
use provrun_evidence::redaction::{
    RecordSigner, RedactRequest, Redaction, Removed, Selector, Signer, redact as redact_bundle,
};

use crate::{EXIT_FAILED, EXIT_USAGE, fail};

/// Arguments of `provrun redact`.
#[derive(Debug, clap::Args)]
#[command(group(
    clap::ArgGroup::new("what")
        .required(true)
        .multiple(true)
        .args(["blob", "path", "patterns"])
))]
pub(crate) struct RedactArgs {
    /// The finished bundle to redact (a folder, a .tar of one, or its URL); it must
    /// verify, and is not changed.
    bundle: PathBuf,
    /// Where to write the redacted copy: a new or empty folder.
    #[arg(long, value_name = "NEW")]
    out: PathBuf,
    /// Remove the blob with this SHA-256 (hex, or sha256:HEX) from the blob store; the
    /// events keep its digest, size and type.
    #[arg(long, value_name = "DIGEST")]
    blob: Vec<String>,
    /// Remove this input or output file (input/PATH or output/PATH); the log keeps its
    /// record.
    #[arg(long, value_name = "input/FILE|output/FILE")]
    path: Vec<String>,
    /// Remove every string of the log, every blob and every input or output file this
    /// regular expression matches (on its bytes). Refused if it also matches what must
    /// stay: an envelope field, a member name, a field verify relies on (a tool's name,
    /// a file record), the statement.
    #[arg(long = "match", value_name = "REGEX")]
    patterns: Vec<String>,
    /// Why, recorded in redactions.jsonl as it is.
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Sign the redaction record with this private key (Ed25519 or ECDSA P-256, as
    /// `provrun keygen` writes it): verify then says who redacted.
    #[arg(long, value_name = "FILE")]
    sign_key: Option<PathBuf>,
}

/// A `--blob` value as the hex digest, or why it is not one.
fn blob_digest(arg: &str) -> Result<String, String> {
    let hex = arg.strip_prefix("sha256:").unwrap_or(arg);
    if hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(hex.to_owned())
    } else {
        Err(format!(
            "--blob `{arg}`: not a SHA-256 digest (64 lower-case hex digits, or sha256:HEX)"
        ))
    }
}

pub(crate) fn redact(args: &RedactArgs) -> u8 {
    let mut blobs = Vec::new();
    for b in &args.blob {
        match blob_digest(b) {
            Ok(hex) => blobs.push(hex),
            Err(e) => return fail(EXIT_USAGE, e),
        }
    }
    if let Some(p) = args
        .path
        .iter()
        .find(|p| !(p.starts_with("input/") || p.starts_with("output/")))
    {
        return fail(
            EXIT_USAGE,
            format!("--path `{p}`: name a file as input/PATH or output/PATH"),
        );
    }
    let mut patterns = Vec::new();
    for p in &args.patterns {
        match regex::bytes::Regex::new(p) {
            Ok(re) => patterns.push(re),
            Err(e) => return fail(EXIT_USAGE, format!("--match `{p}`: {e}")),
        }
    }
    let key = match args.sign_key.as_deref().map(crate::sign::load_private_key) {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(e)) => return fail(EXIT_USAGE, format!("--sign-key: {e}")),
    };
    let loaded = match crate::open::for_reading(&args.bundle, "", EXIT_FAILED) {
        Ok(l) => l,
        Err(code) => return code,
    };
    // A bundle that does not verify is refused before anything else: exit 1, as verify.
    let report = provrun_evidence::verify(loaded.dir());
    if let Some(c) = report.failures().next() {
        return fail(
            EXIT_FAILED,
            format!(
                "the bundle does not verify ({}: {}); only a bundle that verifies is redacted",
                c.code.as_str(),
                c.detail
            ),
        );
    }
    let matchers: Vec<_> = patterns
        .iter()
        .map(|re| move |b: &[u8]| re.is_match(b))
        .collect();
    let mut selectors: Vec<Selector<'_>> = blobs.into_iter().map(Selector::Blob).collect();
    selectors.extend(args.path.iter().cloned().map(Selector::Path));
    selectors.extend(matchers.iter().map(|m| Selector::Match(m)));
    let sign = |m: &[u8]| key.as_ref().map(|k| k.sign(m)).unwrap_or_default();
    let signer = match &key {
        None => None,
        Some(k) => match k.public().to_pem() {
            Ok(pem) => Some(RecordSigner {
                signer: Signer {
                    key_id: k.public().key_id(),
                    public_key: pem,
                },
                sign: &sign,
            }),
            Err(e) => return fail(EXIT_FAILED, format!("--sign-key: {e}")),
        },
    };
    let request = RedactRequest {
        selectors,
        reason: args.reason.clone(),
        signer,
    };
    match redact_bundle(loaded.dir(), &args.out, &request) {
        Ok(outcome) => {
            out!("{}", describe(&outcome.record, &args.out));
            0
        }
        Err(e @ (EvidenceError::Redaction(_) | EvidenceError::BundleNotEmpty(_))) => {
            fail(EXIT_USAGE, e.to_string())
        }
        Err(e) => fail(EXIT_FAILED, format!("cannot redact: {e}")),
    }
}

/// One line saying what was removed and where the copy is.
fn describe(record: &Redaction, out: &std::path::Path) -> String {
    let (mut texts, mut blobs, mut files) = (0, 0, 0);
    for r in &record.removed {
        match r {
            Removed::Text { .. } => texts += 1,
            Removed::Blob { .. } => blobs += 1,
            Removed::File { .. } => files += 1,
        }
    }
    let by = match &record.signer {
        Some(s) => format!("signed by key {}", s.key_id),
        None => "unsigned".to_owned(),
    };
    crate::inert::inert(&format!(
        "redacted {texts} string(s), {blobs} blob(s), {files} file(s) into {} ({by})",
        out.display()
    ))
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_digests_are_hex_with_or_without_their_prefix() {
        let hex = "ab".repeat(32);
        assert_eq!(blob_digest(&hex).unwrap(), hex);
        assert_eq!(blob_digest(&format!("sha256:{hex}")).unwrap(), hex);
        assert!(blob_digest(&"AB".repeat(32)).is_err());
        assert!(blob_digest("abc").is_err());
    }
}
