//! Untrusted text never reaches a terminal raw: a bundle whose tool results, call ids,
//! file names and answer hold every C0 and C1 control, DEL, and every bidi and invisible
//! character, shown by `provrun show`, `verify` and `run` on a real pseudo-terminal (in
//! raw mode, so the bytes read are the bytes written): the output holds none of them,
//! and shows each as a visible escape.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The characters a terminal must never get raw, listed here independently of the CLI's
/// own table: C0 controls, DEL, C1 controls, the bidi marks, embeddings, overrides and
/// isolates, and the zero-width and invisible characters.
fn hostile() -> Vec<char> {
    let mut all: Vec<char> = (0u32..0x20)
        .chain(0x7F..=0x9F)
        .chain(0x202A..=0x202E)
        .chain(0x2066..=0x2069)
        .chain([0x200E, 0x200F, 0x061C])
        .chain([
            0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x2028, 0x2029, 0x180E,
        ])
        .chain(0xE0020..=0xE007F)
        .filter_map(char::from_u32)
        .collect();
    all.retain(|&c| c != '\0'); // JSON strings may hold it, but keep file names simple
    all
}

/// How the CLI shows `c`: `\n`, `\t`, `\r`, `\xNN` up to U+009F, else `\u{N}`.
fn escaped(c: char) -> String {
    match c {
        '\n' => "\\n".into(),
        '\t' => "\\t".into(),
        '\r' => "\\r".into(),
        _ if u32::from(c) <= 0x9F => format!("\\x{:02x}", u32::from(c)),
        _ => format!("\\u{{{:x}}}", u32::from(c)),
    }
}

/// Runs provrun with stdout and stderr on a new pseudo-terminal in raw mode; returns all
/// it wrote there and its exit code.
fn on_a_terminal(args: &[&str], dir: &Path) -> (Vec<u8>, Option<i32>) {
    terminal_run(args, dir, true)
}

/// Like [`on_a_terminal`]; with `stderr_too` false stderr goes to a pipe (and is dropped):
/// `run`'s progress line, which draws with its own escapes, stays off the terminal.
fn terminal_run(args: &[&str], dir: &Path, stderr_too: bool) -> (Vec<u8>, Option<i32>) {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    // Close-on-exec: the other tests of this process start children at any moment, and a
    // child that inherited this descriptor would hold the terminal open, so the reader
    // below would wait for that child's end too. The child here gets its copies through
    // `Stdio`, which clears the flag on them.
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    let mut raw = rustix::termios::tcgetattr(&slave).unwrap();
    raw.make_raw();
    rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &raw).unwrap();
    let slave = std::fs::File::from(slave);
    let mut child = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .current_dir(dir)
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null())
        .stdout(slave.try_clone().unwrap())
        .stderr(if stderr_too {
            Stdio::from(slave)
        } else {
            // Not kept open here: the reader below ends when the child's copies close.
            drop(slave);
            Stdio::null()
        })
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(master);
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                // EIO: every descriptor of the terminal's other side is closed.
                Err(_) => break,
            }
        }
        all
    });
    let status = child.wait().unwrap();
    (reader.join().unwrap(), status.code())
}

#[track_caller]
fn assert_inert(what: &str, bytes: &[u8], expect_all: bool) {
    let text = String::from_utf8(bytes.to_vec())
        .unwrap_or_else(|e| panic!("{what}: the terminal got bytes that are not UTF-8: {e}"));
    for c in hostile() {
        if c == '\n' {
            continue; // the layout's own line ends
        }
        assert!(
            !text.contains(c),
            "{what}: U+{:04X} reached the terminal raw:\n{text}",
            u32::from(c)
        );
        if expect_all {
            assert!(
                text.contains(&escaped(c)),
                "{what}: U+{:04X} is not shown as {}:\n{text}",
                u32::from(c),
                escaped(c)
            );
        }
    }
}

fn bundle_with_every_hostile_character(dir: &Path) -> std::path::PathBuf {
    let all: String = hostile().into_iter().collect();
    let visible: String = hostile().into_iter().filter(|c| !c.is_control()).collect();
    // An input whose name holds the invisible and bidi characters and whose bytes hold
    // every one; the model reads it (the result holds them all), calls with an id holding
    // them all, and answers with them all.
    let input = dir.join("in");
    std::fs::create_dir(&input).unwrap();
    let chars: Vec<char> = visible.chars().collect();
    let names: Vec<String> = chars
        .chunks(30)
        .map(|chunk| format!("n{}.txt", chunk.iter().collect::<String>()))
        .collect();
    for name in &names {
        std::fs::write(input.join(name), &all).unwrap();
    }
    let file_name = &names[0];
    let script = serde_json::json!([
        {"tool_calls": [
            {"id": format!("id{all}"), "name": "read_file",
             "arguments": {"path": format!("/input/{file_name}")}},
            {"id": "two", "name": format!("tool{all}"), "arguments": {}}
        ]},
        {"text": format!("answer{all}end")}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        "name = \"hostile\"\nmodel = \"script:script.json\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    dir.join("bundle")
}

#[test]
fn show_verify_and_run_never_write_a_control_or_invisible_character_raw() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_with_every_hostile_character(dir.path());
    let bundle_s = bundle.display().to_string();

    // run, its answer on a terminal: inert, every character escaped visibly.
    let (out, code) = terminal_run(
        &["run", "agent.toml", "--input", "in", "--out", &bundle_s],
        dir.path(),
        false,
    );
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&out));
    assert_inert("run", &out, true);
    assert!(String::from_utf8_lossy(&out).contains("answer\\x01"));

    // The same answer into a pipe stays raw: it is the product's output.
    let piped = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(["run", "agent.toml", "--input", "in", "--out", "bundle2"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0));
    let all: String = hostile().into_iter().collect();
    assert_eq!(
        String::from_utf8(piped.stdout).unwrap(),
        format!("answer{all}end\n")
    );

    // show: the call id in full, the file name, the results.
    let (out, code) = on_a_terminal(&["show", &bundle_s], dir.path());
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&out));
    assert_inert("show", &out, true);

    // verify, plain and JSON.
    for args in [
        vec!["verify", &bundle_s],
        vec!["verify", &bundle_s, "--json"],
    ] {
        let (out, _) = on_a_terminal(&args, dir.path());
        assert_inert("verify", &out, false);
    }

    // An error message quoting a path.
    let weird = format!("no-such-{all}");
    let (out, code) = on_a_terminal(&["show", &weird], dir.path());
    assert_eq!(code, Some(2));
    assert_inert("show's error", &out, true);
}

/// `provrun batch` on a terminal draws a live bar on stderr (done of total, failed,
/// running, rate, ETA) and clears it, ending with the plain summary line.
#[test]
fn batch_draws_a_live_progress_bar_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("agent.toml"),
        "name = \"bar\"\nmodel = \"script:script.json\"\ninstructions = \"\"\ntools = []\nmax_steps = 2\n",
    )
    .unwrap();
    // Each run waits 300 ms on its model: the bar (redrawn every 200 ms) gets drawn.
    std::fs::write(
        p.join("script.json"),
        r#"[{"text": "done", "delay_ms": 300}]"#,
    )
    .unwrap();
    let lines: String = (0..4)
        .map(|i| format!("{{\"id\": \"r{i}\", \"agent\": \"agent.toml\"}}\n"))
        .collect();
    std::fs::write(p.join("runs.jsonl"), lines).unwrap();
    let (bytes, code) = on_a_terminal(
        &["batch", "runs.jsonl", "--out", "out", "--concurrency", "1"],
        p,
    );
    assert_eq!(code, Some(0));
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("/4 done · 0 failed · 1 running"), "{text}");
    assert!(text.contains("ETA"), "{text}");
    assert!(
        text.contains("provrun: batch: 4/4 done (0 failed)"),
        "{text}"
    );
    assert!(text.contains("finished"), "the summary table: {text}");
}

/// The progress line names what a call does in the tool's own words (`x-summary`) and,
/// for a call that waits, the tool's question (`x-confirm`), the arguments filled in.
#[test]
fn the_progress_line_shows_the_tools_summary_and_question() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"p\"\nmodel = \"script:script.json\"\n\
         tools = [\"read_file\", \"write_file\"]\napprove = [\"write\"]\n",
    )
    .unwrap();
    // The first answer comes late, so the line is drawn by the time the calls begin.
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"delay_ms": 400, "tool_calls": [
              {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
              {"id": "w1", "name": "write_file", "arguments": {"path": "/output/b.txt", "content": "b"}}]},
            {"text": "done"}]"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let (out, code) = on_a_terminal(
        &["run", "agent.toml", "--input", "a.txt", "--out", "bundle"],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out);
    assert_eq!(code, Some(4), "{text}");
    assert!(text.contains("Read /input/a.txt"), "{text}");
    assert!(
        text.contains("waits: Write /output/b.txt, replacing any existing file?"),
        "{text}"
    );
}
