//! The flags of `provrun batch`.

use std::path::PathBuf;

use super::shard::{Shard, parse_shard};
use crate::run::DurabilityArg;

/// Arguments of `provrun batch`.
#[derive(Debug, clap::Args)]
pub(crate) struct BatchArgs {
    /// The runs, one JSON object per line: {"id", "agent", "input": [PATH...], "prompt",
    /// "model", "host_dir"}; relative paths resolve against this file's folder.
    pub(super) runs: PathBuf,
    /// Where the bundles go: a folder (one bundle per run at DEST/<id>, made if missing),
    /// or s3://BUCKET/PREFIX or file:///FOLDER (one object per run, PREFIX/<id>.tar).
    #[arg(long, value_name = "DEST")]
    pub(super) out: PathBuf,
    /// With a bucket --out: the local folder where bundles are built before they are
    /// uploaded [default: a new provrun-batch-* folder in TMPDIR, removed at the end].
    #[arg(long = "work-dir", value_name = "DIR")]
    pub(super) work_dir: Option<PathBuf>,
    /// Runs in flight at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(super) concurrency: u32,
    /// Model requests in flight at once, over all runs (for rate-limited endpoints)
    /// [default: no limit beyond --concurrency].
    #[arg(long = "max-model-requests", value_name = "M", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(super) max_model_requests: Option<u32>,
    /// Run only shard I of N (0 <= I < N): the lines whose number, counted from 0, leaves
    /// I when divided by N.
    #[arg(long, value_name = "I/N", value_parser = parse_shard, conflicts_with = "shards")]
    pub(super) shard: Option<Shard>,
    /// Split the lines into N shards and run the one named by JOB_COMPLETION_INDEX (as a
    /// Kubernetes Indexed Job sets it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(super) shards: Option<u32>,
    /// Print one JSON object per run as it ends, then a summary object, on stdout.
    #[arg(long)]
    pub(super) json: bool,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    pub(super) tools_dirs: Vec<PathBuf>,
    /// When each run's evidence log is synced to disk (as for `run`).
    #[arg(long, value_enum, value_name = "POLICY", default_value = "at-end")]
    pub(super) durability: DurabilityArg,
    /// Change one of the `[settings]` of every line's agent spec (repeatable), as
    /// `run --set KEY=VALUE` does.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::settings::parse_setting)]
    pub(super) set: Vec<(String, String)>,
    /// Add each run that ends (finished or failed) to this ledger (`provrun ledger init`),
    /// before it is uploaded; a run the ledger cannot take counts as not finished. Runs
    /// an earlier batch finished into a folder are added too. A folder, a file:// URL, or
    /// an s3://BUCKET/PREFIX (with --ledger-key); batches on many machines may add to one
    /// bucket ledger at once.
    #[arg(long, value_name = "DIR|URL")]
    pub(super) ledger: Option<PathBuf>,
    /// The ledger's signing key (as `run --ledger-key`): required for a ledger in a bucket.
    #[arg(long = "ledger-key", value_name = "FILE", requires = "ledger")]
    pub(super) ledger_key: Option<PathBuf>,
}
