//! One connected server: its session, its confined child (for stdio) and what was seen of
//! it, and how a failing child is described in a message (its exit status, the first line
//! that is not JSON-RPC, the head and tail of its stderr).

use std::sync::Mutex;
use std::time::Duration;

use provrun_sandbox::{ConfinedChild, Sandbox};
use provrun_tools::McpServerSpec;
use rmcp::model::ClientConfig;
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient};
use serde_json::Value;

use crate::tap;

/// One connected server.
pub(crate) struct Server {
    /// Its declaration.
    pub(crate) spec: McpServerSpec,
    /// What we started or reached (observed).
    pub(crate) endpoint: Value,
    /// What the server said it is in `initialize` (parsed).
    pub(crate) implementation: Value,
    /// Where calls go.
    pub(crate) peer: Peer<RoleClient>,
    /// The session, until [`crate::McpServers::shutdown`] closes it.
    pub(crate) service: tokio::sync::Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    /// A stdio server's process.
    pub(crate) child: Option<Mutex<ConfinedChild>>,
    /// What the tap on a stdio server's stdout saw.
    pub(crate) seen: Option<tap::Shared>,
    /// Lines that are not JSON the server sent before it was ready (its banner).
    pub(crate) banner: Vec<String>,
    /// Listed tools left out of what the model is offered, each with the reason.
    pub(crate) left_out: Vec<Value>,
    /// The stdio server's private sandbox (its scratch) and its empty input and output.
    pub(crate) _home: Option<(Sandbox, tempfile::TempDir)>,
}

/// How long a failed call or start-up waits for a stdio server that is going away to be
/// gone, so that its exit status and all of its stderr make it into the message.
const SETTLE: Duration = Duration::from_secs(2);

/// Wait (up to [`SETTLE`]) until the child has exited and its stderr is read to the end.
pub(crate) async fn settle(child: &Mutex<ConfinedChild>) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let done = child
            .lock()
            .map(|mut c| c.stderr_closed() && c.exit_status().is_some())
            .unwrap_or(true);
        if done || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Server {
    /// After a failed call: give a stdio server that is going away time to be gone.
    pub(crate) async fn settle(&self) {
        if let Some(child) = &self.child {
            settle(child).await;
        }
    }

    /// The child's state, for messages: its exit status and the end of its stderr.
    pub(crate) fn child_state(&self) -> String {
        let Some(child) = &self.child else {
            return String::new();
        };
        let Ok(mut child) = child.lock() else {
            return String::new();
        };
        describe_child(&mut child, self.seen.as_ref())
    }
}

/// What a stdio server's child shows for a message (`; `-led, or empty): the first line it
/// sent that is not JSON-RPC, its exit status, its stderr.
pub(crate) fn describe_child(child: &mut ConfinedChild, seen: Option<&tap::Shared>) -> String {
    let mut parts = Vec::new();
    if let Some(line) = seen
        .and_then(|b| b.lock().ok())
        .and_then(|b| b.first_bad.clone())
    {
        parts.push(format!("it sent a line that is not JSON-RPC: `{line}`"));
    }
    if let Some(status) = child.exit_status() {
        parts.push(format!("the server process ended ({status})"));
    }
    if let Some(summary) = stderr_summary(&child.stderr_text()) {
        parts.push(summary);
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join("; "))
    }
}

/// How many characters of a failing server's stderr a message shows from each end.
const STDERR_EDGE: usize = 600;

/// A failing server's stderr for a message: all of it when short, else its head and its
/// tail (a Node server's key line, `Cannot find package …`, comes first and its stack
/// trace after; a Python traceback ends with its key line), lines joined by ` | `.
fn stderr_summary(stderr: &str) -> Option<String> {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return None;
    }
    let chars: Vec<char> = stderr.chars().collect();
    let flat = |part: &[char]| part.iter().collect::<String>().replace('\n', " | ");
    Some(if chars.len() <= 2 * STDERR_EDGE {
        format!("its stderr: {}", flat(&chars))
    } else {
        format!(
            "its stderr begins: {} … ({} characters left out) … and ends: {}",
            flat(&chars[..STDERR_EDGE]),
            chars.len() - 2 * STDERR_EDGE,
            flat(&chars[chars.len() - STDERR_EDGE..])
        )
    })
}

#[cfg(test)]
mod tests {
    use super::stderr_summary;

    #[test]
    fn short_stderr_is_shown_whole_and_long_stderr_by_its_head_and_tail() {
        assert_eq!(stderr_summary(" \n "), None);
        assert_eq!(
            stderr_summary("line one\nline two\n").as_deref(),
            Some("its stderr: line one | line two")
        );
        let long = format!(
            "Error: Cannot find package 'zod'\n{}\nNode.js v22",
            "    at frame\n".repeat(200)
        );
        let summary = stderr_summary(&long).unwrap();
        assert!(summary.starts_with("its stderr begins: Error: Cannot find package 'zod'"));
        assert!(summary.ends_with("Node.js v22"), "{summary}");
        assert!(summary.contains("characters left out"), "{summary}");
    }
}
