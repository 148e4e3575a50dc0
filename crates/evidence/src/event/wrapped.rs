//! The payloads of the events a wrapped program's run adds (`provrun wrap`): an HTTP
//! exchange through the recording proxy that is not a model request, a connection the
//! proxy tunnelled or refused, and the program's exit.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BlobRef, EventType, Payload};

/// Payload of `http_exchanged`: one exchange through the recording proxy that is not a
/// model request (token counting, model listing, a path the proxy does not classify),
/// recorded with its raw bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpExchanged {
    /// What the exchange is, as the proxy classifies it: `count_tokens`, `models` or
    /// `other`.
    pub kind: String,
    /// The request body as the program sent it (`null` when empty).
    pub request: Option<BlobRef>,
    /// The response body as the upstream sent it (`null` when empty or none came).
    pub response: Option<BlobRef>,
    /// The HTTP facts: `api`, `method`, `path`, `status`, `upstream`, the headers each way
    /// without credentials (see the evidence format).
    pub http: Value,
    /// Wall time from the request to the end of the response.
    pub duration_ms: u64,
    /// What went wrong, when the exchange did not complete.
    #[serde(default)]
    pub error: Option<String>,
}
impl Payload for HttpExchanged {
    const TYPE: EventType = EventType::HttpExchanged;
}

/// Payload of `connection_handled`: a connection the program asked the proxy for
/// (`CONNECT host:port`, or a request for an absolute URL), tunnelled to an allowed host
/// or refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionHandled {
    /// The host asked for, as the program wrote it.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// How it was asked: `connect` (a CONNECT tunnel) or `http` (an absolute URL).
    pub via: String,
    /// `tunneled` (allowed, the tunnel ran until either side closed it), `refused` (not
    /// allowed) or `failed` (allowed, but the host could not be reached).
    pub outcome: String,
    /// Why it was refused or failed.
    #[serde(default)]
    pub reason: Option<String>,
    /// Bytes the program sent through the tunnel.
    pub bytes_sent: u64,
    /// Bytes the host sent back through it.
    pub bytes_received: u64,
    /// Wall time from the request to the end of the tunnel.
    pub duration_ms: u64,
}
impl Payload for ConnectionHandled {
    const TYPE: EventType = EventType::ConnectionHandled;
}

/// One of a program's output streams: its digest and size, and its bytes when they are
/// kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRecord {
    /// SHA-256 hex of everything the program wrote to the stream.
    pub sha256: String,
    /// How many bytes it wrote.
    pub size: u64,
    /// The bytes, when they were kept (up to a size the writer chooses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<BlobRef>,
}

/// Payload of `program_exited`: how the wrapped program ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramExited {
    /// The program and its arguments, as given.
    pub argv: Vec<String>,
    /// Its exit code (under bubblewrap, 128 + N when signal N killed it).
    pub exit_code: Option<i32>,
    /// The signal that killed it, when that is known.
    #[serde(default)]
    pub signal: Option<i32>,
    /// The signal the runtime passed on to it (`SIGINT`, `SIGTERM`, `SIGHUP`), if any.
    #[serde(default)]
    pub forwarded_signal: Option<String>,
    /// Its stdout.
    pub stdout: StreamRecord,
    /// Its stderr.
    pub stderr: StreamRecord,
    /// Wall time from its start to its exit.
    pub duration_ms: u64,
    /// The confinement it ran under, as a command's is recorded (`mode`, `missing`,
    /// `landlock`, `seccomp`, `bubblewrap`, `namespaces`, `host_uid`, `limits`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<Value>,
}
impl Payload for ProgramExited {
    const TYPE: EventType = EventType::ProgramExited;
}
