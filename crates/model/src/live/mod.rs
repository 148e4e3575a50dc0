//! What every live backend shares, whichever provider it speaks to: its settings
//! ([`LiveConfig`], which each provider's configuration embeds, with the [`ApiKey`], the
//! [`Timeouts`] and the [`RetryPolicy`]), and one byte-keeping, retrying request path.
//!
//! Every live backend (Chat Completions, Anthropic Messages, OpenAI Responses) posts
//! through one [`Endpoint`]: one POST per attempt on reqwest, every byte sent and received
//! kept as it is read (SSE verbatim), first-byte and idle timeouts, a body size limit, and
//! a retry loop around whole attempts. The final response is always parsed from the kept
//! bytes, exactly as a replay parses them; a live stream only drives the deltas.
//!
//! The code: `settings` (key, timeouts, retries, a provider's environment variables) and
//! `config` (the embedded configuration), always here; behind the `http` feature `http`
//! (the client, headers, redaction), `retry` (waits between attempts), `attempt` (what
//! one attempt saw, its classification and the retry loop's bookkeeping) and `endpoint`
//! (one backend's attempts on the wire).

#[cfg(feature = "http")]
mod attempt;
mod config;
#[cfg(feature = "http")]
mod endpoint;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
mod retry;
mod settings;

pub use config::LiveConfig;
pub(crate) use config::embeds_live_config;
#[cfg(feature = "http")]
pub(crate) use endpoint::Endpoint;
pub use settings::{ApiKey, DEFAULT_BASE_URL, DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy, Timeouts};
pub(crate) use settings::{OPENAI, Provider};
