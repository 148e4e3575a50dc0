//! Virtual paths: parsing what a model sends into a root and a list of plain names.
//!
//! Parsing is purely lexical and refuses anything that is not a plain path under one of the
//! three roots. Because the sandbox never follows symbolic links, a lexically clean path is
//! also the path the file system walks.

use std::fmt;
use std::path::{Component, Path};

use crate::error::{Result, SandboxError};
use crate::limits::Limits;

/// One of the three sandbox roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Root {
    /// `/input`: the staged inputs, read-only.
    Input,
    /// `/output`: what the run hands back, writable.
    Output,
    /// `/scratch`: working space, writable, never part of the bundle.
    Scratch,
}

impl Root {
    /// All roots, in the order they are listed.
    pub const ALL: [Root; 3] = [Root::Input, Root::Output, Root::Scratch];

    /// The root's name without the slash: `input`, `output` or `scratch`.
    pub fn name(self) -> &'static str {
        match self {
            Root::Input => "input",
            Root::Output => "output",
            Root::Scratch => "scratch",
        }
    }

    /// The root as a virtual path: `/input`, `/output` or `/scratch`.
    pub fn as_str(self) -> &'static str {
        match self {
            Root::Input => "/input",
            Root::Output => "/output",
            Root::Scratch => "/scratch",
        }
    }

    /// Whether the sandbox ever writes under this root (false only for `/input`).
    pub fn is_writable(self) -> bool {
        !matches!(self, Root::Input)
    }

    fn from_name(name: &str) -> Option<Root> {
        Root::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed, normalised sandbox path: a root and the plain names below it.
///
/// Built only by [`VirtualPath::parse`], so every value obeys the path rules: no `..`, no `.`,
/// no empty names, no NUL or control characters, no backslashes, names and depth within the
/// [`Limits`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VirtualPath {
    root: Root,
    names: Vec<String>,
}

impl VirtualPath {
    /// Parses a path a model sent.
    ///
    /// Absolute paths must start with `/input`, `/output` or `/scratch` exactly; relative
    /// paths resolve under `/scratch`. Repeated slashes collapse and `.` is dropped
    /// everywhere (also before the root: `//output//a` and `/./output/./a` are both
    /// `/output/a`), and `..`
    /// removes the name before it but may not climb above the root. Refused, each with its
    /// own [`SandboxError`] variant: empty paths, over-long paths or names, NUL bytes, control
    /// characters, backslashes, URLs (`file://…`), `~`, other absolute roots, roots that only
    /// look like ours (case, Unicode look-alikes, invisible characters), `..` leaving a root,
    /// and paths deeper than [`Limits::max_depth`].
    ///
    /// # Errors
    ///
    /// One of the [`SandboxError`] path variants listed above ([`SandboxError::EmptyPath`],
    /// [`SandboxError::PathTooLong`], [`SandboxError::OutsideSandbox`],
    /// [`SandboxError::Traversal`], [`SandboxError::TooDeep`], ...), naming the rule broken.
    pub fn parse(raw: &str, limits: &Limits) -> Result<VirtualPath> {
        check_raw(raw, limits)?;
        let (root, rest) = if let Some(abs) = raw.strip_prefix('/') {
            // `.` names and repeated slashes go before the root is looked up, so
            // `/./output/./a` is `/output/a` just as `//output//a` is.
            let mut parts = abs.split('/').filter(|p| !p.is_empty() && *p != ".");
            let first = parts.next().unwrap_or("");
            match Root::from_name(first) {
                Some(root) => (root, parts.collect::<Vec<_>>()),
                None => {
                    if let Some(meant) = looks_like_root(first) {
                        return Err(SandboxError::LookAlikeRoot {
                            path: shown(raw),
                            found: shown(first),
                            meant,
                        });
                    }
                    return Err(SandboxError::OutsideSandbox { path: shown(raw) });
                }
            }
        } else {
            (
                Root::Scratch,
                raw.split('/').filter(|p| !p.is_empty()).collect(),
            )
        };
        let names = normalise(raw, &rest, root.as_str(), limits)?;
        // The limit holds for the normal form too: a relative path gains `/scratch/`, and
        // a path shown back to the model must parse again.
        let len = root.as_str().len() + names.iter().map(|n| n.len() + 1).sum::<usize>();
        if len > limits.max_path_bytes {
            return Err(SandboxError::PathTooLong {
                path: shown(raw),
                len,
                max: limits.max_path_bytes,
            });
        }
        Ok(VirtualPath { root, names })
    }

    /// The path of a root itself.
    pub fn root_of(root: Root) -> VirtualPath {
        VirtualPath {
            root,
            names: Vec::new(),
        }
    }

    /// The root the path is under.
    pub fn root(&self) -> Root {
        self.root
    }

    /// The names below the root, outermost first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether the path is a root itself (no names below it).
    pub fn is_root(&self) -> bool {
        self.names.is_empty()
    }

    /// The last name, if the path is not a root.
    pub fn file_name(&self) -> Option<&str> {
        self.names.last().map(String::as_str)
    }
}

impl fmt::Display for VirtualPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.root.as_str())?;
        for name in &self.names {
            f.write_str("/")?;
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// Parses a path on the host side, relative to the granted host folder `host_root` (an
/// absolute path that starts with `host_root` is also accepted). The same hostile-input rules
/// as for virtual paths apply. Returns the names below the host folder.
pub(crate) fn parse_host_path(raw: &str, host_root: &Path, limits: &Limits) -> Result<Vec<String>> {
    check_raw(raw, limits)?;
    let rest: &str = if raw.starts_with('/') {
        let stripped = Path::new(raw)
            .strip_prefix(host_root)
            .map_err(|_| SandboxError::OutsideHostDir { path: shown(raw) })?;
        // `Path::strip_prefix` works on components, so the rest is valid UTF-8 (a suffix of raw).
        let rest = stripped.to_str().unwrap_or("");
        if stripped
            .components()
            .any(|c| matches!(c, Component::RootDir))
        {
            return Err(SandboxError::OutsideHostDir { path: shown(raw) });
        }
        rest
    } else {
        raw
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    normalise(raw, &parts, "the host folder", limits)
}

/// Checks that hold for any path, before it is split.
fn check_raw(raw: &str, limits: &Limits) -> Result<()> {
    if raw.is_empty() {
        return Err(SandboxError::EmptyPath);
    }
    if raw.len() > limits.max_path_bytes {
        return Err(SandboxError::PathTooLong {
            path: shown(raw),
            len: raw.len(),
            max: limits.max_path_bytes,
        });
    }
    if raw.contains('\0') {
        return Err(SandboxError::NulByte { path: shown(raw) });
    }
    if raw.chars().any(char::is_control) {
        return Err(SandboxError::ControlCharacter { path: shown(raw) });
    }
    if raw.contains('\\') {
        return Err(SandboxError::Backslash { path: shown(raw) });
    }
    let lower = raw.trim_start().to_ascii_lowercase();
    if raw.contains("://") || lower.starts_with("file:") {
        return Err(SandboxError::UrlScheme { path: shown(raw) });
    }
    if raw.starts_with('~') {
        return Err(SandboxError::HomeDirectory { path: shown(raw) });
    }
    Ok(())
}

/// Resolves `.` and `..` among `parts` and checks each name and the depth.
fn normalise(raw: &str, parts: &[&str], root_label: &str, limits: &Limits) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::with_capacity(parts.len());
    for part in parts {
        match *part {
            "." => {}
            ".." => {
                if names.pop().is_none() {
                    return Err(SandboxError::Traversal {
                        path: shown(raw),
                        root: root_label.to_owned(),
                    });
                }
            }
            name => {
                if name.len() > limits.max_name_bytes {
                    return Err(SandboxError::NameTooLong {
                        path: shown(raw),
                        len: name.len(),
                        max: limits.max_name_bytes,
                    });
                }
                names.push(name.to_owned());
            }
        }
    }
    if names.len() > limits.max_depth {
        return Err(SandboxError::TooDeep {
            path: shown(raw),
            depth: names.len(),
            max: limits.max_depth,
        });
    }
    Ok(names)
}

/// A path made safe to show in a message: control characters escaped, cut at 200 chars.
pub(crate) fn shown(raw: &str) -> String {
    let mut out = String::new();
    for (i, c) in raw.chars().enumerate() {
        if i >= 200 {
            out.push('…');
            break;
        }
        if c == '\0' {
            out.push_str("\\0");
        } else if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// If `name` is not a root but folds to one (ignoring case, invisible characters, combining
/// marks, full-width forms and common Cyrillic, Greek and other look-alike letters), the root
/// it imitates.
fn looks_like_root(name: &str) -> Option<&'static str> {
    let folded: String = name
        .chars()
        .filter_map(fold_char)
        .collect::<String>()
        .trim_matches(|c: char| c.is_whitespace() || c == '.')
        .to_ascii_lowercase();
    Root::ALL
        .into_iter()
        .map(Root::name)
        .find(|root| *root == folded)
}

fn fold_char(c: char) -> Option<char> {
    let code = c as u32;
    Some(match c {
        // invisible: zero-width, direction marks, word joiner, BOM, soft hyphen, CGJ
        '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{00AD}'
        | '\u{034F}'
        | '\u{0300}'..='\u{036F}' => return None,
        // full-width ASCII
        '\u{FF01}'..='\u{FF5E}' => return char::from_u32(code - 0xFEE0),
        // mathematical alphanumeric letters: blocks of 52 (A–Z, a–z)
        '\u{1D400}'..='\u{1D6A3}' => {
            let i = (code - 0x1D400) % 52;
            return char::from_u32(if i < 26 {
                'a' as u32 + i
            } else {
                'a' as u32 + i - 26
            });
        }
        // circled and parenthesised letters
        '\u{24B6}'..='\u{24CF}' => return char::from_u32('a' as u32 + code - 0x24B6),
        '\u{24D0}'..='\u{24E9}' => return char::from_u32('a' as u32 + code - 0x24D0),
        'а' | 'А' | 'α' | 'Α' | 'à'..='å' | 'À'..='Å' => 'a',
        'с' | 'С' | 'ϲ' | 'ç' | 'Ç' | 'ᴄ' => 'c',
        'е' | 'Е' | 'ε' | 'Ε' | 'è'..='ë' | 'È'..='Ë' => 'e',
        'һ' | 'Н' | 'Η' | 'ℎ' => 'h',
        'і' | 'І' | 'ι' | 'Ι' | 'ı' | 'ɪ' | 'ì'..='ï' | 'Ì'..='Ï' | 'ӏ' | 'Ӏ' | 'ℹ' => {
            'i'
        }
        'п' | 'ո' | 'ν' | 'Ν' | 'ɴ' | 'ñ' | 'Ñ' => 'n',
        'о' | 'О' | 'ο' | 'Ο' | 'օ' | 'ᴏ' | 'ò'..='ö' | 'ø' | 'Ò'..='Ö' | 'Ø' | '0' => {
            'o'
        }
        'р' | 'Р' | 'ρ' | 'Ρ' | 'ᴘ' => 'p',
        'ѕ' | 'Ѕ' | 'ꜱ' => 's',
        'т' | 'Т' | 'τ' | 'Τ' | 'ᴛ' => 't',
        'ս' | 'υ' | 'ᴜ' | 'ù'..='ü' | 'Ù'..='Ü' | 'µ' => 'u',
        'ⅰ' => 'i',
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<VirtualPath> {
        VirtualPath::parse(s, &Limits::default())
    }

    #[test]
    fn a_relative_path_whose_normal_form_is_too_long_is_refused() {
        // Found by the sandbox_path fuzz target: 1 020 bytes relative became 1 029 bytes
        // as `/scratch/…`, which did not parse back.
        let limits = Limits::default();
        let n = |len: usize| "n".repeat(len);
        // 1 020 bytes as sent, 1 029 as `/scratch/…`: refused.
        let raw = [n(203), n(203), n(203), n(203), n(204)].join("/");
        assert_eq!(raw.len(), 1020);
        assert!(raw.len() <= limits.max_path_bytes);
        let e = parse(&raw).unwrap_err();
        assert!(
            matches!(
                e,
                SandboxError::PathTooLong {
                    len: 1029,
                    max: 1024,
                    ..
                }
            ),
            "{e:?}"
        );
        // 1 015 bytes as sent, exactly 1 024 as `/scratch/…`: accepted, and round-trips.
        let fits = [n(203), n(203), n(203), n(203), n(199)].join("/");
        let p = parse(&fits).unwrap();
        assert_eq!(p.to_string().len(), 1024);
        assert_eq!(parse(&p.to_string()).unwrap(), p);
    }

    #[test]
    fn roots_and_relative_paths() {
        let p = parse("/input/a/b.txt").unwrap();
        assert_eq!(p.root(), Root::Input);
        assert_eq!(p.names(), ["a", "b.txt"]);
        assert_eq!(p.to_string(), "/input/a/b.txt");
        assert_eq!(parse("notes.md").unwrap().to_string(), "/scratch/notes.md");
        assert_eq!(parse("./x/../y").unwrap().to_string(), "/scratch/y");
        assert_eq!(
            parse("//output//a/./b/").unwrap().to_string(),
            "/output/a/b"
        );
        assert!(parse("/output").unwrap().is_root());
        assert_eq!(parse(".").unwrap().to_string(), "/scratch");
    }

    #[test]
    fn refusals_name_their_rule() {
        assert!(matches!(parse(""), Err(SandboxError::EmptyPath)));
        assert!(matches!(
            parse("/etc/passwd"),
            Err(SandboxError::OutsideSandbox { .. })
        ));
        assert!(matches!(
            parse("/"),
            Err(SandboxError::OutsideSandbox { .. })
        ));
        assert!(matches!(
            parse("/Input/a"),
            Err(SandboxError::LookAlikeRoot { meant: "input", .. })
        ));
        assert!(matches!(
            parse("/іnput/a"),
            Err(SandboxError::LookAlikeRoot { .. })
        ));
        assert!(matches!(
            parse("/ｏｕｔｐｕｔ/a"),
            Err(SandboxError::LookAlikeRoot { .. })
        ));
        assert!(matches!(
            parse("/out\u{200B}put/a"),
            Err(SandboxError::LookAlikeRoot { .. })
        ));
        assert!(matches!(
            parse("/output/../input/a"),
            Err(SandboxError::Traversal { .. })
        ));
        assert!(matches!(parse("../x"), Err(SandboxError::Traversal { .. })));
        assert!(matches!(
            parse("/output/a\0b"),
            Err(SandboxError::NulByte { .. })
        ));
        assert!(matches!(
            parse("/output/a\nb"),
            Err(SandboxError::ControlCharacter { .. })
        ));
        assert!(matches!(
            parse("\\output\\a"),
            Err(SandboxError::Backslash { .. })
        ));
        assert!(matches!(
            parse("file:///etc/passwd"),
            Err(SandboxError::UrlScheme { .. })
        ));
        assert!(matches!(
            parse("~/x"),
            Err(SandboxError::HomeDirectory { .. })
        ));
        let long = format!("/output/{}", "a".repeat(256));
        assert!(matches!(
            parse(&long),
            Err(SandboxError::NameTooLong { .. })
        ));
        let deep = format!("/output/{}", "d/".repeat(40));
        assert!(matches!(parse(&deep), Err(SandboxError::TooDeep { .. })));
        let huge = format!("/output/{}", "ab/".repeat(400));
        assert!(matches!(
            parse(&huge),
            Err(SandboxError::PathTooLong { .. })
        ));
    }

    #[test]
    fn messages_say_the_rule() {
        let e = parse("/etc/passwd").unwrap_err().to_string();
        assert_eq!(
            e,
            "path `/etc/passwd` is outside the sandbox: it must start with /input, /output or /scratch"
        );
        let e = parse("/output/../../etc").unwrap_err().to_string();
        assert!(e.contains("leave the /output root"), "{e}");
    }

    #[test]
    fn host_paths() {
        let l = Limits::default();
        let root = Path::new("/srv/host");
        assert_eq!(parse_host_path("a/b", root, &l).unwrap(), ["a", "b"]);
        assert_eq!(parse_host_path("/srv/host/a", root, &l).unwrap(), ["a"]);
        assert!(parse_host_path(".", root, &l).unwrap().is_empty());
        assert!(matches!(
            parse_host_path("/srv/hostile/a", root, &l),
            Err(SandboxError::OutsideHostDir { .. })
        ));
        assert!(matches!(
            parse_host_path("/etc/passwd", root, &l),
            Err(SandboxError::OutsideHostDir { .. })
        ));
        assert!(matches!(
            parse_host_path("a/../../x", root, &l),
            Err(SandboxError::Traversal { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_and_stays_clean(s in "\\PC{0,64}") {
            if let Ok(p) = parse(&s) {
                for n in p.names() {
                    proptest::prop_assert!(n != ".." && n != "." && !n.is_empty());
                    proptest::prop_assert!(!n.contains('/') && !n.contains('\\') && !n.contains('\0'));
                }
            }
        }
    }
}
