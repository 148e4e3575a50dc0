//! Recorder throughput benchmark (placeholder).
fn main() {}
