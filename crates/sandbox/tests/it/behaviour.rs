//! Behaviour of the sandbox operations when used as intended: reads and paging, writes,
//! edits, listings, host copies, staging, quotas, parallel writes and isolation.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::{Env, INPUTS};
use provrun_sandbox::{
    EntryKind, Limits, ReadAs, Root, Sandbox, SandboxError, VirtualPath, stage_inputs,
};

#[test]
fn sandbox_is_cheap_shared_state() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<Sandbox>();
    let env = Env::new();
    let clone = env.sb.clone();
    clone.write_file("/output/a", "1234").unwrap();
    assert_eq!(env.sb.usage().bytes, 4, "clones share one quota");
}

#[test]
fn write_then_read_round_trip() {
    let env = Env::new();
    let w = env
        .sb
        .write_file("/output/reports/q1/summary.md", "# Q1\n")
        .unwrap();
    assert!(w.created);
    assert_eq!(w.path, "/output/reports/q1/summary.md");
    assert_eq!(w.bytes, 5);
    assert_eq!(
        std::fs::read(env.output.join("reports/q1/summary.md")).unwrap(),
        b"# Q1\n"
    );
    let w = env
        .sb
        .write_file("/output/reports/q1/summary.md", "# Q1 final\n")
        .unwrap();
    assert!(!w.created);
    assert_eq!(w.replaced_bytes, Some(5));
    let r = env
        .sb
        .read_file("/output/reports/q1/summary.md", None, None)
        .unwrap();
    assert_eq!(r.content, "# Q1 final\n");
    assert!(!r.truncated && !r.lossy && r.note.is_none());
    assert_eq!((r.offset, r.bytes, r.total_size), (0, 11, 11));
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(env.output.join("reports/q1"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn replacing_a_file_keeps_its_permissions() {
    let env = Env::new();
    env.sb.write_file("/scratch/run.sh", "echo 1\n").unwrap();
    let p = env.scratch.join("run.sh");
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o644
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
    env.sb.str_replace("/scratch/run.sh", "1", "2").unwrap();
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o750
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "echo 2\n");
}

#[test]
fn zero_limits_are_refused_at_construction() {
    let env = Env::new();
    let limits = Limits {
        max_list_entries: 0,
        ..Limits::default()
    };
    let e = Sandbox::new(&env.input, &env.output, &env.scratch, limits).unwrap_err();
    assert!(matches!(
        e,
        SandboxError::InvalidLimit {
            field: "max_list_entries",
            ..
        }
    ));
}

#[test]
fn relative_paths_live_in_scratch() {
    let env = Env::new();
    env.sb.write_file("notes/todo.txt", "x").unwrap();
    assert!(env.scratch.join("notes/todo.txt").is_file());
    assert_eq!(
        env.sb
            .read_file("/scratch/notes/todo.txt", None, None)
            .unwrap()
            .content,
        "x"
    );
    assert_eq!(
        env.sb
            .read_file("./notes/../notes/todo.txt", None, None)
            .unwrap()
            .path,
        "/scratch/notes/todo.txt"
    );
}

#[test]
fn dots_and_repeated_slashes_are_normalised_the_same_everywhere() {
    let env = Env::new();
    let a = env.sb.write_file("//output//a.txt", "a").unwrap();
    let b = env.sb.write_file("/./output/./b.txt", "b").unwrap();
    assert_eq!(
        (a.path.as_str(), b.path.as_str()),
        ("/output/a.txt", "/output/b.txt")
    );
    for raw in [
        "/output/a.txt",
        "//output//a.txt",
        "/./output/./a.txt",
        "/output/./x/../a.txt",
    ] {
        let r = env.sb.read_file(raw, None, None).unwrap();
        assert_eq!(
            (r.path.as_str(), r.content.as_str()),
            ("/output/a.txt", "a"),
            "{raw}"
        );
    }
    assert_eq!(env.sb.list_dir("/./output/.").unwrap().path, "/output");
    assert_eq!(env.sb.list_dir("//output/").unwrap().path, "/output");
}

#[test]
fn a_file_path_with_a_trailing_slash_is_an_error() {
    let env = Env::new();
    for raw in ["/output/x.txt/", "/output/x.txt/.", "x.txt/"] {
        let e = env.sb.write_file(raw, "x").unwrap_err();
        assert!(
            matches!(e, SandboxError::TrailingSlash { .. }),
            "{raw}: {e}"
        );
        assert!(e.to_string().contains("ends with `/`"), "{e}");
    }
    assert!(!env.output.join("x.txt").exists());
    assert!(!env.scratch.join("x.txt").exists());
    env.sb.write_file("/output/y.txt", "y").unwrap();
    assert!(matches!(
        env.sb.read_file("/output/y.txt/", None, None).unwrap_err(),
        SandboxError::TrailingSlash { .. }
    ));
    assert!(matches!(
        env.sb.str_replace("/output/y.txt/", "y", "z").unwrap_err(),
        SandboxError::TrailingSlash { .. }
    ));
    assert_eq!(
        env.sb
            .read_file("/output/y.txt", None, None)
            .unwrap()
            .content,
        "y"
    );
}

#[test]
fn inputs_are_readable() {
    let env = Env::new();
    for (rel, bytes) in INPUTS {
        if let Ok(text) = std::str::from_utf8(bytes) {
            let r = env
                .sb
                .read_file(&format!("/input/{rel}"), None, None)
                .unwrap();
            assert_eq!(r.content, text);
        }
    }
}

#[test]
fn reads_page_and_say_so() {
    let limits = Limits {
        max_read_bytes: 1000,
        ..Limits::default()
    };
    let env = Env::with_limits(limits);
    let text: String = (0..300).map(|i| format!("{i:>9}\n")).collect();
    env.sb.write_file("/scratch/long.txt", &text).unwrap();
    let mut got = String::new();
    let mut offset = None;
    let mut pages = 0;
    loop {
        let r = env.sb.read_file("/scratch/long.txt", offset, None).unwrap();
        pages += 1;
        got.push_str(&r.content);
        assert_eq!(r.total_size, 3000);
        if !r.truncated {
            assert!(r.next_offset.is_none());
            break;
        }
        let next = r.next_offset.unwrap();
        assert!(
            r.note
                .as_deref()
                .unwrap()
                .contains(&format!("offset={next}")),
            "{:?}",
            r.note
        );
        offset = Some(next);
    }
    // The limit counts the text as the model receives it, a JSON string where each
    // newline is two characters: 1000 characters hold about 909 bytes of this file.
    assert_eq!(pages, 4);
    assert_eq!(got, text);
    // A limit above the maximum is clamped, and the note says why.
    let r = env
        .sb
        .read_file("/scratch/long.txt", None, Some(1 << 40))
        .unwrap();
    assert!(r.bytes <= 1000 && r.bytes > 900, "{}", r.bytes);
    assert!(serde_json::to_string(&r.content).unwrap().len() <= 1002);
    assert!(r.note.unwrap().contains("per-read maximum"));
    // A small explicit page.
    let r = env
        .sb
        .read_file("/scratch/long.txt", Some(10), Some(10))
        .unwrap();
    // (the newline would make it 11 characters as the model receives it)
    assert_eq!(r.content, "        1");
    let r = env
        .sb
        .read_file("/scratch/long.txt", Some(10), Some(11))
        .unwrap();
    assert_eq!(r.content, "        1\n");
    // Offset exactly at the end: empty, not an error.
    let r = env
        .sb
        .read_file("/scratch/long.txt", Some(3000), None)
        .unwrap();
    assert!(r.content.is_empty() && !r.truncated);
}

#[test]
fn pages_never_split_a_character() {
    let env = Env::new();
    let text = "é€😀".repeat(50);
    env.sb.write_file("/scratch/u.txt", &text).unwrap();
    let mut got = String::new();
    let mut offset = 0;
    while offset < text.len() as u64 {
        let r = env
            .sb
            .read_file("/scratch/u.txt", Some(offset), Some(7))
            .unwrap();
        assert!(!r.lossy, "page at {offset} split a character");
        assert!(r.bytes > 0);
        got.push_str(&r.content);
        offset += r.bytes;
    }
    assert_eq!(got, text);
}

#[test]
fn binary_reads_are_described_not_shown_and_base64_on_request() {
    use base64::Engine as _;
    use sha2::Digest as _;
    let env = Env::new();
    let raw = std::fs::read(env.input.join("bin.dat")).unwrap();
    let r = env.sb.read_file("/input/bin.dat", None, None).unwrap();
    assert!(r.binary && !r.lossy && r.content.is_empty());
    assert_eq!(r.bytes, raw.len() as u64);
    let digest = hex::encode(sha2::Sha256::digest(&raw));
    assert_eq!(r.sha256.as_deref(), Some(digest.as_str()));
    let note = r.note.unwrap();
    assert!(note.contains("binary") && note.contains(&digest), "{note}");
    let b = env
        .sb
        .read_file_as("/input/bin.dat", None, None, ReadAs::Base64)
        .unwrap();
    assert_eq!(b.encoding, ReadAs::Base64);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&b.content)
        .unwrap();
    assert_eq!(decoded, raw);
}

#[test]
fn the_read_limit_counts_what_the_model_receives() {
    let limits = Limits {
        max_read_bytes: 1 << 20,
        ..Limits::default()
    };
    let env = Env::with_limits(limits);
    // 1 MiB of NULs: binary, so the answer is a short description, not 6 MB of escapes.
    std::fs::write(env.scratch.join("zeros"), vec![0u8; 1 << 20]).unwrap();
    let r = env.sb.read_file("/scratch/zeros", None, None).unwrap();
    assert!(r.binary && r.content.is_empty());
    assert!(r.note.as_deref().unwrap().len() < 400);
    // 1 MiB of a control character that is valid UTF-8: each escapes to 6 characters,
    // and the page holds no more than the limit of them.
    std::fs::write(env.scratch.join("ctl"), vec![1u8; 1 << 20]).unwrap();
    let r = env.sb.read_file("/scratch/ctl", None, None).unwrap();
    let json = serde_json::to_string(&r.content).unwrap();
    assert!(json.len() <= (1 << 20) + 2, "{}", json.len());
    assert_eq!(r.bytes, (1 << 20) / 6);
    assert!(r.truncated && r.next_offset == Some(r.bytes));
    // A base64 slice is bounded the same way.
    let b = env
        .sb
        .read_file_as("/scratch/zeros", None, Some(4000), ReadAs::Base64)
        .unwrap();
    assert!(b.content.len() <= 4000 && b.bytes == 3000, "{}", b.bytes);
}

#[test]
fn huge_sparse_reads_are_capped_and_quick() {
    let env = Env::new();
    std::fs::File::create(env.scratch.join("huge"))
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    let started = std::time::Instant::now();
    let r = env.sb.read_file("/scratch/huge", None, None).unwrap();
    assert_eq!(r.bytes, 1 << 20);
    assert_eq!(r.total_size, 10 << 30);
    assert!(r.truncated);
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn str_replace_edits_exactly_one_match() {
    let env = Env::new();
    env.sb
        .write_file("/output/conf.toml", "a = 1\nb = 2\nc = 3\n")
        .unwrap();
    let r = env
        .sb
        .str_replace("/output/conf.toml", "b = 2", "b = 20")
        .unwrap();
    assert_eq!(r.line, 2);
    assert_eq!(r.bytes, 19);
    assert_eq!(
        std::fs::read_to_string(env.output.join("conf.toml")).unwrap(),
        "a = 1\nb = 20\nc = 3\n"
    );
    let e = env
        .sb
        .str_replace("/output/conf.toml", "", "x")
        .unwrap_err();
    assert!(matches!(e, SandboxError::EmptyPattern { .. }));
    let e = env
        .sb
        .str_replace("/output/conf.toml", " = ", "=")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "found 3 matches of the text to replace in `/output/conf.toml`; it must match exactly once"
    );
}

#[test]
fn list_dir_is_sorted_typed_capped_and_never_follows() {
    let limits = Limits {
        max_list_entries: 4,
        ..Limits::default()
    };
    let env = Env::with_limits(limits);
    env.sb.write_file("/scratch/b.txt", "bb").unwrap();
    env.sb.write_file("/scratch/a/x", "x").unwrap();
    std::os::unix::fs::symlink(&env.canary, env.scratch.join("c-link")).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(env.scratch.join("d-fifo"))
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(env.scratch.join(".provrun-tmp-1-1"), "partial").unwrap();
    let l = env.sb.list_dir("/scratch").unwrap();
    let got: Vec<_> = l
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        got,
        [
            ("a", EntryKind::Dir, 0),
            ("b.txt", EntryKind::File, 2),
            (
                "c-link",
                EntryKind::Symlink,
                env.canary.as_os_str().len() as u64
            ),
            ("d-fifo", EntryKind::Other, 0),
        ]
    );
    assert!(!l.truncated);
    env.sb.write_file("/scratch/e", "").unwrap();
    let l = env.sb.list_dir("/scratch").unwrap();
    assert!(l.truncated);
    assert_eq!((l.entries.len(), l.total), (4, 5));
    let roots = env.sb.list_dir("/").unwrap();
    let names: Vec<_> = roots.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["input", "output", "scratch"]);
    let inputs = env.sb.list_dir("/input").unwrap();
    let names: Vec<_> = inputs
        .entries
        .iter()
        .map(|e| format!("{}{}", e.name, e.kind.marker()))
        .collect();
    assert_eq!(names, ["a.txt", "bin.dat", "docs/"]);
    assert!(matches!(
        env.sb.list_dir("/input/a.txt"),
        Err(SandboxError::NotADirectory { .. })
    ));
}

#[test]
fn host_tools_work_inside_the_grant() {
    let env = Env::new();
    let l = env.sb.list_host_files(".").unwrap();
    assert_eq!(l.entries[0].name, "in");
    let l = env.sb.list_host_files("in").unwrap();
    assert_eq!(l.entries[0].name, "data.csv");
    let c = env
        .sb
        .copy_from_host("in/data.csv", "/scratch/data.csv")
        .unwrap();
    assert_eq!(
        (c.from.as_str(), c.to.as_str(), c.bytes),
        ("host:in/data.csv", "/scratch/data.csv", 8)
    );
    assert_eq!(
        std::fs::read(env.scratch.join("data.csv")).unwrap(),
        b"a,b\n1,2\n"
    );
    env.sb.write_file("/output/report.md", "report").unwrap();
    let c = env
        .sb
        .copy_to_host("/output/report.md", "out/report.md")
        .unwrap();
    assert_eq!(c.to, "host:out/report.md");
    assert_eq!(
        std::fs::read(env.host.join("out/report.md")).unwrap(),
        b"report"
    );
    // Replacing an existing host file, addressed by an absolute path inside the grant.
    let canonical = env.sb.host_dir().unwrap().to_owned();
    let abs = canonical.join("out/report.md");
    env.sb
        .copy_to_host("/input/a.txt", abs.to_str().unwrap())
        .unwrap();
    assert_eq!(
        std::fs::read(env.host.join("out/report.md")).unwrap(),
        INPUTS[0].1
    );
}

#[test]
fn staging_copies_files_and_folders_read_only() {
    let env = Env::new();
    for (rel, _) in INPUTS {
        let staged = std::fs::metadata(env.input.join(rel)).unwrap();
        let source = std::fs::metadata(env.src.join(rel)).unwrap();
        assert_ne!(staged.ino(), source.ino(), "{rel} was linked, not copied");
        assert_eq!(staged.nlink(), 1);
        assert_eq!(staged.permissions().mode() & 0o777, 0o444);
    }
    // A single file lands under its own name.
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one.txt");
    std::fs::write(&one, "1").unwrap();
    let dest = tmp.path().join("input");
    let staged = stage_inputs(&dest, &[&one, &env.src], &Limits::default()).unwrap();
    assert_eq!(
        staged,
        [
            "a.txt",
            "bin.dat",
            "docs/b.md",
            "docs/deep/c.txt",
            "one.txt"
        ]
    );
}

#[test]
fn staging_refuses_clashes_links_and_special_files_before_copying() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("input");
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("a.txt"), "clash").unwrap();
    let e = stage_inputs(&dest, &[&env.src, &other], &Limits::default()).unwrap_err();
    assert!(
        matches!(e, SandboxError::StageNameClash { ref name, .. } if name == "a.txt"),
        "{e}"
    );

    let linked = tmp.path().join("linked");
    std::fs::create_dir_all(linked.join("sub")).unwrap();
    std::fs::write(linked.join("sub/ok.txt"), "ok").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", linked.join("sub/passwd")).unwrap();
    let dest2 = tmp.path().join("input2");
    let e = stage_inputs(&dest2, &[&linked], &Limits::default()).unwrap_err();
    assert!(matches!(e, SandboxError::StageSymlink { .. }), "{e}");
    assert!(e.to_string().contains("sub/passwd"));
    assert_eq!(
        std::fs::read_dir(&dest2).unwrap().count(),
        0,
        "nothing is copied when a check fails"
    );

    let link = tmp.path().join("link.txt");
    std::os::unix::fs::symlink(env.src.join("a.txt"), &link).unwrap();
    assert!(matches!(
        stage_inputs(&dest2, &[&link], &Limits::default()),
        Err(SandboxError::StageSymlink { .. })
    ));

    let fifo = tmp.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert!(matches!(
        stage_inputs(&dest2, &[&fifo], &Limits::default()),
        Err(SandboxError::StageSpecialFile { kind: "FIFO", .. })
    ));
}

#[test]
fn staging_a_folder_that_holds_the_bundle_skips_the_input_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(work.join("out/input")).unwrap();
    std::fs::write(work.join("data.txt"), "d").unwrap();
    let staged = stage_inputs(&work.join("out/input"), &[&work], &Limits::default()).unwrap();
    assert_eq!(staged, ["data.txt"]);
    assert!(!work.join("out/input/out/input").exists());
}

#[test]
fn quota_tracks_writes_and_replacements() {
    let env = Env::new();
    assert_eq!(env.sb.usage().bytes, 0);
    env.sb.write_file("/output/a/b.txt", "12345").unwrap();
    let u = env.sb.usage();
    assert_eq!((u.bytes, u.files), (5, 2), "one directory and one file");
    env.sb.write_file("/output/a/b.txt", "12").unwrap();
    assert_eq!(env.sb.usage().bytes, 2);
    std::fs::write(env.scratch.join("behind"), "123").unwrap();
    let u = env.sb.recount().unwrap();
    assert_eq!((u.bytes, u.files), (5, 3));
}

#[test]
fn parallel_writes_of_different_files() {
    let env = Env::new();
    std::thread::scope(|s| {
        for t in 0..16 {
            let sb = env.sb.clone();
            s.spawn(move || {
                for i in 0..25 {
                    let body = format!("thread {t} file {i}\n");
                    sb.write_file(&format!("/output/t{t}/f{i}.txt"), &body)
                        .unwrap();
                    sb.write_file(&format!("/scratch/shared/t{t}-f{i}.txt"), &body)
                        .unwrap();
                }
            });
        }
    });
    for t in 0..16 {
        for i in 0..25 {
            let want = format!("thread {t} file {i}\n");
            assert_eq!(
                std::fs::read_to_string(env.output.join(format!("t{t}/f{i}.txt"))).unwrap(),
                want
            );
            let r = env
                .sb
                .read_file(&format!("/scratch/shared/t{t}-f{i}.txt"), None, None)
                .unwrap();
            assert_eq!(r.content, want);
        }
    }
    let counted = env.sb.usage();
    assert_eq!(
        env.sb.recount().unwrap(),
        counted,
        "the quota's running count matches the disk"
    );
    assert_eq!(counted.files, 16 * 25 * 2 + 16 + 1);
}

#[test]
fn two_sandboxes_never_see_each_other() {
    let a = Env::new();
    let b = Env::new();
    a.sb.write_file("/output/only-a.txt", "a").unwrap();
    a.sb.write_file("scratch-a.txt", "a").unwrap();
    b.sb.write_file("/output/only-b.txt", "b").unwrap();
    assert!(matches!(
        b.sb.read_file("/output/only-a.txt", None, None),
        Err(SandboxError::NotFound { .. })
    ));
    assert!(matches!(
        b.sb.read_file("scratch-a.txt", None, None),
        Err(SandboxError::NotFound { .. })
    ));
    let names: Vec<_> =
        b.sb.list_dir("/output")
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.name)
            .collect();
    assert_eq!(names, ["only-b.txt"]);
    // Even a host path of the other sandbox is just a refused absolute path.
    let other = a.output.join("only-a.txt");
    assert!(matches!(
        b.sb.read_file(other.to_str().unwrap(), None, None),
        Err(SandboxError::OutsideSandbox { .. })
    ));
    assert_eq!(a.sb.usage().files, 2);
    assert_eq!(b.sb.usage().files, 1);
}

#[test]
fn temp_scratch_is_removed_with_the_last_clone() {
    let env = Env::new();
    let sb = Sandbox::with_temp_scratch(&env.input, &env.output, Limits::default()).unwrap();
    let scratch = sb.root_paths().get(Root::Scratch).to_owned();
    sb.write_file("x", "x").unwrap();
    assert!(scratch.join("x").is_file());
    let clone = sb.clone();
    drop(sb);
    assert!(scratch.exists());
    drop(clone);
    assert!(!scratch.exists());
}

#[test]
fn limits_come_from_a_toml_table() {
    let l: Limits = toml::from_str("max_read_bytes = 4096\nmax_files = 7\n").unwrap();
    assert_eq!(l.max_read_bytes, 4096);
    assert_eq!(l.max_files, 7);
    assert_eq!(l.max_write_bytes, Limits::default().max_write_bytes);
    assert!(toml::from_str::<Limits>("max_reads = 1").is_err());
    assert_eq!(toml::from_str::<Limits>("").unwrap(), Limits::default());
}

#[test]
fn virtual_paths_render_and_parse_back() {
    let l = Limits::default();
    for raw in ["/input/a", "/output/x/y.md", "/scratch/z"] {
        assert_eq!(VirtualPath::parse(raw, &l).unwrap().to_string(), raw);
    }
}

/// Counts this process's open descriptors naming `dir`.
fn fds_on(dir: &std::path::Path) -> usize {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == dir))
        .count()
}

#[test]
fn released_handles_close_and_reopen_on_use() {
    let env = Env::new();
    assert_eq!(env.sb.open_handles(), 3);
    assert_eq!(fds_on(&env.output), 1);
    env.sb.release_handles();
    assert_eq!(env.sb.open_handles(), 0);
    assert_eq!(fds_on(&env.input), 0, "a released root holds no descriptor");
    assert_eq!(fds_on(&env.output), 0);
    assert_eq!(fds_on(&env.scratch), 0);
    // The next operation on a root opens that root only.
    assert_eq!(
        env.sb
            .read_file("/input/a.txt", None, None)
            .unwrap()
            .content,
        "alpha\nbeta\n"
    );
    assert_eq!(env.sb.open_handles(), 1);
    assert_eq!(fds_on(&env.input), 1);
    env.sb.write_file("/output/x.txt", "x").unwrap();
    assert_eq!(std::fs::read(env.output.join("x.txt")).unwrap(), b"x");
    assert_eq!(env.sb.open_handles(), 2);
    // Clones share the handles.
    let clone = env.sb.clone();
    clone.release_handles();
    assert_eq!(env.sb.open_handles(), 0);
}

#[test]
fn a_root_swapped_while_released_is_refused() {
    let env = Env::new();
    env.sb.write_file("/output/first.txt", "1").unwrap();
    env.sb.release_handles();
    // Someone moves the folder away and puts another one in its place.
    let moved = env.base.join("moved-output");
    std::fs::rename(&env.output, &moved).unwrap();
    std::fs::create_dir(&env.output).unwrap();
    let err = env.sb.write_file("/output/second.txt", "2").unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::RootReplaced {
                root: "/output",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("was replaced"), "{err}");
    assert_eq!(
        std::fs::read_dir(&env.output).unwrap().count(),
        0,
        "nothing is written into the folder swapped in"
    );
    assert!(!moved.join("second.txt").exists());
    // A root that is gone is an error too, not a panic.
    std::fs::remove_dir(&env.output).unwrap();
    let err = env.sb.list_dir("/output").unwrap_err();
    assert!(matches!(err, SandboxError::Io { .. }), "{err:?}");
    // The roots not touched keep working.
    assert!(env.sb.read_file("/input/a.txt", None, None).is_ok());
}
