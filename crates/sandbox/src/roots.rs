//! The host folders a run touches must not overlap: the bundle (with its `/output`), the
//! folder `/scratch` is made in, each input and the host folder.
//!
//! An overlap lets one root reach another: an input folder holding the bundle stages the
//! run's own evidence as input, a host folder holding the bundle lets the host tools
//! overwrite `events.jsonl`, a `TMPDIR` inside an input changes the input while the run
//! lasts. [`check_disjoint`] refuses any set-up where one root is equal to or inside
//! another, before anything is written.
//!
//! Two paths are compared twice: by their canonical paths (symbolic links resolved) and by
//! the device and inode of every folder from the path up to `/`, so that a bind mount —
//! the same folder reachable under two unrelated paths — does not hide an overlap. A root
//! that does not exist yet (an `--out` to be created) is judged by its nearest existing
//! ancestor.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

use crate::error::{Result, SandboxError};

/// One host folder (or file) a run uses, and how to name it in a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoot {
    /// How the refusal names it, e.g. "the bundle (--out)".
    pub label: String,
    /// The path as given.
    pub path: PathBuf,
    /// Roots of the same group are parts of one thing (the bundle and its `/output`) and
    /// are not compared with each other.
    pub group: u32,
    /// Whether this root is a fresh folder made inside `path` rather than `path` itself
    /// (`/scratch`, made in `TMPDIR`): nothing that exists now can be inside it, and it is
    /// inside whatever holds `path`.
    pub fresh_child: bool,
}

impl HostRoot {
    /// A root at `path`, in a group of its own number `group`.
    pub fn new(label: impl Into<String>, path: impl Into<PathBuf>, group: u32) -> HostRoot {
        HostRoot {
            label: label.into(),
            path: path.into(),
            group,
            fresh_child: false,
        }
    }

    /// A root that will be a fresh folder made inside `parent` (like `/scratch` in `TMPDIR`).
    pub fn fresh_in(label: impl Into<String>, parent: impl Into<PathBuf>, group: u32) -> HostRoot {
        HostRoot {
            fresh_child: true,
            ..HostRoot::new(label, parent, group)
        }
    }
}

/// Where a root is on the host, resolved.
#[derive(Debug)]
struct Resolved {
    /// The canonical path of the root, or of its nearest existing ancestor followed by the
    /// names still to be created.
    canonical: PathBuf,
    /// Whether `canonical` exists now (else nothing can be inside it).
    exists: bool,
    /// Device and inode of the nearest existing folder and of each of its ancestors, the
    /// folder itself first.
    chain: Vec<(u64, u64)>,
}

fn refuse(root: &HostRoot, message: impl Into<String>) -> SandboxError {
    SandboxError::RootUnusable {
        root: root.label.clone(),
        path: root.path.display().to_string(),
        message: message.into(),
    }
}

fn resolve(root: &HostRoot) -> Result<Resolved> {
    let absolute = std::path::absolute(&root.path).map_err(|e| refuse(root, e.to_string()))?;
    // The nearest existing ancestor, and the names below it still to be created.
    let mut existing = absolute.as_path();
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        match std::fs::symlink_metadata(existing) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(refuse(root, e.to_string())),
        }
        let Some(parent) = existing.parent() else {
            return Err(refuse(root, "no part of the path exists"));
        };
        match existing.components().next_back() {
            Some(Component::Normal(name)) => missing.push(name),
            Some(Component::CurDir) => {}
            _ => {
                return Err(refuse(
                    root,
                    "`..` after a folder that does not exist yet cannot be resolved",
                ));
            }
        }
        existing = parent;
    }
    let mut canonical = std::fs::canonicalize(existing).map_err(|e| refuse(root, e.to_string()))?;
    let mut chain = Vec::new();
    let mut walk = Some(canonical.as_path());
    while let Some(p) = walk {
        let md = std::fs::metadata(p).map_err(|e| refuse(root, e.to_string()))?;
        chain.push((md.dev(), md.ino()));
        walk = p.parent();
    }
    let exists = missing.is_empty() && !root.fresh_child;
    for name in missing.iter().rev() {
        canonical.push(name);
    }
    if root.fresh_child {
        // A name no existing path has: nothing is inside the fresh folder.
        canonical.push("\0fresh");
    }
    Ok(Resolved {
        canonical,
        exists,
        chain,
    })
}

/// Whether `inner` is equal to or inside `outer`.
fn within(inner: &Resolved, outer: &Resolved) -> bool {
    if inner.canonical.starts_with(&outer.canonical) {
        return true;
    }
    if !outer.exists {
        return false;
    }
    // `outer` exists, so its chain starts with its own device and inode: `inner` is inside
    // it if any folder on `inner`'s way up is that same folder, whatever its path.
    match outer.chain.first() {
        Some(id) => inner.chain.contains(id),
        None => false,
    }
}

/// Refuses (with [`SandboxError::RootsOverlap`]) any two roots of different groups where
/// one is equal to or inside the other; refuses (with [`SandboxError::RootUnusable`]) a root
/// whose path cannot be resolved. Reads only: nothing is created or changed.
///
/// # Errors
///
/// [`SandboxError::RootsOverlap`] for two overlapping roots of different groups;
/// [`SandboxError::RootUnusable`] for a root whose path cannot be resolved.
pub fn check_disjoint(roots: &[HostRoot]) -> Result<()> {
    let resolved = roots.iter().map(resolve).collect::<Result<Vec<_>>>()?;
    for (i, a) in roots.iter().enumerate() {
        for (j, b) in roots.iter().enumerate().skip(i + 1) {
            if a.group == b.group {
                continue;
            }
            let (ra, rb) = (&resolved[i], &resolved[j]);
            let how = match (within(ra, rb), within(rb, ra)) {
                (true, true) => "is the same folder as",
                (true, false) => "is inside",
                (false, true) => {
                    return Err(overlap(b, "is inside", a));
                }
                (false, false) => continue,
            };
            return Err(overlap(a, how, b));
        }
    }
    Ok(())
}

fn overlap(a: &HostRoot, how: &str, b: &HostRoot) -> SandboxError {
    SandboxError::RootsOverlap {
        first: format!("{} `{}`", a.label, a.path.display()),
        how: how.to_owned(),
        second: format!("{} `{}`", b.label, b.path.display()),
    }
}

/// The roots of a run as the runtime uses them: the bundle and its `/output`, `/scratch`
/// made in `tmp_dir`, each input, and the host folder.
pub fn run_roots(
    bundle: &Path,
    tmp_dir: &Path,
    inputs: &[PathBuf],
    host_dir: Option<&Path>,
) -> Vec<HostRoot> {
    let mut roots = vec![
        HostRoot::new("/output (in the bundle)", bundle.join("output"), 0),
        HostRoot::new("the bundle (--out)", bundle, 0),
        HostRoot::fresh_in("/scratch (made in TMPDIR)", tmp_dir, 1),
    ];
    if let Some(host) = host_dir {
        roots.push(HostRoot::new("the host folder (--host-dir)", host, 2));
    }
    // Inputs overlapping each other are harmless (each is copied); they share a group.
    for input in inputs {
        roots.push(HostRoot::new("the input (--input)", input, 3));
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(pairs: &[(&str, &Path, u32)]) -> Vec<HostRoot> {
        pairs
            .iter()
            .map(|(l, p, g)| HostRoot::new(*l, *p, *g))
            .collect()
    }

    #[test]
    fn disjoint_siblings_pass_and_nesting_is_refused_both_ways() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("inner")).unwrap();
        std::fs::create_dir(&b).unwrap();
        check_disjoint(&roots(&[("a", &a, 0), ("b", &b, 1)])).unwrap();
        for (x, y) in [(&a, &a.join("inner")), (&a.join("inner"), &a), (&a, &a)] {
            let e = check_disjoint(&roots(&[("x", x, 0), ("y", y, 1)])).unwrap_err();
            assert!(matches!(e, SandboxError::RootsOverlap { .. }), "{e}");
        }
        // The same group is not compared.
        check_disjoint(&roots(&[("x", &a, 0), ("y", &a, 0)])).unwrap();
    }

    #[test]
    fn a_symlink_does_not_hide_an_overlap() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir(&a).unwrap();
        std::os::unix::fs::symlink(&a, t.path().join("link")).unwrap();
        let via = t.path().join("link").join("new-bundle");
        let e = check_disjoint(&roots(&[("x", &via, 0), ("y", &a, 1)])).unwrap_err();
        assert!(e.to_string().contains("is inside"), "{e}");
    }

    #[test]
    fn a_fresh_child_is_inside_its_parent_s_holders_only() {
        let t = tempfile::tempdir().unwrap();
        let input = t.path().join("in");
        std::fs::create_dir(&input).unwrap();
        // TMPDIR holding the input is fine: /scratch is a new folder beside it.
        let ok = [
            HostRoot::fresh_in("scratch", t.path(), 0),
            HostRoot::new("input", &input, 1),
        ];
        check_disjoint(&ok).unwrap();
        // TMPDIR inside (or equal to) the input is not.
        for tmp in [input.clone(), input.join("tmp")] {
            std::fs::create_dir_all(&tmp).unwrap();
            let bad = [
                HostRoot::fresh_in("scratch", &tmp, 0),
                HostRoot::new("input", &input, 1),
            ];
            assert!(check_disjoint(&bad).is_err());
        }
    }

    #[test]
    fn dot_dot_below_a_missing_folder_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let odd = t.path().join("missing/../b");
        let e = check_disjoint(&roots(&[("x", &odd, 0)])).unwrap_err();
        assert!(matches!(e, SandboxError::RootUnusable { .. }), "{e}");
    }
}
