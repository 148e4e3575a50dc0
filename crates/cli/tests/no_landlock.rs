//! Landlock taken away: this test is its own seccomp wrapper. Run as
//! `no_landlock --under-filter PROGRAM ARG…` it installs a seccomp filter answering
//! `landlock_create_ruleset`, `landlock_add_rule` and `landlock_restrict_self` with ENOSYS
//! (as a kernel without Landlock does), then execs PROGRAM, which inherits the filter —
//! and so does every process it starts, the sandbox's `provrun-confine` helper included.
//! Run plainly, it runs `provrun` under itself and checks that the machine probe, the
//! refusal, the degraded command and their records all name Landlock as missing, with
//! the ABI found (0), the ABI wanted (6) and every file-system right left unenforced.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const UNDER_FILTER: &str = "--under-filter";
const OLD_ABI: &str = "--landlock-abi-3";

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == UNDER_FILTER) {
        wrap(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == OLD_ABI) {
        old_abi::wrap(&args[2..]);
    }
    landlock_missing_is_refused_or_recorded_as_degraded();
    println!("test landlock_missing_is_refused_or_recorded_as_degraded ... ok");
    an_older_landlock_abi_is_recorded_as_partial_with_the_rights_left_unenforced();
    println!(
        "test an_older_landlock_abi_is_recorded_as_partial_with_the_rights_left_unenforced ... ok"
    );
    doctor_reports_landlock_missing_with_its_fix_and_exits_1();
    println!("test doctor_reports_landlock_missing_with_its_fix_and_exits_1 ... ok");
}

/// `provrun doctor` under the filter: Landlock missing, with the fix, the other layers as
/// the plain machine has them, exit 1; the plain machine's answer is its own.
fn doctor_reports_landlock_missing_with_its_fix_and_exits_1() {
    let plain = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let plain: Value = serde_json::from_slice(&plain.stdout).expect("doctor --json is JSON");
    let status_of = |report: &Value, name: &str| -> String {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {report}"))["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let out = provrun_without_landlock(&["doctor", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor --json is JSON");
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["fully_confined"], false, "{report}");
    let landlock = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "landlock")
        .unwrap();
    assert_eq!(landlock["status"], "missing", "{landlock}");
    assert!(
        landlock["fix"].as_str().unwrap().contains("lsm="),
        "{landlock}"
    );
    if !landlock["detail"]
        .as_str()
        .unwrap()
        .contains("helper was not found")
    {
        assert!(
            landlock["detail"].as_str().unwrap().contains("ABI 0"),
            "{landlock}"
        );
    }
    // Only Landlock changed: every other item reads as on the plain machine.
    for name in [
        "bubblewrap",
        "namespaces",
        "seccomp",
        "rlimits",
        "process_limit",
        "command_user",
        "open_files",
    ] {
        assert_eq!(
            status_of(&report, name),
            status_of(&plain, name),
            "{name}: {report}"
        );
    }
    // The text form says the same in words.
    let out = provrun_without_landlock(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("missing") && l.contains("landlock")),
        "{text}"
    );
    assert!(text.contains("fix: Linux 5.13 or later"), "{text}");
}

/// The second wrapper, `no_landlock --landlock-abi-3 PROGRAM ARG…`: a seccomp filter
/// hands every `landlock_create_ruleset` call to this process (a user notification),
/// which answers the ABI-version query with 3 and lets every other call go through to the
/// kernel — so PROGRAM and all it starts see a kernel whose Landlock ABI is 3.
#[allow(unsafe_code)]
mod old_abi {
    use std::ffi::OsString;

    fn check(ok: bool, what: &str) {
        if !ok {
            eprintln!("no_landlock: {what}: {}", std::io::Error::last_os_error());
            std::process::exit(126);
        }
    }

    pub(crate) fn wrap(argv: &[OsString]) -> ! {
        use std::os::unix::ffi::OsStrExt as _;
        let nr = libc::SYS_landlock_create_ruleset as u32;
        // ld nr; jeq landlock_create_ruleset ? notify : allow
        let code = [
            libc::sock_filter {
                code: 0x20,
                jt: 0,
                jf: 0,
                k: 0,
            },
            libc::sock_filter {
                code: 0x15,
                jt: 0,
                jf: 1,
                k: nr,
            },
            libc::sock_filter {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_USER_NOTIF,
            },
            libc::sock_filter {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ALLOW,
            },
        ];
        let prog = libc::sock_fprog {
            len: code.len() as u16,
            filter: code.as_ptr() as *mut libc::sock_filter,
        };
        let argv_c: Vec<std::ffi::CString> = argv
            .iter()
            .map(|a| std::ffi::CString::new(a.as_bytes()).unwrap())
            .collect();
        let mut argv_p: Vec<*const libc::c_char> = argv_c.iter().map(|a| a.as_ptr()).collect();
        argv_p.push(std::ptr::null());
        // SAFETY: plain system calls on values that live until they return; after fork
        // the child only calls execvp and _exit.
        unsafe {
            check(
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0,
                "no_new_privs",
            );
            let fd = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            ) as libc::c_int;
            check(fd >= 0, "installing the filter");
            let child = libc::fork();
            check(child >= 0, "fork");
            if child == 0 {
                libc::close(fd);
                libc::execvp(argv_p[0], argv_p.as_ptr());
                libc::_exit(127);
            }
            loop {
                let mut status = 0;
                if libc::waitpid(child, &mut status, libc::WNOHANG) == child {
                    let code = if libc::WIFEXITED(status) {
                        libc::WEXITSTATUS(status)
                    } else {
                        128
                    };
                    std::process::exit(code);
                }
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                if libc::poll(&mut pfd, 1, 50) <= 0 {
                    continue;
                }
                let mut req: libc::seccomp_notif = std::mem::zeroed();
                if libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) != 0 {
                    continue;
                }
                let mut resp: libc::seccomp_notif_resp = std::mem::zeroed();
                resp.id = req.id;
                // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
                if req.data.args[0] == 0 && req.data.args[2] == 1 {
                    resp.val = 3;
                } else {
                    resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
                }
                // The caller may have died meanwhile: nothing to do then.
                let _ = libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
            }
        }
    }
}

fn an_older_landlock_abi_is_recorded_as_partial_with_the_rights_left_unenforced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"tool_calls": [{"id": "c1", "name": "run_command",
                             "arguments": {"command": "echo partial"}}]},
            {"text": "done"}]"#,
    )
    .unwrap();
    let bundle = dir.path().join("bundle");
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(OLD_ABI)
        .arg(env!("CARGO_BIN_EXE_provrun"))
        .args(["run", &agent(dir.path(), true), "--out"])
        .arg(&bundle)
        .arg("--verify")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&bundle);
    let probe = &ev[0]["payload"]["details"]["sandbox"]["command_confinement"];
    if probe["layers"]["landlock"]["detail"]
        .as_str()
        .is_some_and(|d| d.contains("helper was not found"))
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the provrun-confine helper must be built under CI"
        );
        eprintln!("SKIPPED the old-ABI case: the provrun-confine helper is not built");
        return;
    }
    assert_eq!(probe["landlock_abi"], 3, "{probe}");
    // Partial still counts as available.
    assert_eq!(probe["layers"]["landlock"]["available"], true, "{probe}");
    let call = ev.iter().find(|e| e["type"] == "tool_called").unwrap();
    let c = &call["payload"]["confinement"];
    assert_eq!(c["landlock"]["status"], "partial", "{c}");
    assert_eq!(c["landlock"]["abi"], 3, "{c}");
    assert_eq!(c["landlock"]["abi_wanted"], 6, "{c}");
    assert_eq!(
        c["landlock"]["unenforced"],
        serde_json::json!(["ioctl_dev"]),
        "{c}"
    );
    assert!(
        call["payload"]["result"]
            .as_str()
            .unwrap()
            .contains("partial")
    );
}

/// Installs the filter and execs `argv`; never returns.
fn wrap(argv: &[std::ffi::OsString]) -> ! {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let mut rules = BTreeMap::new();
    for nr in [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ] {
        rules.insert(nr, Vec::new());
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).expect("a seccomp architecture");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .expect("the filter builds");
    let program = BpfProgram::try_from(filter).expect("the filter compiles");
    // Sets no-new-privileges too.
    seccompiler::apply_filter(&program).expect("the filter installs");
    let e = Command::new(&argv[0]).args(&argv[1..]).exec();
    eprintln!("no_landlock: cannot run {:?}: {e}", argv[0]);
    std::process::exit(127);
}

fn provrun_without_landlock(args: &[&str]) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .arg(UNDER_FILTER)
        .arg(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn agent(dir: &Path, degraded: bool) -> String {
    let path = dir.join(format!("agent-{degraded}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"cmd\"\nmodel = \"script:script.json\"\ntools = [\"run_command\"]\n\
             allow_degraded_sandbox = {degraded}\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn events(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

// One long scenario: the same agent without Landlock, first refused, then allowed (degraded).
fn landlock_missing_is_refused_or_recorded_as_degraded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"tool_calls": [{"id": "c1", "name": "run_command",
                             "arguments": {"command": "echo confined"}}]},
            {"text": "done"}]"#,
    )
    .unwrap();

    // Degraded mode not allowed: the command is refused, naming Landlock, and its event
    // says the program never started.
    let refused = dir.path().join("refused");
    let out = provrun_without_landlock(&[
        "run",
        &agent(dir.path(), false),
        "--out",
        &refused.display().to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&refused);
    let probe = &ev[0]["payload"]["details"]["sandbox"]["command_confinement"];
    assert_eq!(probe["landlock_abi"], 0, "{probe}");
    assert_eq!(probe["landlock_abi_wanted"], 6, "{probe}");
    assert_eq!(probe["layers"]["landlock"]["available"], false, "{probe}");
    assert!(
        probe["degraded"]
            .as_array()
            .unwrap()
            .contains(&Value::from("landlock")),
        "{probe}"
    );
    let call = ev.iter().find(|e| e["type"] == "tool_called").unwrap();
    assert_eq!(call["payload"]["ok"], false);
    let result = call["payload"]["result"].as_str().unwrap();
    assert!(result.contains("landlock"), "{result}");
    assert_eq!(
        call["payload"]["confinement"],
        serde_json::json!({"ran": false})
    );

    // Allowed: the command runs without Landlock, and its record says what is missing.
    let degraded = dir.path().join("degraded");
    let out = provrun_without_landlock(&[
        "run",
        &agent(dir.path(), true),
        "--out",
        &degraded.display().to_string(),
        "--verify",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&degraded);
    let call = ev.iter().find(|e| e["type"] == "tool_called").unwrap();
    assert_eq!(call["payload"]["ok"], true, "{call}");
    assert!(
        call["payload"]["result"]
            .as_str()
            .unwrap()
            .contains("confined")
    );
    let c = &call["payload"]["confinement"];
    assert_eq!(c["mode"], "degraded", "{c}");
    assert!(
        c["missing"]
            .as_array()
            .unwrap()
            .contains(&Value::from("landlock")),
        "{c}"
    );
    assert_eq!(c["landlock"]["status"], "none", "{c}");
    assert_eq!(c["landlock"]["abi"], 0, "{c}");
    assert_eq!(c["landlock"]["abi_wanted"], 6, "{c}");
    let unenforced = c["landlock"]["unenforced"].as_array().unwrap();
    assert_eq!(unenforced.len(), 16, "{c}");
    for right in ["write_file", "execute", "truncate", "ioctl_dev", "refer"] {
        assert!(unenforced.contains(&Value::from(right)), "{right}: {c}");
    }
    // seccomp still applies wherever the machine has it (stacked on the wrapper's filter).
    let probe = &ev[0]["payload"]["details"]["sandbox"]["command_confinement"];
    assert_eq!(
        c["seccomp"]["applied"], probe["layers"]["seccomp"]["available"],
        "{c}"
    );
    let shown = provrun_without_landlock(&["show", &degraded.display().to_string()]);
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains("sandbox degraded (missing landlock")
            && shown.contains("landlock none ABI 0/6"),
        "{shown}"
    );
}
