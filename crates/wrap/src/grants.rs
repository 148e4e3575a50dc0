//! What of the host wrap shows the program beyond what the caller granted, so that the
//! set-ups people really have run as they do outside: the system's CA store, the file or
//! folder a CA variable of the caller's names, and the base installation of a Python
//! virtualenv the program is (or runs under).
//!
//! The program's model traffic is plain HTTP to the proxy, but the SDKs build their TLS
//! context when their client is made, before any request, and fail there when
//! `SSL_CERT_FILE` names a file they cannot open; Node warns on every run. So the CA
//! store is shown read-only, as is what a CA variable names; a variable naming something
//! that does not exist, or that wrap will not show (a top-level folder, a folder holding
//! the caller's home, one that overlaps the bundle or `TMPDIR`), is not passed on, with a
//! warning — the program never stops at its start over it.

use std::path::{Path, PathBuf};

use provrun_sandbox::roots::{HostRoot, check_disjoint};

use crate::error::WrapError;
use crate::program::{Visible, python_homes};

/// The system's CA certificates, wherever a distribution keeps them (those that exist
/// are shown read-only; `/usr/share/ca-certificates` is under `/usr`).
pub const CA_STORE: &[&str] = &[
    "/etc/ssl/certs",
    "/etc/ssl/cert.pem",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/pki/tls/certs",
    "/etc/pki/tls/cert.pem",
    "/etc/pki/ca-trust",
];

/// Variables that name CA certificates (a file, a folder, or for `SSL_CERT_DIR` a list
/// of folders separated by `:`).
pub const CA_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

/// What wrap adds to the caller's grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extra {
    /// Host paths to show read-only at their own paths.
    pub read_only: Vec<PathBuf>,
    /// Variables of the caller's not passed on to the program.
    pub dropped: Vec<String>,
    /// What the caller should hear about (a variable not passed on, a grant made).
    pub warnings: Vec<String>,
}

/// What to show the program of `argv0` (found from `cwd` on `env`'s `PATH`) beyond what
/// `visible` already shows; `bundle` and `tmp` are the folders no grant may overlap.
///
/// # Errors
///
/// [`WrapError::SetUp`] when a virtualenv's `pyvenv.cfg` names a base installation that
/// cannot be found or that wrap will not grant itself.
pub fn extra(
    argv0: &str,
    cwd: &Path,
    env: &[(String, String)],
    visible: &Visible,
    bundle: &Path,
    tmp: &Path,
) -> Result<Extra, WrapError> {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let mut extra = Extra::default();
    for home in python_homes(argv0, cwd, var("PATH"), visible)? {
        tracing::info!(path = %home.display(), "showing the virtualenv's base installation read-only");
        extra.read_only.push(home);
    }
    for p in CA_STORE {
        let p = Path::new(p);
        if p.exists() && !extra.read_only.iter().any(|r| r == p) {
            extra.read_only.push(p.to_path_buf());
        }
    }
    let shown = |p: &Path, extra: &Extra| {
        visible.inside(p).is_some() || extra.read_only.iter().any(|r| p.starts_with(r))
    };
    let home = var("HOME").map(PathBuf::from);
    for name in CA_VARIABLES {
        let Some(value) = var(name).filter(|v| !v.is_empty()) else {
            continue;
        };
        let paths: Vec<&str> = if *name == "SSL_CERT_DIR" {
            value.split(':').filter(|p| !p.is_empty()).collect()
        } else {
            vec![value]
        };
        let mut grants = Vec::new();
        let mut refusal = None;
        for given in paths {
            match grant_for(Path::new(given), cwd, home.as_deref(), bundle, tmp) {
                Ok(paths) => grants.extend(paths),
                Err(why) => {
                    refusal = Some(format!("{name} names `{given}`, {why}"));
                    break;
                }
            }
        }
        if let Some(why) = refusal {
            extra.dropped.push((*name).to_owned());
            extra.warnings.push(format!(
                "{why}: the variable is not passed on to the program"
            ));
            continue;
        }
        for g in grants {
            if !shown(&g, &extra) {
                extra.read_only.push(g);
            }
        }
    }
    Ok(extra)
}

/// The paths to show for the CA file or folder `given`: as given (absolute) and
/// canonical; or why not.
fn grant_for(
    given: &Path,
    cwd: &Path,
    home: Option<&Path>,
    bundle: &Path,
    tmp: &Path,
) -> Result<Vec<PathBuf>, String> {
    let absolute = cwd.join(given);
    let real =
        std::fs::canonicalize(&absolute).map_err(|e| format!("which cannot be found ({e})"))?;
    if real.is_dir() {
        let top = real.components().count() < 3;
        let holds_home = home.is_some_and(|h| h.starts_with(&real));
        if top || holds_home {
            return Err("a folder wrap does not show a program whole".to_owned());
        }
    } else if !real.is_file() {
        return Err("which is not a file or folder".to_owned());
    }
    let roots = [
        HostRoot::new("the bundle (--out)", bundle, 0),
        HostRoot::fresh_in("the private HOME (TMPDIR)", tmp, 2),
        HostRoot::new("a CA variable's path", &real, 1),
    ];
    check_disjoint(&roots).map_err(|e| format!("which wrap cannot show: {e}"))?;
    let mut out = vec![real.clone()];
    let plain = absolute.components().all(|c| {
        matches!(
            c,
            std::path::Component::RootDir | std::path::Component::Normal(_)
        )
    });
    if plain && absolute != real {
        out.push(absolute);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_variable_is_shown_or_not_passed_on() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let certs = base.join("certs");
        std::fs::create_dir(&certs).unwrap();
        std::fs::write(certs.join("ca.pem"), "pem").unwrap();
        let bundle = base.join("bundle");
        let private = base.join("private");
        std::fs::create_dir(&private).unwrap();
        let visible = Visible {
            same_path: vec![PathBuf::from("/usr")],
            workspace: None,
        };
        let env: Vec<(String, String)> = [
            ("SSL_CERT_FILE", certs.join("ca.pem").display().to_string()),
            (
                "NODE_EXTRA_CA_CERTS",
                base.join("absent.pem").display().to_string(),
            ),
            ("SSL_CERT_DIR", format!("{}:/", certs.display())),
            (
                "REQUESTS_CA_BUNDLE",
                private.join("x").display().to_string(),
            ),
            ("CURL_CA_BUNDLE", base.display().to_string()),
            ("PATH", "/usr/bin:/bin".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        std::fs::write(private.join("x"), "pem").unwrap();
        let e = extra("true", &base, &env, &visible, &bundle, &private).unwrap();
        assert!(e.read_only.contains(&certs.join("ca.pem")), "{e:?}");
        assert!(e.read_only.contains(&private.join("x")), "{e:?}");
        // A top-level folder, a folder holding the bundle and TMPDIR, a file that does
        // not exist: not passed on, with a warning each.
        assert_eq!(
            e.dropped,
            ["SSL_CERT_DIR", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"],
            "{e:?}"
        );
        assert_eq!(e.warnings.len(), 3);
        assert!(e.warnings.iter().all(|w| w.contains("not passed on")));
    }
}
