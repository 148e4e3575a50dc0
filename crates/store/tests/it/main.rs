//! The store crate's integration tests, one binary: bundles in a local folder, as tar
//! files, and in a `file://` bucket (the `object_store` crate's real local backend), each
//! listed, opened, streamed as a tar and written; the S3 backend is tested through the
//! CLI against an S3-compatible server (crates/cli/tests/it/object_store.rs).

mod stores;
