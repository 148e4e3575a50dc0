//! Claims against observations: the calls a wrapped program's session log says it made
//! that run a command (`parsed` `tool_called` events of `mode: "program"`: Codex's
//! `shell`, `local_shell`, `exec_command`, Claude Code's `Bash`, and the like), matched to
//! the processes the runtime saw its sandbox start (`process_ran` events of the program's
//! trail).
//!
//! A claimed call is accounted for by the first process not yet matched whose argument
//! vector is the claimed one (a command given as an argument vector), or holds the claimed
//! script (a command given as shell text, also as it reads single-quoted); that process
//! and all its descendants are then accounted for. The wrapped program itself (the
//! trail's first process, the images it execed in place, and a binary a launcher among
//! them started with the launcher's own arguments) is neither listed nor accounts for
//! its children. What is left over on either side is listed: claimed calls
//! no process accounts for (`unobserved`), and processes no claimed call accounts for
//! (`unclaimed`). Without a session log imported there are no claims, and nothing is
//! matched.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::event::{Confidence, Event, EventType, ProcessRan, ToolCalled, TrailRecorded};

/// A command a claimed call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimedCommand {
    /// An argument vector, run as given.
    Argv(Vec<String>),
    /// Shell text, run by a shell.
    Script(String),
}

impl ClaimedCommand {
    /// The command as one line of text.
    pub fn text(&self) -> String {
        match self {
            ClaimedCommand::Argv(v) => v.join(" "),
            ClaimedCommand::Script(s) => s.clone(),
        }
    }
}

/// The command a call of tool `name` with `arguments` runs, when it is one of the tools
/// known to run commands: Codex's `shell` and `container.exec` (`command`/`cmd` an
/// argument vector), `local_shell` (`command` of its action), `exec_command` and
/// `shell_command` (`cmd`/`command` shell text); Claude Code's `Bash` (`command`); and a
/// tool named like a shell (`bash`, `shell`, `sh`, `terminal`, `run_command`, `exec`)
/// with a `command` or `cmd` argument. An argument vector of the form `[SHELL, -c|-lc,
/// TEXT]` is taken as the shell text `TEXT`.
pub fn claimed_command(name: &str, arguments: &Value) -> Option<ClaimedCommand> {
    let lower = name.to_ascii_lowercase();
    let known = matches!(
        lower.as_str(),
        "shell"
            | "container.exec"
            | "local_shell"
            | "exec_command"
            | "shell_command"
            | "bash"
            | "sh"
            | "terminal"
            | "run_command"
            | "exec"
            | "run_shell_command"
    );
    if !known {
        return None;
    }
    // `local_shell`'s action and the others all name it `command`; Codex's
    // `exec_command` and `container.exec` name it `cmd`.
    let value = if arguments.get("command").is_some() {
        &arguments["command"]
    } else {
        &arguments["cmd"]
    };
    let command = match value {
        Value::String(s) if !s.trim().is_empty() => ClaimedCommand::Script(s.clone()),
        Value::Array(items) => {
            let argv: Vec<String> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>()?;
            as_script(&argv).map_or(ClaimedCommand::Argv(argv), ClaimedCommand::Script)
        }
        _ => return None,
    };
    Some(command)
}

/// `TEXT` of an argument vector `[SHELL, -c|-lc|…, TEXT]`.
fn as_script(argv: &[String]) -> Option<String> {
    let [shell, flag, text] = argv else {
        return None;
    };
    let shell = shell.rsplit('/').next().unwrap_or(shell);
    let shells = ["sh", "bash", "zsh", "dash", "ksh", "fish"];
    let is_c = flag.starts_with('-') && flag.ends_with('c') && flag.len() <= 4;
    (shells.contains(&shell) && is_c).then(|| text.clone())
}

/// A claimed call no observed process accounts for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnobservedClaim {
    /// The `tool_called` event's line.
    pub seq: u64,
    /// The call's id, as the log gave it.
    pub call_id: String,
    /// Its run-unique id, when it was linked to an exchange.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_call_id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The command it claims to have run.
    pub command: String,
}

/// An observed process no claimed call accounts for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnclaimedProcess {
    /// The `process_ran` event's line.
    pub seq: u64,
    /// Its number in the trail.
    pub id: u64,
    /// Its arguments.
    pub argv: Vec<String>,
    /// Its executable.
    pub exe: String,
}

/// What matching a wrapped program's claims with its trail found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClaimsReport {
    /// Claimed calls that run a command.
    pub claims: u64,
    /// Processes of the program's trail, the program itself left out.
    pub processes: u64,
    /// The program's trail was recorded (a `trail_recorded` event of the program).
    pub traced: bool,
    /// The trail saw everything (complete, nothing over its cap).
    pub trail_complete: bool,
    /// Each claimed call a process accounts for, and the process (`(call, id)`; the call
    /// by its run-unique id, else its id).
    pub matched: Vec<(String, u64)>,
    /// Claimed calls no process accounts for.
    pub unobserved: Vec<UnobservedClaim>,
    /// Processes no claimed call accounts for.
    pub unclaimed: Vec<UnclaimedProcess>,
}

impl ClaimsReport {
    /// Nothing is left over on either side.
    pub fn all_accounted(&self) -> bool {
        self.unobserved.is_empty() && self.unclaimed.is_empty()
    }
}

/// The claims of a log's events matched with the program's trail; `None` when no session
/// log was imported (`trace_imported` with a `source`) and no call claims a command: not a
/// wrapped program's run, or one whose program left no log to match.
pub fn match_claims(events: &[Event]) -> Option<ClaimsReport> {
    let mut claims = Vec::new();
    let mut procs: Vec<(u64, ProcessRan)> = Vec::new();
    let mut trail: Option<TrailRecorded> = None;
    let mut session_logs = 0usize;
    for e in events {
        match e.kind {
            EventType::TraceImported if e.payload.get("source").is_some_and(|s| !s.is_null()) => {
                session_logs += 1;
            }
            EventType::ToolCalled if e.confidence == Confidence::Parsed => {
                let Ok(call) = serde_json::from_value::<ToolCalled>(e.payload.clone()) else {
                    continue;
                };
                if call.mode.as_deref() != Some("program") || call.deferred {
                    continue;
                }
                if let Some(command) = claimed_command(&call.name, &call.arguments) {
                    claims.push((e.seq, call, command));
                }
            }
            EventType::ProcessRan => {
                if let Ok(p) = serde_json::from_value::<ProcessRan>(e.payload.clone())
                    && p.owner.kind == "program"
                {
                    procs.push((e.seq, p));
                }
            }
            EventType::TrailRecorded => {
                if let Ok(t) = serde_json::from_value::<TrailRecorded>(e.payload.clone())
                    && t.owner.kind == "program"
                {
                    trail = Some(t);
                }
            }
            _ => {}
        }
    }
    // Claims come from a session log: without one imported, there is nothing to match.
    if session_logs == 0 && claims.is_empty() {
        return None;
    }
    // Recorded as they ended; matched in the order they began.
    procs.sort_by_key(|(_, p)| p.id);
    let by_id: BTreeMap<u64, &ProcessRan> = procs.iter().map(|(_, p)| (p.id, p)).collect();
    // The program: the first image, those it became by exec in place, and a binary a
    // launcher among them started with its own arguments (`node codex.js ARGS` starting
    // `codex ARGS`).
    let mut program: BTreeSet<u64> = BTreeSet::new();
    for (_, p) in &procs {
        let is_program = match p.parent.and_then(|id| by_id.get(&id)) {
            None => p.parent.is_none(),
            Some(parent) if program.contains(&parent.id) => {
                (parent.replaced && parent.pid == p.pid) || hands_over(parent, p)
            }
            Some(_) => false,
        };
        if is_program {
            program.insert(p.id);
        }
    }
    let mut children: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (_, p) in &procs {
        if let Some(parent) = p.parent {
            children.entry(parent).or_default().push(p.id);
        }
    }
    let mut report = ClaimsReport {
        claims: claims.len() as u64,
        processes: procs
            .iter()
            .filter(|(_, p)| !program.contains(&p.id))
            .count() as u64,
        traced: trail.is_some(),
        trail_complete: trail
            .as_ref()
            .is_some_and(|t| t.complete && t.not_recorded == 0),
        ..ClaimsReport::default()
    };
    let mut matched_procs: BTreeSet<u64> = BTreeSet::new();
    let mut accounted: BTreeSet<u64> = BTreeSet::new();
    for (seq, call, command) in &claims {
        let found = procs.iter().find(|(_, p)| {
            !program.contains(&p.id) && !matched_procs.contains(&p.id) && p.exec && runs(p, command)
        });
        match found {
            Some((_, p)) => {
                matched_procs.insert(p.id);
                let key = call
                    .run_call_id
                    .clone()
                    .unwrap_or_else(|| call.call_id.clone());
                report.matched.push((key, p.id));
                let mut stack = vec![p.id];
                while let Some(id) = stack.pop() {
                    if accounted.insert(id) {
                        stack.extend(children.get(&id).into_iter().flatten().copied());
                    }
                }
            }
            None => report.unobserved.push(UnobservedClaim {
                seq: *seq,
                call_id: call.call_id.clone(),
                run_call_id: call.run_call_id.clone(),
                name: call.name.clone(),
                command: command.text(),
            }),
        }
    }
    for (seq, p) in &procs {
        if !program.contains(&p.id) && !accounted.contains(&p.id) {
            report.unclaimed.push(UnclaimedProcess {
                seq: *seq,
                id: p.id,
                argv: p.argv.clone(),
                exe: p.exe.clone(),
            });
        }
    }
    Some(report)
}

/// Whether `child` is the binary a launcher `parent` started with its own arguments: an
/// exec with at least one argument, all of them the last ones of the parent's.
fn hands_over(parent: &ProcessRan, child: &ProcessRan) -> bool {
    child.exec
        && child.pid != parent.pid
        && child.argv.len() >= 2
        && parent.argv.ends_with(&child.argv[1..])
}

/// Whether process `p` runs `command`.
fn runs(p: &ProcessRan, command: &ClaimedCommand) -> bool {
    match command {
        ClaimedCommand::Argv(argv) => &p.argv == argv,
        ClaimedCommand::Script(text) => {
            let text = text.trim();
            if text.is_empty() {
                return false;
            }
            // As written, or as it reads inside single quotes.
            let quoted = [
                text.to_owned(),
                text.replace('\'', "'\\''"),
                text.replace('\'', "'\"'\"'"),
            ];
            p.argv
                .iter()
                .skip(1)
                .any(|arg| quoted.iter().any(|q| arg.contains(q.as_str())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands_are_read_from_the_known_tools() {
        assert_eq!(
            claimed_command("Bash", &json!({"command": "ls -la"})),
            Some(ClaimedCommand::Script("ls -la".into()))
        );
        assert_eq!(
            claimed_command("shell", &json!({"command": ["bash", "-lc", "echo hi"]})),
            Some(ClaimedCommand::Script("echo hi".into()))
        );
        assert_eq!(
            claimed_command("shell", &json!({"command": ["/usr/bin/env", "true"]})),
            Some(ClaimedCommand::Argv(vec![
                "/usr/bin/env".into(),
                "true".into()
            ]))
        );
        assert_eq!(
            claimed_command("local_shell", &json!({"type": "exec", "command": ["ls"]})),
            Some(ClaimedCommand::Argv(vec!["ls".into()]))
        );
        assert_eq!(
            claimed_command("exec_command", &json!({"cmd": "cat x"})),
            Some(ClaimedCommand::Script("cat x".into()))
        );
        assert_eq!(claimed_command("Read", &json!({"file_path": "x"})), None);
        assert_eq!(claimed_command("Bash", &json!({"command": 3})), None);
        assert_eq!(claimed_command("Bash", &json!({"command": "  "})), None);
    }

    #[test]
    fn a_launcher_hands_the_program_over_and_the_rest_is_listed() {
        let event = |seq: u64, kind: EventType, confidence: Confidence, payload: Value| Event {
            v: 1,
            run_id: "r".into(),
            seq,
            prev: None,
            ts: String::new(),
            kind,
            confidence,
            payload,
        };
        let image = |id: u64, parent: Option<u64>, pid: u32, argv: &[&str], replaced: bool| {
            let p = ProcessRan {
                owner: crate::event::TrailOwner {
                    kind: "program".into(),
                    ..Default::default()
                },
                id,
                parent,
                pid,
                exec: true,
                argv: argv.iter().map(|s| s.to_string()).collect(),
                replaced,
                ..ProcessRan::default()
            };
            event(
                id,
                EventType::ProcessRan,
                Confidence::Observed,
                serde_json::to_value(p).unwrap(),
            )
        };
        let call = |seq: u64, id: &str, script: &str| {
            event(
                seq,
                EventType::ToolCalled,
                Confidence::Parsed,
                json!({
                    "name": "shell", "call_id": id, "arguments": {"command": ["bash", "-lc", script]},
                    "result": "", "ok": true, "duration_ms": 0, "deferred": false,
                    "output_tool": false, "provider_run": false, "mode": "program"}),
            )
        };
        let events = vec![
            image(
                1,
                None,
                10,
                &["sh", "-c", "exec \"$0\" run x", "/bin/tool"],
                true,
            ),
            image(2, Some(1), 10, &["node", "/bin/tool", "run", "x"], false),
            image(3, Some(2), 11, &["/opt/tool-native", "run", "x"], false),
            image(4, Some(3), 12, &["bash", "-lc", "ls -la"], true),
            image(5, Some(4), 12, &["ls", "-la"], false),
            image(6, Some(3), 13, &["git", "status"], false),
            event(
                7,
                EventType::TraceImported,
                Confidence::Parsed,
                json!({"source": "log.jsonl"}),
            ),
            call(8, "c1", "ls -la"),
            call(9, "c2", "rm -rf /"),
        ];
        let r = match_claims(&events).unwrap();
        assert_eq!(r.claims, 2);
        assert_eq!(r.matched, [("c1".to_owned(), 4)]);
        assert_eq!(r.unobserved.len(), 1);
        assert_eq!(r.unobserved[0].call_id, "c2");
        assert_eq!(r.unobserved[0].command, "rm -rf /");
        // The launcher chain and the native binary are the program; `git status` is
        // listed; `ls` is accounted for by the shell that matched.
        let unclaimed: Vec<u64> = r.unclaimed.iter().map(|p| p.id).collect();
        assert_eq!(unclaimed, [6]);
        assert_eq!(r.processes, 3);
        // Without a session log or a claim, nothing to match.
        assert_eq!(match_claims(&events[..6]), None);
    }

    #[test]
    fn scripts_match_as_written_or_single_quoted() {
        let p = |argv: &[&str]| ProcessRan {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            exec: true,
            ..ProcessRan::default()
        };
        let script = ClaimedCommand::Script("echo 'hi there'".into());
        assert!(runs(&p(&["bash", "-c", "echo 'hi there'"]), &script));
        assert!(runs(
            &p(&["bash", "-c", "eval 'echo '\\''hi there'\\'''"]),
            &script
        ));
        assert!(!runs(&p(&["echo 'hi there'"]), &script));
        assert!(!runs(&p(&["bash", "-c", "echo hi"]), &script));
    }
}
