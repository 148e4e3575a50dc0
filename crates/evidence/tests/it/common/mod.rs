//! Helpers shared by the integration tests: scratch directories, a representative
//! bundle, a tiny executor, and copying bundles around.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use provrun_evidence::*;
use serde_json::json;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh, not yet existing directory path under Cargo's per-target scratch dir.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("evidence-tests")
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    dir
}

pub(crate) fn run_started() -> RunStarted {
    RunStarted {
        builder: "provrun/test".into(),
        agent_spec_digest: "a".repeat(64),
        agent: "hello".into(),
        model: "test".into(),
        tools: vec![ToolInfo {
            name: "read_file".into(),
            schema_sha256: "b".repeat(64),
        }],
        limits: json!({"max_steps": 20}),
        details: serde_json::Value::Null,
    }
}

pub(crate) fn tool_call(call_id: &str, deferred: bool) -> ToolCalled {
    ToolCalled {
        name: "read_file".into(),
        call_id: call_id.into(),
        arguments: json!({"path": "/input/a.txt"}),
        result: if deferred {
            json!(null)
        } else {
            json!("hello")
        },
        ok: true,
        duration_ms: 3,
        deferred,
        output_tool: false,
        provider_run: false,
        mode: Some("in_process".into()),
        arguments_blob: None,
        result_blob: None,
        decided_by: None,
        mcp: None,
        mcp_blob: None,
        ..ToolCalled::default()
    }
}

/// Build a representative finished bundle at a fresh path and return the path.
pub(crate) fn make_bundle(name: &str, durability: Durability) -> PathBuf {
    make_bundle_with(name, durability, BlobLayout::default())
}

/// [`make_bundle`] with the blob layout chosen.
pub(crate) fn make_bundle_with(name: &str, durability: Durability, layout: BlobLayout) -> PathBuf {
    let dir = scratch(name);
    let rec =
        Recorder::create_with_layout(&dir, "run-1", durability, &run_started(), layout).unwrap();
    std::fs::write(rec.input_dir().join("a.txt"), b"hello\n").unwrap();
    std::fs::create_dir(rec.input_dir().join("sub")).unwrap();
    std::fs::write(rec.input_dir().join("sub/b.bin"), [0u8, 1, 2, 255]).unwrap();
    rec.record_inputs().unwrap();
    let request = rec
        .put_blob(br#"{"messages":[]}"#, "application/json")
        .unwrap();
    let response = rec
        .put_blob(b"data: {\"x\":1}\n\ndata: [DONE]\n\n", "text/event-stream")
        .unwrap();
    rec.record(&ModelCalled {
        model: "test".into(),
        stream: true,
        request: Some(request),
        response: Some(response),
        usage: json!({"input_tokens": 10, "output_tokens": 5, "cost": -3.3711483902327103e-155, "ratio": 0.1}),
        finish_reason: Some("tool_calls".into()),
        duration_ms: 12,
        error: None,
        attempts: vec![],
        response_rendered: false,
        http: None,
        tool_calls: Vec::new(),
    })
    .unwrap();
    rec.record(&tool_call("c1", true)).unwrap();
    rec.record(&tool_call("c1", false)).unwrap();
    let mut big = tool_call("c2", false);
    let (result, blob) = rec
        .tool_value(json!("x".repeat(INLINE_LIMIT + 10)))
        .unwrap();
    big.result = result;
    big.result_blob = blob;
    rec.record(&big).unwrap();
    rec.declarer_for("read_file")
        .declare("note", json!({"said": "it"}))
        .unwrap();
    let trace = rec.put_blob(b"[]", "application/json").unwrap();
    rec.record(&TraceImported {
        trace,
        format: "provrun-messages/1".into(),
        messages: 0,
        source: None,
    })
    .unwrap();
    rec.step().unwrap();
    std::fs::write(rec.output_dir().join("response.txt"), b"done\n").unwrap();
    std::fs::create_dir(rec.output_dir().join("d")).unwrap();
    std::fs::write(rec.output_dir().join("d/x.md"), b"# x\n").unwrap();
    let mut end = RunEnd::new(RunStatus::Finished);
    end.usage = json!({"requests": 1});
    rec.finish(end).unwrap();
    dir
}

/// Copy a bundle directory tree (regular files and directories only).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every regular file of a bundle, relative to it, sorted.
pub(crate) fn bundle_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                walk(root, &entry.path(), out);
            } else {
                out.push(entry.path().strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

pub(crate) fn read_lines(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

pub(crate) fn write_lines(root: &Path, lines: &[String]) {
    let mut s = lines.join("\n");
    s.push('\n');
    std::fs::write(root.join("events.jsonl"), s).unwrap();
}

/// The commitment a chain-3 log makes to the string `s` at `pointer` of line `seq` of the
/// bundle at `root`, computed from docs/evidence.md §2a alone: the run's secret from
/// `salts.json`, the line's seed `HMAC-SHA256(secret, decimal(seq))`, the string's salt
/// `HMAC-SHA256(seed, pointer)`, and `SHA-256(salt ‖ s)` in lower-case hex.
pub(crate) fn salted_commitment(root: &Path, seq: u64, pointer: &str, s: &str) -> String {
    use hmac::Mac as _;
    use sha2::Digest as _;
    type HmacSha256 = hmac::Hmac<sha2::Sha256>;
    let salts: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("salts.json")).unwrap()).unwrap();
    let secret = hex::decode(salts["secret"].as_str().unwrap()).unwrap();
    let mac = |key: &[u8], msg: &[u8]| {
        let mut m = HmacSha256::new_from_slice(key).unwrap();
        m.update(msg);
        m.finalize().into_bytes().to_vec()
    };
    let seed = mac(&secret, seq.to_string().as_bytes());
    let salt = mac(&seed, pointer.as_bytes());
    let mut h = sha2::Sha256::new();
    h.update(&salt);
    h.update(s.as_bytes());
    hex::encode(h.finalize())
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Re-chain a list of event lines of the bundle at `root` (after editing one): fix every
/// `prev` and `seq`, keep everything else, and keep lines canonical. The chain scheme is
/// the one line 0 declares (chain 3 salted with the bundle's salts).
pub(crate) fn rechain(root: &Path, lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut chain = 1;
    for (i, l) in lines.iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        if i == 0 {
            chain = chain_of(&v["payload"]);
        }
        v["seq"] = json!(i);
        v["prev"] = match out.last() {
            None => serde_json::Value::Null,
            Some(p) => json!(line_hash_in(root, p, chain).unwrap()),
        };
        out.push(to_canonical_string(&v).unwrap());
    }
    out
}

pub(crate) fn fails(report: &VerifyReport) -> Vec<CheckCode> {
    report.failures().map(|c| c.code).collect()
}

struct ThreadWaker(std::thread::Thread);
impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Run futures concurrently on the current thread until all complete.
pub(crate) fn join_all<T>(futs: Vec<Pin<Box<dyn Future<Output = T> + '_>>>) -> Vec<T> {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut futs: Vec<Option<Pin<Box<dyn Future<Output = T> + '_>>>> =
        futs.into_iter().map(Some).collect();
    let mut results: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    loop {
        let mut pending = 0;
        for (i, slot) in futs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(&mut cx) {
                    Poll::Ready(v) => {
                        results[i] = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => pending += 1,
                }
            }
        }
        if pending == 0 {
            return results.into_iter().map(Option::unwrap).collect();
        }
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
}
