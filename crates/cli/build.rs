//! Puts the git commit the binary is built from into `--version`.
//!
//! `PROVRUN_BUILD_COMMIT` set at build time wins (for packagers building from a tarball
//! who know the commit). Otherwise, in a git checkout that tracks this crate, `git
//! rev-parse` gives the commit; from a tarball without `.git` (or without git, or unpacked
//! inside some other repository) there is no commit and `--version` shows the version
//! alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=PROVRUN_BUILD_COMMIT");
    let commit = match std::env::var("PROVRUN_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        // Only a checkout of this very crate: build.rs must be a tracked file.
        _ if git(&["ls-files", "--full-name", "build.rs"]).is_none() => None,
        _ => git(&["rev-parse", "--short=12", "HEAD"]).inspect(|_| {
            // Rebuild when HEAD moves: watch HEAD and the branch it names (or packed-refs).
            for path in [
                Some("HEAD".to_owned()),
                git(&["symbolic-ref", "-q", "HEAD"]),
            ]
            .into_iter()
            .flatten()
            .chain(["packed-refs".to_owned()])
            {
                if let Some(p) = git(&["rev-parse", "--git-path", &path])
                    && std::path::Path::new(&p).exists()
                {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
        }),
    };
    let version = env!("CARGO_PKG_VERSION");
    let long = match commit {
        Some(c) => format!("{version} (commit {c})"),
        None => version.to_owned(),
    };
    println!("cargo:rustc-env=PROVRUN_LONG_VERSION={long}");
}
