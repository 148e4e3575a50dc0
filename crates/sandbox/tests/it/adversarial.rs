//! Adversarial suite: hostile paths and hostile file-system states.
//!
//! Each case prepares a state, makes one sandbox call that must fail, and then asserts the
//! three things that matter: the call failed with the expected error variant, nothing
//! outside /output and /scratch changed (inputs, sources, canary folder, host folder), and
//! the staged inputs are byte-identical to the user's files. Every call runs under a
//! watchdog, so a FIFO that blocked would fail the case instead of hanging the suite.

use crate::common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::Env;
use provrun_sandbox::{Limits, Sandbox, SandboxError};

type Op = fn(&Env) -> Result<(), SandboxError>;

fn run_case(
    name: &str,
    limits: Limits,
    setup: fn(&mut Env),
    op: Op,
    expected: fn(&SandboxError) -> bool,
) {
    let mut env = Env::with_limits(limits);
    setup(&mut env);
    let before = env.outside();
    let env = Arc::new(env);
    let (tx, rx) = mpsc::channel();
    let worker = Arc::clone(&env);
    std::thread::spawn(move || {
        let _ = tx.send(op(&worker));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{name}: the call hung or panicked"));
    match result {
        Ok(()) => panic!("{name}: the call succeeded but must fail"),
        Err(e) => {
            assert!(expected(&e), "{name}: wrong error: {e:?} ({e})");
            let msg = e.to_string();
            assert!(!msg.is_empty());
            assert!(
                !msg.contains(env.base.to_str().unwrap())
                    || matches!(
                        e,
                        SandboxError::OutsideSandbox { .. } | SandboxError::OutsideHostDir { .. }
                    ),
                "{name}: message leaks a host path: {msg}"
            );
        }
    }
    assert!(
        env.outside() == before,
        "{name}: something outside the sandbox changed"
    );
    env.assert_inputs_intact();
}

macro_rules! cases {
    ($($name:ident $(limits $limits:expr;)? setup $setup:expr; op $op:expr; err $pat:pat,)*) => {$(
        #[test]
        fn $name() {
            #[allow(unused_mut, unused_assignments)]
            let mut limits = Limits::default();
            $(limits = $limits;)?
            run_case(stringify!($name), limits, $setup, $op, |e| matches!(e, $pat));
        }
    )*};
}

fn nothing(_: &mut Env) {}

fn small_quota() -> Limits {
    Limits {
        max_total_bytes: 1_000,
        max_files: 3,
        max_write_bytes: 800,
        ..Limits::default()
    }
}

fn no_host(env: &mut Env) {
    env.sb = Sandbox::new(&env.input, &env.output, &env.scratch, env.limits.clone()).unwrap();
}

cases! {
    // --- lexical path rules -------------------------------------------------------------
    traversal_out_of_input
        setup nothing; op |e| e.sb.read_file("/input/../../canary/secret.txt", None, None).map(drop);
        err SandboxError::Traversal { .. },
    traversal_relative_write
        setup nothing; op |e| e.sb.write_file("../canary/secret.txt", "x").map(drop);
        err SandboxError::Traversal { .. },
    traversal_output_into_input
        setup nothing; op |e| e.sb.write_file("/output/../input/a.txt", "x").map(drop);
        err SandboxError::Traversal { .. },
    traversal_many_dotdots
        setup nothing; op |e| e.sb.write_file("/scratch/a/../../../../../tmp/x", "x").map(drop);
        err SandboxError::Traversal { .. },
    absolute_etc_passwd
        setup nothing; op |e| e.sb.read_file("/etc/passwd", None, None).map(drop);
        err SandboxError::OutsideSandbox { .. },
    absolute_proc
        setup nothing; op |e| e.sb.read_file("/proc/self/environ", None, None).map(drop);
        err SandboxError::OutsideSandbox { .. },
    absolute_host_path_of_canary
        setup nothing;
        op |e| e.sb.write_file(e.canary.join("secret.txt").to_str().unwrap(), "x").map(drop);
        err SandboxError::OutsideSandbox { .. },
    bare_root_slash
        setup nothing; op |e| e.sb.write_file("/", "x").map(drop);
        err SandboxError::OutsideSandbox { .. },
    file_url
        setup nothing; op |e| e.sb.read_file("file:///etc/passwd", None, None).map(drop);
        err SandboxError::UrlScheme { .. },
    tilde_home
        setup nothing; op |e| e.sb.read_file("~/.ssh/id_rsa", None, None).map(drop);
        err SandboxError::HomeDirectory { .. },
    nul_byte
        setup nothing; op |e| e.sb.write_file("/output/a\0/../../canary/secret.txt", "x").map(drop);
        err SandboxError::NulByte { .. },
    newline_in_name
        setup nothing; op |e| e.sb.write_file("/output/a\nb", "x").map(drop);
        err SandboxError::ControlCharacter { .. },
    backslash_traversal
        setup nothing; op |e| e.sb.read_file("\\..\\..\\etc\\passwd", None, None).map(drop);
        err SandboxError::Backslash { .. },
    backslash_after_root
        setup nothing; op |e| e.sb.write_file("/output\\..\\..\\canary\\secret.txt", "x").map(drop);
        err SandboxError::Backslash { .. },
    lookalike_case
        setup nothing; op |e| e.sb.write_file("/Output/x", "x").map(drop);
        err SandboxError::LookAlikeRoot { meant: "output", .. },
    lookalike_cyrillic
        setup nothing; op |e| e.sb.write_file("/\u{43e}utput/x", "x").map(drop);
        err SandboxError::LookAlikeRoot { meant: "output", .. },
    lookalike_fullwidth
        setup nothing; op |e| e.sb.read_file("/\u{ff49}\u{ff4e}\u{ff50}\u{ff55}\u{ff54}/a.txt", None, None).map(drop);
        err SandboxError::LookAlikeRoot { meant: "input", .. },
    lookalike_zero_width
        setup nothing; op |e| e.sb.write_file("/scr\u{200b}atch/x", "x").map(drop);
        err SandboxError::LookAlikeRoot { meant: "scratch", .. },
    long_name
        setup nothing; op |e| e.sb.write_file(&format!("/output/{}", "n".repeat(300)), "x").map(drop);
        err SandboxError::NameTooLong { .. },
    long_path
        setup nothing; op |e| e.sb.write_file(&format!("/output/{}", "abcdefg/".repeat(200)), "x").map(drop);
        err SandboxError::PathTooLong { .. },
    deep_path
        setup nothing; op |e| e.sb.write_file(&format!("/scratch/{}f", "d/".repeat(40)), "x").map(drop);
        err SandboxError::TooDeep { .. },
    empty_path
        setup nothing; op |e| e.sb.write_file("", "x").map(drop);
        err SandboxError::EmptyPath,

    // --- /input is read-only ------------------------------------------------------------
    write_over_input
        setup nothing; op |e| e.sb.write_file("/input/a.txt", "pwned").map(drop);
        err SandboxError::InputReadOnly { .. },
    write_new_file_in_input
        setup nothing; op |e| e.sb.write_file("/input/docs/new.txt", "x").map(drop);
        err SandboxError::InputReadOnly { .. },
    str_replace_in_input
        setup nothing; op |e| e.sb.str_replace("/input/a.txt", "alpha", "omega").map(drop);
        err SandboxError::InputReadOnly { .. },
    copy_from_host_into_input
        setup nothing; op |e| e.sb.copy_from_host("in/data.csv", "/input/a.txt").map(drop);
        err SandboxError::InputReadOnly { .. },

    // --- symbolic links -------------------------------------------------------------------
    symlink_out_read
        setup |e| e.symlink(e.canary.join("secret.txt"), e.scratch.join("link"));
        op |e| e.sb.read_file("/scratch/link", None, None).map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlink_out_write
        setup |e| e.symlink(e.canary.join("secret.txt"), e.scratch.join("link"));
        op |e| e.sb.write_file("/scratch/link", "pwned").map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlink_relative_out_read
        setup |e| e.symlink("../canary/secret.txt", e.scratch.join("rel"));
        op |e| e.sb.read_file("rel", None, None).map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlinked_dir_out_write
        setup |e| e.symlink(&e.canary, e.scratch.join("d"));
        op |e| e.sb.write_file("/scratch/d/new.txt", "x").map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlinked_dir_list
        setup |e| e.symlink(&e.canary, e.output.join("d"));
        op |e| e.sb.list_dir("/output/d").map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlink_into_input_write
        setup |e| e.symlink(e.input.join("a.txt"), e.output.join("in"));
        op |e| e.sb.write_file("/output/in", "pwned").map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlink_into_input_str_replace
        setup |e| e.symlink(e.input.join("a.txt"), e.scratch.join("in"));
        op |e| e.sb.str_replace("/scratch/in", "alpha", "omega").map(drop);
        err SandboxError::SymlinkRefused { .. },
    symlink_swapped_between_calls
        setup |e| {
            e.sb.write_file("/scratch/f.txt", "first").unwrap();
            std::fs::remove_file(e.scratch.join("f.txt")).unwrap();
            e.symlink(e.canary.join("secret.txt"), e.scratch.join("f.txt"));
        };
        op |e| e.sb.write_file("/scratch/f.txt", "second").map(drop);
        err SandboxError::SymlinkRefused { .. },
    dir_swapped_for_symlink_between_calls
        setup |e| {
            e.sb.write_file("/output/d/f.txt", "first").unwrap();
            std::fs::remove_dir_all(e.output.join("d")).unwrap();
            e.symlink(&e.canary, e.output.join("d"));
        };
        op |e| e.sb.write_file("/output/d/secret.txt", "pwned").map(drop);
        err SandboxError::SymlinkRefused { .. },
    copy_to_host_through_host_symlink
        setup |e| e.symlink(e.canary.join("secret.txt"), e.host.join("out.txt"));
        op |e| e.sb.copy_to_host("/input/a.txt", "out.txt").map(drop);
        err SandboxError::SymlinkRefused { .. },
    copy_from_host_symlink_out
        setup |e| e.symlink(e.canary.join("secret.txt"), e.host.join("leak"));
        op |e| e.sb.copy_from_host("leak", "/output/leak").map(drop);
        err SandboxError::SymlinkRefused { .. },

    // --- hard links -----------------------------------------------------------------------
    hard_link_to_input_write
        setup |e| std::fs::hard_link(e.input.join("a.txt"), e.scratch.join("hl")).unwrap();
        op |e| e.sb.write_file("/scratch/hl", "pwned").map(drop);
        err SandboxError::HardLinked { links: 2, .. },
    hard_link_to_input_str_replace
        setup |e| std::fs::hard_link(e.input.join("a.txt"), e.output.join("hl")).unwrap();
        op |e| e.sb.str_replace("/output/hl", "alpha", "omega").map(drop);
        err SandboxError::HardLinked { .. },
    hard_link_to_canary
        setup |e| std::fs::hard_link(e.canary.join("secret.txt"), e.output.join("hl")).unwrap();
        op |e| e.sb.write_file("/output/hl", "pwned").map(drop);
        err SandboxError::HardLinked { .. },

    // --- FIFOs, devices, sockets ----------------------------------------------------------
    fifo_read_does_not_hang
        setup |e| e.mkfifo(&e.scratch.join("fifo"));
        op |e| e.sb.read_file("/scratch/fifo", None, None).map(drop);
        err SandboxError::NotARegularFile { kind: "FIFO", .. },
    fifo_write_does_not_hang
        setup |e| e.mkfifo(&e.output.join("fifo"));
        op |e| e.sb.write_file("/output/fifo", "x").map(drop);
        err SandboxError::NotARegularFile { kind: "FIFO", .. },
    fifo_on_host_copy_from
        setup |e| e.mkfifo(&e.host.join("fifo"));
        op |e| e.sb.copy_from_host("fifo", "/scratch/x").map(drop);
        err SandboxError::NotARegularFile { .. },
    char_device_read
        setup |e| {
            let st = std::process::Command::new("mknod")
                .arg(e.scratch.join("null")).args(["c", "1", "3"]).status().unwrap();
            assert!(st.success());
        };
        op |e| e.sb.read_file("/scratch/null", None, None).map(drop);
        err SandboxError::NotARegularFile { kind: "character device", .. },
    socket_read
        setup |e| { std::os::unix::net::UnixListener::bind(e.scratch.join("sock")).unwrap(); };
        op |e| e.sb.read_file("/scratch/sock", None, None).map(drop);
        err SandboxError::NotARegularFile { kind: "socket", .. },

    // --- limits and quotas ----------------------------------------------------------------
    quota_bytes_exhausted
        limits small_quota();
        setup |e| { e.sb.write_file("/output/a", vec![b'a'; 600]).unwrap(); };
        op |e| e.sb.write_file("/scratch/b", vec![b'b'; 600]).map(drop);
        err SandboxError::QuotaBytes { max: 1_000, .. },
    quota_files_exhausted
        limits small_quota();
        setup |e| { for n in ["a", "b", "c"] { e.sb.write_file(&format!("/output/{n}"), "x").unwrap(); } };
        op |e| e.sb.write_file("/output/d", "x").map(drop);
        err SandboxError::QuotaFiles { max: 3, .. },
    quota_counts_directories
        limits small_quota();
        setup |e| { e.sb.write_file("/output/a", "x").unwrap(); };
        op |e| e.sb.write_file("/output/x/y/z.txt", "x").map(drop);
        err SandboxError::QuotaFiles { .. },
    quota_counts_sparse_files_by_size
        limits small_quota();
        setup |e| {
            std::fs::File::create(e.scratch.join("sparse")).unwrap().set_len(1 << 30).unwrap();
            e.reopen(small_quota());
        };
        op |e| e.sb.write_file("/output/one", "1").map(drop);
        err SandboxError::QuotaBytes { .. },
    write_too_large
        setup nothing; op |e| e.sb.write_file("/output/big", vec![0u8; (8 << 20) + 1]).map(drop);
        err SandboxError::WriteTooLarge { .. },
    str_replace_grows_past_write_limit
        limits small_quota();
        setup |e| { e.sb.write_file("/output/t.txt", "hello").unwrap(); };
        op |e| e.sb.str_replace("/output/t.txt", "hello", &"h".repeat(900)).map(drop);
        err SandboxError::WriteTooLarge { .. },
    str_replace_huge_sparse_file
        setup |e| std::fs::File::create(e.scratch.join("huge")).unwrap().set_len(10 << 30).unwrap();
        op |e| e.sb.str_replace("/scratch/huge", "a", "b").map(drop);
        err SandboxError::FileTooLarge { .. },
    copy_to_host_huge_sparse_file
        setup |e| std::fs::File::create(e.scratch.join("huge")).unwrap().set_len(10 << 30).unwrap();
        op |e| e.sb.copy_to_host("/scratch/huge", "huge").map(drop);
        err SandboxError::FileTooLarge { .. },
    read_offset_past_end
        setup nothing; op |e| e.sb.read_file("/input/a.txt", Some(1 << 40), None).map(drop);
        err SandboxError::OffsetPastEnd { .. },
    deep_tree_made_behind_our_back
        setup |e| std::fs::create_dir_all(e.scratch.join("d/".repeat(40))).unwrap();
        op |e| e.sb.list_dir(&format!("/scratch/{}", "d/".repeat(40))).map(drop);
        err SandboxError::TooDeep { .. },

    // --- host folder ----------------------------------------------------------------------
    host_tools_without_grant
        setup no_host; op |e| e.sb.list_host_files(".").map(drop);
        err SandboxError::HostAccessNotGranted,
    copy_to_host_without_grant
        setup no_host; op |e| e.sb.copy_to_host("/input/a.txt", "a.txt").map(drop);
        err SandboxError::HostAccessNotGranted,
    copy_to_host_traversal
        setup nothing; op |e| e.sb.copy_to_host("/input/a.txt", "../canary/secret.txt").map(drop);
        err SandboxError::Traversal { .. },
    copy_to_host_absolute_outside
        setup nothing; op |e| e.sb.copy_to_host("/input/a.txt", e.canary.join("secret.txt").to_str().unwrap()).map(drop);
        err SandboxError::OutsideHostDir { .. },
    list_host_root_of_filesystem
        setup nothing; op |e| e.sb.list_host_files("/").map(drop);
        err SandboxError::OutsideHostDir { .. },
    copy_to_host_into_staged_inputs
        setup |e| e.sb = e.sb.clone().with_host_dir(&e.base).unwrap();
        op |e| e.sb.copy_to_host("/input/docs/b.md", "bundle/input/a.txt").map(drop);
        err SandboxError::HostPathInSandbox { root: "/input", .. },
    copy_to_host_into_output_bypassing_quota
        setup |e| e.sb = e.sb.clone().with_host_dir(&e.base).unwrap();
        op |e| e.sb.copy_to_host("/input/a.txt", "bundle/output/a.txt").map(drop);
        err SandboxError::HostPathInSandbox { root: "/output", .. },
    copy_from_host_tilde
        setup nothing; op |e| e.sb.copy_from_host("~/.bashrc", "/output/x").map(drop);
        err SandboxError::HomeDirectory { .. },

    // --- shapes and contents --------------------------------------------------------------
    write_onto_root
        setup nothing; op |e| e.sb.write_file("/output", "x").map(drop);
        err SandboxError::IsADirectory { .. },
    write_onto_directory
        setup |e| std::fs::create_dir(e.output.join("dir")).unwrap();
        op |e| e.sb.write_file("/output/dir", "x").map(drop);
        err SandboxError::IsADirectory { .. },
    write_below_a_file
        setup |e| { e.sb.write_file("/scratch/f", "x").unwrap(); };
        op |e| e.sb.write_file("/scratch/f/g", "x").map(drop);
        err SandboxError::NotADirectory { .. },
    str_replace_binary
        setup |e| { e.sb.write_file("/output/b.bin", b"\x00\x01abc\xff").unwrap(); };
        op |e| e.sb.str_replace("/output/b.bin", "abc", "xyz").map(drop);
        err SandboxError::BinaryFile { .. },
    str_replace_two_matches
        setup |e| { e.sb.write_file("/output/t.txt", "x = 1\nx = 1\n").unwrap(); };
        op |e| e.sb.str_replace("/output/t.txt", "x = 1", "x = 2").map(drop);
        err SandboxError::MatchCount { count: 2, .. },
    str_replace_no_match
        setup |e| { e.sb.write_file("/output/t.txt", "hello").unwrap(); };
        op |e| e.sb.str_replace("/output/t.txt", "bye", "x").map(drop);
        err SandboxError::MatchCount { count: 0, .. },
    read_missing
        setup nothing; op |e| e.sb.read_file("/input/nope.txt", None, None).map(drop);
        err SandboxError::NotFound { .. },
}

/// Random paths built from hostile pieces never write outside the writable roots and never
/// panic; whatever they do, the inputs and everything outside stay as they were.
#[test]
fn random_hostile_paths_stay_inside() {
    use proptest::prelude::*;
    let env = Env::new();
    let before = env.outside();
    let piece = prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("".to_owned()),
        Just("input".to_owned()),
        Just("output".to_owned()),
        Just("scratch".to_owned()),
        Just("canary".to_owned()),
        Just("secret.txt".to_owned()),
        Just("a.txt".to_owned()),
        Just("~".to_owned()),
        Just("\\".to_owned()),
        Just("\u{0}".to_owned()),
        Just("\u{43e}utput".to_owned()),
        "[a-z]{1,3}",
    ];
    let strategy = (any::<bool>(), proptest::collection::vec(piece, 0..8));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 512,
        ..ProptestConfig::default()
    });
    runner
        .run(&strategy, |(absolute, pieces)| {
            let path = format!("{}{}", if absolute { "/" } else { "" }, pieces.join("/"));
            let _ = env.sb.write_file(&path, "fuzz");
            let _ = env.sb.read_file(&path, None, None);
            let _ = env.sb.str_replace(&path, "fuzz", "zz");
            let _ = env.sb.list_dir(&path);
            let _ = env.sb.copy_to_host(&path, &path);
            let _ = env.sb.copy_from_host(&path, &path);
            Ok(())
        })
        .unwrap();
    assert!(env.outside() == before || only_host_gained_files(&env, &before));
    env.assert_inputs_intact();
}

/// `copy_to_host` may legitimately create files in the host folder; nothing else may change.
fn only_host_gained_files(
    env: &Env,
    before: &std::collections::BTreeMap<std::path::PathBuf, common::Node>,
) -> bool {
    let after = env.outside();
    before.iter().all(|(p, n)| after.get(p) == Some(n))
        && after
            .keys()
            .filter(|p| !before.contains_key(*p))
            .all(|p| p.starts_with("host"))
}

/// A link, FIFO and regular file swapped in and out under the same name while another thread
/// reads and writes it: no call follows the link out, none hangs, the canary stays intact.
#[test]
fn racing_swaps_never_escape() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = Env::new();
    let before = env.outside();
    let stop = AtomicBool::new(false);
    let file = env.scratch.join("race");
    let dir = env.scratch.join("racedir");
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&file);
                let _ = std::fs::remove_file(&dir);
                let _ = std::fs::remove_dir_all(&dir);
                match n % 3 {
                    0 => {
                        let _ = std::os::unix::fs::symlink(env.canary.join("secret.txt"), &file);
                        let _ = std::os::unix::fs::symlink(&env.canary, &dir);
                    }
                    1 => {
                        let _ = std::fs::write(&file, "plain");
                        let _ = std::fs::create_dir(&dir);
                    }
                    _ => {
                        let _ = std::process::Command::new("mkfifo").arg(&file).status();
                    }
                }
                n += 1;
            }
        });
        let worker = s.spawn(|| {
            for _ in 0..300 {
                let _ = env.sb.write_file("/scratch/race", "pwned");
                let _ = env.sb.read_file("/scratch/race", None, None);
                let _ = env.sb.str_replace("/scratch/race", "plain", "pwned");
                let _ = env.sb.write_file("/scratch/racedir/secret.txt", "pwned");
                let _ = env.sb.list_dir("/scratch/racedir");
            }
        });
        let started = std::time::Instant::now();
        while !worker.is_finished() {
            assert!(started.elapsed().as_secs() < 60, "a sandbox call hung");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        env.outside() == before,
        "a swap let a call escape the sandbox"
    );
    env.assert_inputs_intact();
}
