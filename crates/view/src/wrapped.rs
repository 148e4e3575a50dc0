//! The page's entries for the events of a wrapped program's run (`provrun wrap`): an
//! exchange through its proxy that is not a model request, a connection it asked for,
//! and its exit. All of it is bundle text, put into the page as text by the script.

use provrun_evidence::{ConnectionHandled, HttpExchanged, ProgramExited};
use serde_json::{Value, json};

/// An `http_exchanged` entry.
pub(crate) fn http_exchanged(p: &HttpExchanged) -> Value {
    json!({
        "kind": "http",
        "http_kind": p.kind,
        "method": p.http["method"],
        "path": p.http["path"],
        "status": p.http["status"],
        "duration_ms": p.duration_ms,
        "error": p.error,
    })
}

/// A `connection_handled` entry.
pub(crate) fn connection(p: &ConnectionHandled) -> Value {
    json!({
        "kind": "connection",
        "host": p.host,
        "port": p.port,
        "via": p.via,
        "outcome": p.outcome,
        "reason": p.reason,
        "bytes_sent": p.bytes_sent,
        "bytes_received": p.bytes_received,
        "duration_ms": p.duration_ms,
    })
}

/// A `program_exited` entry.
pub(crate) fn program_exited(p: &ProgramExited) -> Value {
    json!({
        "kind": "program",
        "argv": p.argv.join(" "),
        "exit_code": p.exit_code,
        "forwarded_signal": p.forwarded_signal,
        "stdout_size": p.stdout.size,
        "stderr_size": p.stderr.size,
        "duration_ms": p.duration_ms,
        "confinement": p
            .confinement
            .as_ref()
            .and_then(|c| serde_json::to_string_pretty(c).ok()),
    })
}
