//! The runtime's own tamper-evident account of an agent run.
//!
//! `provrun-evidence` writes an append-only, hash-chained event log (`events.jsonl`),
//! content-addressed blobs and an in-toto statement into a bundle directory, and checks
//! such a bundle offline with [`verify`]. It knows nothing of models or tools: blobs are
//! bytes, and payloads are JSON values that read back as their type's struct
//! ([`Event::typed`], [`read_typed_events`] and [`EventPayload`]).
//!
//! A run's life with this crate:
//!
//! 1. [`Recorder::create`] makes the bundle directory and writes `run_started` (seq 0).
//! 2. The runtime stages files into [`Recorder::input_dir`], then calls
//!    [`Recorder::record_inputs`] (one `input_staged` per file).
//! 3. During the run it records [`ModelCalled`], [`ToolCalled`] and [`TraceImported`]
//!    events with [`Recorder::record`] / [`Recorder::record_async`], storing raw bytes
//!    with [`Recorder::put_blob`]; tools get a [`Declarer`], which can add `declared`
//!    events only.
//! 4. [`Recorder::finish`] records `output_produced` per output file, `run_finished`, and
//!    writes `statement.json`. A paused run is continued later with [`Recorder::reopen`].
//!
//! 5. Optionally (crate feature `dsse`), `dsse::sign_bundle` signs the statement;
//!    [`verify_with`] checks the signature against a public key.
//! 6. A finished bundle can be copied without chosen content by [`redaction::redact`];
//!    the copy still verifies, with its statement and signature as they were.
//!
//! ```
//! use provrun_evidence::*;
//! use serde_json::json;
//!
//! # fn main() -> Result<()> {
//! # let dir = std::env::temp_dir().join(format!("provrun-evidence-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let started = RunStarted {
//!     builder: "provrun/0.1.0".into(),
//!     agent_spec_digest: "0".repeat(64),
//!     agent: "hello".into(),
//!     model: "test".into(),
//!     tools: vec![],
//!     limits: json!({"max_steps": 20}),
//!     ..RunStarted::default()
//! };
//! let rec = Recorder::create(&dir, "run-1", Durability::PerStep, &started)?;
//! std::fs::write(rec.input_dir().join("a.txt"), "hello").expect("stage an input");
//! rec.record_inputs()?;
//! let response = rec.put_blob(b"{\"answer\":\"hi\"}", "application/json")?;
//! rec.record(&ModelCalled {
//!     model: "test".into(),
//!     stream: false,
//!     request: None,
//!     response: Some(response),
//!     usage: json!({"input_tokens": 3, "output_tokens": 1}),
//!     finish_reason: Some("stop".into()),
//!     duration_ms: 5,
//!     ..ModelCalled::default()
//! })?;
//! rec.step()?;
//! std::fs::write(rec.output_dir().join("response.txt"), "hi").expect("write an output");
//! rec.finish(RunEnd::new(RunStatus::Finished))?;
//!
//! let report = verify(&dir);
//! assert!(report.ok && report.complete);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! **Building payloads.** The payloads a caller builds (`RunStarted`, `ModelCalled`,
//! `ToolCalled`, `FileRecord`, `OutputSkipped`, `Declared`, `ToolInfo` and wrap's
//! `HttpExchanged`, `ConnectionHandled`, `StreamRecord`, `ProgramExited`, and the observed
//! `ProcessRan`, `TrailRecorded`, `FileChanged`, `WorkspaceChanged`, `ToolCallSeen`) implement
//! `Default`: name the fields you set and end with `..Default::default()`, as above, and a
//! field added in a later version keeps its default instead of breaking your build. The
//! payloads that hold a required reference (`Steered`, `TraceImported`, `RunFinished`)
//! are written by the recorder and the importers, not built by hand.
//!
//! The format is specified in `docs/evidence.md` of the repository.

mod canonical;
mod chain;
pub mod claims;
pub mod dsse;
mod error;
mod event;
mod fsutil;
mod lock;
mod log;
mod names;
mod outputs;
pub mod pack;
#[cfg(feature = "sync-probe")]
pub mod probe;
mod read;
mod recorder;
pub mod redaction;
mod salt;
mod statement;
mod verify;

pub use canonical::{to_canonical_string, to_canonical_string_of};
pub use chain::{
    CHAIN, CHAIN_KEY, LineSubstitutions, chain_of, line_hash, line_hash_in, line_hash_salted,
};
pub use claims::{ClaimsReport, match_claims};
pub use error::{EvidenceError, Result};
pub use event::escape_path_bytes;
pub use event::{
    ArgvTotal, BlobRef, Confidence, ConnectionHandled, Declared, Digest, Event, EventPayload,
    EventType, FORMAT_VERSION, FileChanged, FileRecord, HttpExchanged, InputStaged, ModelCalled,
    OutputProduced, OutputSkipped, Payload, ProcessRan, ProgramExited, RunFinished, RunStarted,
    RunStatus, Steered, StreamRecord, ToolCallSeen, ToolCalled, ToolInfo, TraceImported,
    TrailOwner, TrailRecorded, TypedEvent, WorkspaceChanged,
};
pub use lock::BundleLock;
pub use log::MAX_LINE_BYTES;
pub use outputs::OutputPolicy;
pub use read::{read_blob, read_blob_by_digest, read_events, read_typed_events};
pub use recorder::{
    BlobLayout, CreateOptions, Declarer, Durability, Durable, Finished, INLINE_LIMIT,
    PendingBundle, RecordObserver, Recorder, RunEnd,
};
pub use salt::SALTS_FILE;
pub use statement::{
    BUILD_TYPE, BUILDER_ID_ENV, BUILDER_URI_BASE, LEGACY_BUILD_TYPE, LEGACY_BUILDER_URI_BASE,
    PREDICATE_TYPE, PROJECT_URI, STATEMENT_FORMAT, STATEMENT_FORMAT_KEY, STATEMENT_TYPE,
    StatementFacts, build_type, builder_id, builder_id_from_env, builder_uri, is_absolute_uri,
};
pub use verify::{
    Check, CheckCode, CheckStatus, RedactionReport, SignatureStatus, VerifyOptions, VerifyReport,
    verify, verify_with, verify_with_events,
};
