//! Placeholder for the file-operation latency bench (filled in later).

fn main() {}
