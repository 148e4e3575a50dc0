//! Signing from the command line: `provrun keygen`, `provrun sign`, and the key files that
//! `run --sign-key`, `resume --sign-key` and `verify --key` read.
//!
//! Keys are Ed25519: the private key a PKCS#8 PEM file, the public key an SPKI PEM file
//! (the formats OpenSSL, securesystemslib and others read and write). A signature is a DSSE
//! envelope over `statement.json`, written to `statement.dsse.json` (docs/evidence.md).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use provrun_evidence::dsse;
use provrun_store::Location;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Arguments of `provrun keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the private key (PKCS#8 PEM, readable by its owner only); the public
    /// key (SPKI PEM) goes to the same path with `.pub` added. Neither may exist.
    #[arg(value_name = "FILE")]
    out: PathBuf,
}

/// Arguments of `provrun sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The bundle to sign; it must verify. An existing signature is replaced. A folder is
    /// signed in place, a .tar is packed again with the signature; a bucket object is
    /// refused (download it first).
    bundle: PathBuf,
    /// The private key (PKCS#8 PEM, as `provrun keygen` writes it).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
}

/// A key file's bytes, refusing anything but a small regular file.
fn read_key_file(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the {what} `{}`: {e}", path.display()))?;
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return Err(format!(
            "the {what} `{}` is not a key file (a small regular file)",
            path.display()
        ));
    }
    std::fs::read(path).map_err(|e| format!("cannot read the {what} `{}`: {e}", path.display()))
}

/// The private seed in the file at `path` (for `--sign-key` and `sign --key`).
pub(crate) fn load_private_key(path: &Path) -> Result<[u8; 32], String> {
    let bytes = read_key_file(path, "private key")?;
    dsse::parse_private_key(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The public key in the file at `path` (for `verify --key`).
pub(crate) fn load_public_key(path: &Path) -> Result<[u8; 32], String> {
    let bytes = read_key_file(path, "public key")?;
    dsse::parse_public_key(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// Sign a bundle's statement and say so on stderr; an error message on failure.
pub(crate) fn sign_bundle(bundle: &Path, seed: &[u8; 32]) -> Result<(), String> {
    let path = dsse::sign_bundle(bundle, seed).map_err(|e| format!("cannot sign: {e}"))?;
    eprintln!(
        "provrun: signed {} with key {}",
        path.display(),
        dsse::key_id(&dsse::public_key(seed))
    );
    Ok(())
}

/// Write `text` to a new file `path` (never over an existing one) with `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

pub(crate) fn keygen(args: &KeygenArgs) -> u8 {
    let mut public_path = args.out.clone().into_os_string();
    public_path.push(".pub");
    let public_path = PathBuf::from(public_path);
    for p in [&args.out, &public_path] {
        if std::fs::symlink_metadata(p).is_ok() {
            return fail(
                EXIT_USAGE,
                format!("`{}` exists; give a new file name", p.display()),
            );
        }
    }
    let made = dsse::generate_seed().and_then(|seed| {
        let public = dsse::public_key(&seed);
        Ok((
            dsse::private_key_pem(&seed)?,
            dsse::public_key_pem(&public)?,
            dsse::key_id(&public),
        ))
    });
    let (private_pem, public_pem, id) = match made {
        Ok(m) => m,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if let Err(e) = write_new(&args.out, &private_pem, 0o600) {
        return fail(
            EXIT_FAILED,
            format!("cannot write `{}`: {e}", args.out.display()),
        );
    }
    if let Err(e) = write_new(&public_path, &public_pem, 0o644) {
        let _ = std::fs::remove_file(&args.out);
        return fail(
            EXIT_FAILED,
            format!("cannot write `{}`: {e}", public_path.display()),
        );
    }
    out!("private key: {}", args.out.display());
    out!("public key:  {}", public_path.display());
    out!("key id:      {id}");
    EXIT_OK
}

pub(crate) fn sign(args: &SignArgs) -> u8 {
    let seed = match load_private_key(&args.key) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    // A folder is signed in place and a .tar packed again; a bucket object is refused.
    let location = match Location::parse(&args.bundle) {
        Ok(l) => l,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Err(e) = location.check_write_back() {
        return fail(EXIT_USAGE, format!("sign: {e}"));
    }
    let opened = match provrun_store::open_blocking(&location) {
        Ok(o) => o,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let bundle = opened.dir();
    // Sign only what checks out: a signature vouches for the bundle as it is. The old
    // signature, which this one replaces, is the one check that may fail.
    let report = provrun_evidence::verify(bundle);
    let why: Vec<String> = report
        .failures()
        .filter(|c| c.code != provrun_evidence::CheckCode::Signature)
        .map(|c| format!("{}: {}", c.code.as_str(), c.detail))
        .collect();
    if !why.is_empty() || !report.complete {
        return fail(
            EXIT_FAILED,
            format!(
                "`{}` does not verify as a finished bundle, so it is not signed{}",
                args.bundle.display(),
                if why.is_empty() {
                    " (the run never finished)".to_owned()
                } else {
                    format!(" ({})", why.join("; "))
                }
            ),
        );
    }
    if !opened.is_copy() {
        return match sign_bundle(bundle, &seed) {
            Ok(()) => EXIT_OK,
            Err(e) => fail(EXIT_FAILED, e),
        };
    }
    // A tar: sign the unpacked copy, then pack it again over the file.
    let signed = dsse::sign_bundle(bundle, &seed)
        .map_err(|e| format!("cannot sign: {e}"))
        .and_then(|_| opened.write_back().map_err(|e| e.to_string()));
    match signed {
        Ok(()) => {
            eprintln!(
                "provrun: signed {} with key {}",
                args.bundle.display(),
                dsse::key_id(&dsse::public_key(&seed))
            );
            EXIT_OK
        }
        Err(e) => fail(EXIT_FAILED, e),
    }
}
