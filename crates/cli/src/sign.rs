//! Signing from the command line: `provrun keygen`, `provrun sign` (and its
//! `--model-signing` signature over the bundle's files), and the key files that
//! `run --sign-key`, `resume --sign-key`, `redact --sign-key` and `verify --key` read.
//!
//! Keys are Ed25519 (the default) or ECDSA P-256 (`keygen --algorithm ecdsa-p256`): the
//! private key a PKCS#8 PEM file, the public key an SPKI PEM file (the formats OpenSSL,
//! securesystemslib, model-signing and others read and write). A signature is a DSSE
//! envelope over `statement.json`, written to `statement.dsse.json` (docs/evidence.md).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use provrun_evidence::dsse::{self, KeyAlgorithm, PrivateKey, PublicKey};
use provrun_store::Location;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// The algorithms `provrun keygen --algorithm` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AlgorithmArg {
    /// Ed25519 (the default): what the DSSE signature and the ledger's checkpoints use.
    Ed25519,
    /// ECDSA on NIST P-256 with SHA-256: what model-signing and other NIST-only tools take.
    #[value(name = "ecdsa-p256")]
    EcdsaP256,
}

/// Arguments of `provrun keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the private key (PKCS#8 PEM, readable by its owner only); the public
    /// key (SPKI PEM) goes to the same path with `.pub` added. Neither may exist.
    #[arg(value_name = "FILE")]
    out: PathBuf,
    /// The key's algorithm: ed25519 (default; bundle signatures and ledger checkpoints) or
    /// ecdsa-p256 (bundle signatures and model-signing signatures).
    #[arg(long, value_enum, value_name = "ALGORITHM", default_value = "ed25519")]
    algorithm: AlgorithmArg,
}

/// Arguments of `provrun sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The bundle to sign; it must verify. An existing signature is replaced. A folder is
    /// signed in place, a .tar is packed again with the signature; a bucket object is
    /// refused (download it first).
    bundle: PathBuf,
    /// The private key (PKCS#8 PEM, as `provrun keygen` writes it; Ed25519 or ECDSA P-256).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Also write, to SIG (outside the bundle), a signature over every file of the bundle
    /// as it stands after signing, in the OpenSSF model-signing format (a Sigstore bundle
    /// that `model_signing verify key` checks); needs an ECDSA P-256 key.
    #[arg(long = "model-signing", value_name = "SIG")]
    model_signing: Option<PathBuf>,
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

/// The private key in the file at `path` (for `--sign-key` and `sign --key`).
pub(crate) fn load_private_key(path: &Path) -> Result<PrivateKey, String> {
    let bytes = read_key_file(path, "private key")?;
    PrivateKey::parse(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The public key in the file at `path` (for `verify --key`).
pub(crate) fn load_public_key(path: &Path) -> Result<PublicKey, String> {
    let bytes = read_key_file(path, "public key")?;
    PublicKey::parse(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// Sign a bundle's statement and say so on stderr; an error message on failure.
pub(crate) fn sign_bundle(bundle: &Path, key: &PrivateKey) -> Result<(), String> {
    let path = dsse::sign_bundle_with(bundle, key).map_err(|e| format!("cannot sign: {e}"))?;
    eprintln!(
        "provrun: signed {} with key {}",
        path.display(),
        key.public().key_id()
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
    let algorithm = match args.algorithm {
        AlgorithmArg::Ed25519 => KeyAlgorithm::Ed25519,
        AlgorithmArg::EcdsaP256 => KeyAlgorithm::EcdsaP256,
    };
    let made = PrivateKey::generate(algorithm).and_then(|key| {
        let public = key.public();
        Ok((key.to_pem()?, public.to_pem()?, public.key_id()))
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
    let key = match load_private_key(&args.key) {
        Ok(k) => k,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if args.model_signing.is_some() && key.algorithm() != KeyAlgorithm::EcdsaP256 {
        return fail(
            EXIT_USAGE,
            format!(
                "--model-signing: model-signing takes ECDSA keys on NIST curves only and `{}` \
                 is an {} key; make one with `provrun keygen FILE --algorithm ecdsa-p256`",
                args.key.display(),
                key.algorithm().as_str()
            ),
        );
    }
    // A folder is signed in place and a .tar packed again; a bucket object is refused.
    let location = match Location::parse(&args.bundle) {
        Ok(l) => l,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Err(e) = location.check_write_back() {
        return fail(EXIT_USAGE, format!("sign: {e}"));
    }
    if let Some(sig) = &args.model_signing
        && let Err(e) = check_signature_path(&args.bundle, sig)
    {
        return fail(EXIT_USAGE, e);
    }
    let opened = match provrun_store::open_blocking(&location) {
        Ok(o) => o,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let bundle = opened.dir();
    // Sign only what checks out: a signature vouches for the bundle as it is. The old
    // signature, which this one replaces, is the one check that may fail.
    if let Err(e) = check_signable(bundle, &args.bundle) {
        return fail(EXIT_FAILED, e);
    }
    let signed = dsse::sign_bundle_with(bundle, &key)
        .map_err(|e| format!("cannot sign: {e}"))
        .and_then(|_| {
            // A tar: pack the signed copy again over the file.
            if opened.is_copy() {
                opened.write_back().map_err(|e| e.to_string())
            } else {
                Ok(())
            }
        });
    if let Err(e) = signed {
        return fail(EXIT_FAILED, e);
    }
    eprintln!(
        "provrun: signed {} with key {}",
        args.bundle.display(),
        key.public().key_id()
    );
    match &args.model_signing {
        Some(sig) => match write_model_signature(bundle, &args.bundle, &key, sig) {
            Ok(()) => EXIT_OK,
            Err(e) => fail(EXIT_FAILED, e),
        },
        None => EXIT_OK,
    }
}

/// `Err` unless `bundle` verifies as a finished bundle (its old signature aside).
fn check_signable(bundle: &Path, shown: &Path) -> Result<(), String> {
    let report = provrun_evidence::verify(bundle);
    let why: Vec<String> = report
        .failures()
        .filter(|c| c.code != provrun_evidence::CheckCode::Signature)
        .map(|c| format!("{}: {}", c.code.as_str(), c.detail))
        .collect();
    if why.is_empty() && report.complete {
        return Ok(());
    }
    Err(format!(
        "`{}` does not verify as a finished bundle, so it is not signed{}",
        shown.display(),
        if why.is_empty() {
            " (the run never finished)".to_owned()
        } else {
            format!(" ({})", why.join("; "))
        }
    ))
}

/// A model-signing signature file must be outside the bundle (inside, it would be one of
/// the files it signs and an entry the bundle's layout refuses).
fn check_signature_path(bundle: &Path, sig: &Path) -> Result<(), String> {
    let absolute = |p: &Path| std::path::absolute(p).map(|a| a.components().collect::<PathBuf>());
    let (Ok(bundle_abs), Ok(sig_abs)) = (absolute(bundle), absolute(sig)) else {
        return Err(format!(
            "--model-signing: cannot resolve `{}`",
            sig.display()
        ));
    };
    let real_bundle = std::fs::canonicalize(bundle).unwrap_or(bundle_abs.clone());
    let real_sig = sig_abs
        .parent()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .zip(sig_abs.file_name())
        .map(|(p, n)| p.join(n))
        .unwrap_or(sig_abs.clone());
    if sig_abs.starts_with(&bundle_abs) || real_sig.starts_with(&real_bundle) {
        return Err(format!(
            "--model-signing: `{}` is inside the bundle; the signature goes outside it",
            sig.display()
        ));
    }
    if std::fs::metadata(sig).is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "--model-signing: `{}` is a folder; give a file name",
            sig.display()
        ));
    }
    Ok(())
}

/// Write the model-signing signature of `folder`'s files to `sig` (atomically: a file
/// beside it, synced, renamed over it). The statement names the bundle by `shown`'s last
/// component (without `.tar`).
fn write_model_signature(
    folder: &Path,
    shown: &Path,
    key: &PrivateKey,
    sig: &Path,
) -> Result<(), String> {
    let name = shown
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".tar").to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "bundle".to_owned());
    let signature = dsse::model_signature(folder, &name, key)
        .map_err(|e| format!("cannot make the model-signing signature: {e}"))?;
    let parent = sig
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(parent)
        .map_err(|e| format!("cannot write `{}`: {e}", sig.display()))?;
    temp.write_all(signature.text.as_bytes())
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| format!("cannot write `{}`: {e}", sig.display()))?;
    temp.persist(sig)
        .map_err(|e| format!("cannot write `{}`: {}", sig.display(), e.error))?;
    eprintln!(
        "provrun: wrote the model-signing signature {} over {} file(s) (root digest {})",
        sig.display(),
        signature.files,
        signature.root_digest
    );
    Ok(())
}
