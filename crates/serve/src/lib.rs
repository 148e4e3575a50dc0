//! provrun's agents behind an endpoint any AG-UI frontend can drive, every run a
//! verifiable bundle.
//!
//! `provrun-serve` is the server of `provrun serve`, as a library so it can be embedded:
//! each `NAME.toml` of an agents folder answers `POST /agents/NAME`, which takes an AG-UI
//! `RunAgentInput` and streams the run as AG-UI events over SSE. A call that needs
//! approval ends the stream with an interrupt, and the thread's next input resumes the same
//! bundle with the answers; the client's own tools are client round trips; a thread's
//! next run starts from the last one's messages and records which bundle it continues.
//! Every run's bundle goes into a [`provrun_store::Store`] (a folder or a bucket), and the
//! server reads them back: `GET /runs` (from the run index), `GET /runs/ID` (the page),
//! `GET /runs/ID/bundle` (a tar) and `GET /runs/ID/verify` (the report).
//!
//! ```no_run
//! # async fn demo() -> Result<(), provrun_serve::ServeError> {
//! use provrun_serve::{ServeConfig, Server};
//! let config = ServeConfig::new(
//!     "agents",
//!     provrun_store::Store::folder("runs"),
//!     "127.0.0.1:0".parse().unwrap(),
//! );
//! let server = Server::bind(config).await?;
//! println!("{}", server.url());
//! let stop = tokio_util::sync::CancellationToken::new();
//! server.run(stop).await?;
//! # Ok(()) }
//! ```
//!
//! The protocol mapping, the routes, the limits and the decisions behind them (client
//! disconnects cancel their run; past `concurrency` a request gets 429) are in
//! docs/serve.md. Modules: `agui` (the input), `events` (the events), `index` (the run
//! index), `state`, `runs` (checking and planning a request), `drive` (one run's task),
//! `http` (auth, CORS, bodies, logging), `metrics` (what `GET /metrics` shows), `routes`,
//! `server`.

mod agui;
mod config;
mod digest;
mod drive;
mod ended;
mod error;
mod events;
mod front;
mod http;
mod index;
mod lease;
mod metrics;
mod routes;
mod runs;
mod server;
mod shared;
mod state;

pub use config::{
    DEFAULT_BODY_LIMIT, DEFAULT_CONCURRENCY, DEFAULT_GRACE, DEFAULT_LEASE, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGES, DEFAULT_MAX_TOOLS, HEADER_TIMEOUT, RETRY_AFTER_S, ServeConfig,
};
pub use error::{ApiError, ServeError};
pub use events::{BUNDLE_EVENT, STEERED_EVENT};
pub use index::{Entry as IndexEntry, INDEX_FILE};
pub use server::{Server, Stopped};
