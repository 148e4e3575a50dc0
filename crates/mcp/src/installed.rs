//! Running servers as they are installed: the host paths a stdio server may read
//! (`read_only`), and the checks that say precisely what an installed server is missing
//! when it cannot see it — the interpreter a script's first line names, the
//! `node_modules` folder a Node server loads its packages from, a launcher (`npx`) that
//! downloads the server and so needs the network.

use std::path::{Component, Path, PathBuf};

use provrun_sandbox::roots::{HostRoot, check_disjoint};

/// Where the sandbox's `PATH` looks for a bare program name (the same folders, in order).
const SANDBOX_PATH: &[&str] = &[
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
];

/// The sandbox's own mount points: a grant equal to or holding one would cover it.
const SANDBOX_MOUNTS: &[&str] = &["/input", "/output", "/scratch", "/tmp", "/proc", "/dev"];

/// Launchers that fetch the server from a registry when they start.
const FETCHERS: &[(&str, &str)] = &[
    (
        "npx",
        "install it once (`npm install --prefix DIR PACKAGE@VERSION`), then name \
         `DIR/node_modules/.bin/NAME` as `command` and grant `read_only = [\"DIR/node_modules\"]`",
    ),
    (
        "uvx",
        "install it once into a virtualenv (`python3 -m venv DIR && DIR/bin/pip install \
         PACKAGE==VERSION`), then name `DIR/bin/NAME` as `command` and grant `read_only = \
         [\"DIR\"]` (and the folder of the Python it links to, if not under /usr)",
    ),
    (
        "pipx",
        "install it once into a virtualenv (`python3 -m venv DIR && DIR/bin/pip install \
         PACKAGE==VERSION`), then name `DIR/bin/NAME` as `command` and grant `read_only = \
         [\"DIR\"]`",
    ),
    (
        "bunx",
        "install it once (`npm install --prefix DIR PACKAGE@VERSION`), then name \
         `DIR/node_modules/.bin/NAME` as `command` and grant `read_only = [\"DIR/node_modules\"]`",
    ),
];

/// Whether the sandbox shows `path` (a host path, links already followed or not): under
/// a system folder, or under a granted path.
pub(crate) fn visible(path: &Path, grants: &[PathBuf]) -> bool {
    provrun_sandbox::system_dirs()
        .iter()
        .any(|d| path.starts_with(d))
        || grants.iter().any(|g| path.starts_with(g))
}

/// The declared `read_only` paths as real host paths (relative ones against `base`),
/// each existing and none overlapping the sandbox's mount points or the run's own
/// folders (`forbidden`). `Err` says which path and why.
pub(crate) fn resolve_grants(
    declared: &[String],
    base: Option<&Path>,
    forbidden: &[HostRoot],
) -> Result<Vec<PathBuf>, String> {
    let mut grants = Vec::new();
    for given in declared {
        let path = Path::new(given);
        let joined = if path.is_relative() {
            base.unwrap_or(Path::new(".")).join(path)
        } else {
            path.to_path_buf()
        };
        let real = std::fs::canonicalize(&joined).map_err(|e| {
            format!(
                "`read_only` path `{given}` cannot be granted: {} ({e})",
                joined.display()
            )
        })?;
        if let Some(mount) = SANDBOX_MOUNTS
            .iter()
            .find(|m| Path::new(m).starts_with(&real) || real.starts_with(m))
        {
            if Path::new(mount).starts_with(&real) {
                return Err(format!(
                    "`read_only` path `{given}` cannot be granted: it is or holds `{mount}`, \
                     which the server's sandbox makes itself"
                ));
            }
            if *mount != "/tmp" {
                return Err(format!(
                    "`read_only` path `{given}` cannot be granted: it lies inside `{mount}`"
                ));
            }
        }
        grants.push(real);
    }
    if !grants.is_empty() {
        let mut roots: Vec<HostRoot> = forbidden.to_vec();
        for (i, g) in grants.iter().enumerate() {
            roots.push(HostRoot::new(
                format!("`read_only` path `{}`", declared[i]),
                g,
                u32::MAX,
            ));
        }
        check_disjoint(&roots).map_err(|e| {
            format!("a `read_only` path overlaps one of the run's own folders: {e}")
        })?;
    }
    Ok(grants)
}

/// A launcher that downloads the server when it starts, run without the network: why it
/// cannot work, and what to do instead.
pub(crate) fn fetcher_problem(command: &str, network: bool) -> Option<String> {
    if network {
        return None;
    }
    let name = Path::new(command).file_name()?.to_str()?;
    let (_, instead) = FETCHERS.iter().find(|(f, _)| *f == name)?;
    Some(format!(
        "`{name}` downloads the server from its registry when it starts, and an MCP server \
         has no network: {instead}; or set `network = true` on the server (recorded)"
    ))
}

/// The folder to suggest granting for a file: the prefix above a `bin` folder (a
/// virtualenv, a Python or Node installation), else the file's own folder.
fn folder_for(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new("/"));
    if parent.file_name().is_some_and(|n| n == "bin")
        && let Some(prefix) = parent.parent()
    {
        return prefix.to_path_buf();
    }
    parent.to_path_buf()
}

/// Follows `path`'s links (at most 16) and returns the first step the sandbox does not
/// show, with the folder to grant for it.
fn hidden_step(path: &Path, grants: &[PathBuf]) -> Option<(PathBuf, PathBuf)> {
    let mut step = path.to_path_buf();
    for _ in 0..16 {
        if !visible(&step, grants) {
            return Some((step.clone(), folder_for(&step)));
        }
        match std::fs::read_link(&step) {
            Ok(target) => {
                let next = step.parent().unwrap_or(Path::new("/")).join(target);
                step = std::path::absolute(&next).unwrap_or(next);
                step = normalise(&step);
            }
            Err(_) => return None,
        }
    }
    None
}

/// `..` and `.` taken out lexically (a link's target joined to its folder).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A script whose first line (`#!`) names an interpreter the sandbox cannot see (or, for
/// `#!/usr/bin/env NAME`, a name no folder of the sandbox's `PATH` holds): what is
/// missing and what to grant. `None` for a program that is no script or whose
/// interpreter is visible.
pub(crate) fn interpreter_problem(program: &Path, grants: &[PathBuf]) -> Option<String> {
    use std::io::Read as _;
    let mut head = [0u8; 512];
    let n = std::fs::File::open(program)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let head = &head[..n];
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    let shown = program.display();
    if Path::new(interpreter)
        .file_name()
        .is_some_and(|n| n == "env")
    {
        let name = words.find(|w| !w.starts_with('-'))?;
        if name.contains('/') {
            return None;
        }
        let found = SANDBOX_PATH
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.exists());
        return match found {
            Some(p) => hidden_step(&p, grants).map(|(step, folder)| {
                format!(
                    "its first line runs `{name}` (through env), found at `{}`, which the \
                     sandbox cannot see (`{}` is not granted): add `{}` to `read_only`",
                    p.display(),
                    step.display(),
                    folder.display()
                )
            }),
            None => Some(format!(
                "`{shown}` is a script whose first line runs `{name}` through env, and no \
                 folder of the sandbox's PATH ({}) has `{name}`: name the interpreter itself \
                 as `command` with the script as the first of `args`, and grant the \
                 interpreter's installation folder in `read_only`",
                SANDBOX_PATH.join(":")
            )),
        };
    }
    let interpreter = Path::new(interpreter);
    if !interpreter.is_absolute() {
        return None;
    }
    let (step, folder) = hidden_step(interpreter, grants)?;
    Some(if step == interpreter {
        format!(
            "`{shown}` is a script whose first line names the interpreter `{}`, which the \
             sandbox cannot see: add `{}` to `read_only`",
            interpreter.display(),
            folder.display()
        )
    } else {
        format!(
            "`{shown}` is a script whose first line names the interpreter `{}`, a link to \
             `{}`, which the sandbox cannot see: add `{}` to `read_only`",
            interpreter.display(),
            step.display(),
            folder.display()
        )
    })
}

/// After a stdio server failed to start: what of its files the sandbox does not show —
/// the `node_modules` folder a program or argument lies in (Node loads the package's
/// dependencies from it), or a host path given as an argument.
pub(crate) fn start_hints(program: &[&Path], args: &[String], grants: &[PathBuf]) -> Vec<String> {
    let mut hints = Vec::new();
    let mut paths: Vec<PathBuf> = program.iter().map(|p| p.to_path_buf()).collect();
    paths.extend(
        args.iter()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.exists()),
    );
    let mut named: Vec<PathBuf> = Vec::new();
    for path in &paths {
        if let Some(modules) = outer_node_modules(path) {
            if !visible(&modules, grants) && !named.contains(&modules) {
                named.push(modules.clone());
                let hint = format!(
                    "`{}` lies in `{}`, which the sandbox does not show: Node loads the \
                     package's dependencies from there, so add `{}` to `read_only`",
                    path.display(),
                    modules.display(),
                    modules.display()
                );
                hints.push(hint);
            }
        } else if args.iter().any(|a| Path::new(a) == path) && !visible(path, grants) {
            hints.push(format!(
                "the argument `{}` is a host path the sandbox does not show: add it (or its \
                 folder) to `read_only`",
                path.display()
            ));
        }
    }
    hints
}

/// The outermost `node_modules` folder on `path`, if any.
fn outer_node_modules(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        out.push(c);
        if c.as_os_str() == "node_modules" {
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, first_line: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("{first_line}\nprint('hi')\n")).unwrap();
        p
    }

    #[test]
    fn a_script_whose_interpreter_is_hidden_names_it_and_the_folder_to_grant() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        let python = venv.join("bin/python3");
        std::os::unix::fs::symlink("/usr/bin/env", &python).unwrap();
        let s = script(
            &venv.join("bin"),
            "server",
            &format!("#!{}", python.display()),
        );
        let problem = interpreter_problem(&s, &[]).unwrap();
        assert!(problem.contains(&python.display().to_string()), "{problem}");
        assert!(
            problem.contains(&format!("add `{}` to `read_only`", venv.display())),
            "{problem}"
        );
        // Granting the virtualenv shows the link, and the link's target is a system file.
        assert_eq!(interpreter_problem(&s, std::slice::from_ref(&venv)), None);
        // A link out of the grant names the hidden target.
        let other = t.path().join("py/bin");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("python3.11"), "").unwrap();
        std::fs::remove_file(&python).unwrap();
        std::os::unix::fs::symlink(other.join("python3.11"), &python).unwrap();
        let problem = interpreter_problem(&s, std::slice::from_ref(&venv)).unwrap();
        assert!(problem.contains("a link to"), "{problem}");
        assert!(
            problem.contains(&format!("add `{}`", t.path().join("py").display())),
            "{problem}"
        );
    }

    #[test]
    fn env_scripts_look_the_name_up_on_the_sandbox_path() {
        let t = tempfile::tempdir().unwrap();
        let s = script(t.path(), "a", "#!/usr/bin/env -S no-such-interpreter-x1 -u");
        let problem = interpreter_problem(&s, &[]).unwrap();
        assert!(problem.contains("`no-such-interpreter-x1`"), "{problem}");
        let ok = script(t.path(), "b", "#!/usr/bin/env sh");
        assert_eq!(interpreter_problem(&ok, &[]), None);
        let binary = script(t.path(), "c", "not a script");
        assert_eq!(interpreter_problem(&binary, &[]), None);
        assert_eq!(interpreter_problem(Path::new("/no/such/file"), &[]), None);
    }

    #[test]
    fn node_modules_and_argument_paths_get_hints() {
        let t = tempfile::tempdir().unwrap();
        let pkg = t.path().join("n/node_modules/@s/srv/dist");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "").unwrap();
        let modules = t.path().join("n/node_modules");
        let link = t.path().join("n/node_modules/.bin/srv");
        let hints = start_hints(&[&pkg.join("index.js"), &link], &[], &[]);
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert!(hints[0].contains(&format!("add `{}`", modules.display())));
        assert!(start_hints(&[&pkg.join("index.js")], &[], &[modules]).is_empty());
        let data = t.path().join("data.json");
        std::fs::write(&data, "{}").unwrap();
        let arg = data.display().to_string();
        let hints = start_hints(&[Path::new("/usr/bin/node")], &[arg], &[]);
        assert!(hints[0].contains("the argument"), "{hints:?}");
    }

    #[test]
    fn fetchers_need_the_network() {
        assert!(
            fetcher_problem("npx", false)
                .unwrap()
                .contains("npm install --prefix")
        );
        assert!(fetcher_problem("/usr/bin/uvx", false).is_some());
        assert_eq!(fetcher_problem("npx", true), None);
        assert_eq!(fetcher_problem("node", false), None);
    }

    #[test]
    fn grants_must_exist_and_stay_clear_of_the_sandbox_and_the_runs_folders() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        let bundle = t.path().join("bundle");
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::create_dir_all(bundle.join("output")).unwrap();
        let forbidden =
            provrun_sandbox::roots::run_roots(&bundle, &t.path().join("tmp"), &[], None);
        let ok = resolve_grants(&["venv".into()], Some(t.path()), &forbidden).unwrap();
        assert_eq!(ok, [std::fs::canonicalize(&venv).unwrap()]);
        let e = resolve_grants(&["missing".into()], Some(t.path()), &forbidden).unwrap_err();
        assert!(e.contains("cannot be granted"), "{e}");
        let e = resolve_grants(&["/".into()], None, &forbidden).unwrap_err();
        assert!(e.contains("holds `/input`"), "{e}");
        let out = bundle.join("output").display().to_string();
        let e = resolve_grants(&[out], None, &forbidden).unwrap_err();
        assert!(e.contains("/output (in the bundle)"), "{e}");
        let all = t.path().display().to_string();
        let e = resolve_grants(&[all], None, &forbidden).unwrap_err();
        assert!(e.contains("overlaps"), "{e}");
    }
}
