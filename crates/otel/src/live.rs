//! Live export: spans sent while a run goes. The recorder tells a [`LiveExport`] of each
//! blob and event as it is written ([`RecordObserver`]); a thread of its own turns them
//! into spans with the same [`Walker`] `export` uses, and hands each finished span to the
//! OpenTelemetry SDK's batch span processor (a bounded queue, sent on its own thread
//! every `OTEL_BSP_SCHEDULE_DELAY`). Nothing here waits on the collector except
//! [`LiveExport::finish`], at most the flush bound.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor as _};
use provrun_evidence::{BlobRef, Event, RecordObserver};
use sha2::{Digest as _, Sha256};

use crate::OtelError;
use crate::config::OtlpConfig;
use crate::export::{ExportSummary, blocking_client, exporter};
use crate::mapping::Walker;

/// How many blobs and events may wait for the span thread before new ones are dropped
/// (their spans then lack attributes or are missing; the run is never held up).
const QUEUE: usize = 4096;
/// Blobs larger than this are not kept for spans (their attributes are left out).
const MAX_BLOB: usize = 8 << 20;
/// The most bytes of blobs kept for events still to come.
const KEPT_BYTES: usize = 64 << 20;

enum Message {
    Blob(Vec<u8>),
    Event(Box<Event>),
    Done,
}

/// What the span thread and the exporter report back.
#[derive(Default)]
struct Tally {
    /// Spans handed to the batch processor.
    made: AtomicUsize,
    /// Spans the collector took.
    sent: AtomicUsize,
    /// Messages dropped because the queue was full.
    dropped: AtomicUsize,
    /// The last export error.
    error: Mutex<Option<String>>,
}

/// The exporter the batch processor drives, counting what the collector took and
/// keeping the last error.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    tally: Arc<TallyRef>,
}

/// [`Tally`] behind a `Debug` the exporter trait asks for.
struct TallyRef(Tally);

impl std::fmt::Debug for TallyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tally")
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                self.tally.0.sent.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!("OpenTelemetry export of {n} spans failed: {e}");
                *self.tally.0.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// Hands the recorder's writes to the span thread without waiting.
struct Observer {
    queue: SyncSender<Message>,
    tally: Arc<TallyRef>,
}

impl Observer {
    fn send(&self, message: Message) {
        if let Err(TrySendError::Full(_)) = self.queue.try_send(message) {
            self.tally.0.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl RecordObserver for Observer {
    fn blob(&self, bytes: &[u8], _media_type: &str) {
        if bytes.len() <= MAX_BLOB {
            self.send(Message::Blob(bytes.to_vec()));
        }
    }

    fn event(&self, event: &Event) {
        self.send(Message::Event(Box::new(event.clone())));
    }
}

/// A run's spans, exported as the run goes: start it once the run's `run_started` is
/// written, give [`LiveExport::observer`] to the run's recorder, and call
/// [`LiveExport::finish`] when the run ends or pauses.
pub struct LiveExport {
    queue: SyncSender<Message>,
    thread: Option<JoinHandle<()>>,
    processor: Arc<BatchSpanProcessor>,
    tally: Arc<TallyRef>,
    timeout: Duration,
    trace_id: String,
}

impl std::fmt::Debug for LiveExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveExport")
            .field("trace_id", &self.trace_id)
            .finish_non_exhaustive()
    }
}

impl LiveExport {
    /// Export the run whose log so far is `events` (its `run_started` first): for a new
    /// run that event alone; for a resumed one the log up to its pause, whose spans were
    /// sent before and are not sent again. Sets up the exporter, its HTTP client and the
    /// batch processor (`OTEL_BSP_*` variables) and the span thread.
    ///
    /// # Errors
    ///
    /// [`OtelError::NoRun`] when `events` does not start with `run_started`;
    /// [`OtelError::Config`] when the HTTP client, the exporter or the span thread cannot
    /// be set up.
    pub fn start(config: &OtlpConfig, events: &[Event]) -> Result<LiveExport, OtelError> {
        let first = events.first().ok_or(OtelError::NoRun)?;
        let mut walker = Walker::new(first, config.capture_content)?;
        for ev in &events[1..] {
            // Already sent when the run paused: walked for the run's state only.
            let _ = walker.step(ev, &|_| None);
        }
        let trace_id = walker.trace_id().to_string();
        let tally = Arc::new(TallyRef(Tally::default()));
        let client = blocking_client(config.timeout)?;
        let exporter = Counted {
            inner: exporter(config, Some(client))?,
            tally: Arc::clone(&tally),
        };
        let processor = Arc::new(BatchSpanProcessor::builder(exporter).build());
        let (queue, receiver) = sync_channel(QUEUE);
        let thread = {
            let processor = Arc::clone(&processor);
            let tally = Arc::clone(&tally);
            std::thread::Builder::new()
                .name("provrun-otel".into())
                .spawn(move || make_spans(receiver, walker, &processor, &tally))
                .map_err(|e| OtelError::Config(format!("cannot start the span thread: {e}")))?
        };
        Ok(LiveExport {
            queue,
            thread: Some(thread),
            processor,
            tally,
            timeout: config.timeout,
            trace_id,
        })
    }

    /// The run's trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// What the run's recorder is to tell ([`provrun_evidence::Recorder::observe`]).
    pub fn observer(&self) -> Arc<dyn RecordObserver> {
        Arc::new(Observer {
            queue: self.queue.clone(),
            tally: Arc::clone(&self.tally),
        })
    }

    /// The run ended or paused: make the last spans and send what is not sent yet,
    /// taking at most the flush bound. Blocks the calling thread for that long at most;
    /// from async code call it on a blocking thread.
    ///
    /// # Errors
    ///
    /// [`OtelError::TimedOut`] when the flush does not end within the bound;
    /// [`OtelError::Export`] when the collector refused spans, now or during the run.
    pub fn finish(mut self) -> Result<ExportSummary, OtelError> {
        // The span thread does no I/O: it ends as soon as it has read what is queued.
        let _ = self.queue.send(Message::Done);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let flushed = self.processor.shutdown_with_timeout(self.timeout);
        let tally = &self.tally.0;
        let made = tally.made.load(Ordering::Relaxed);
        let error = tally.error.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (flushed, error) {
            (Err(opentelemetry_sdk::error::OTelSdkError::Timeout(_)), _) => {
                Err(OtelError::TimedOut(self.timeout))
            }
            (_, Some(e)) => Err(OtelError::Export(e)),
            (Err(e), None) => Err(OtelError::Export(e.to_string())),
            (Ok(()), None) => Ok(ExportSummary {
                trace_id: self.trace_id.clone(),
                spans: made,
            }),
        }
    }
}

/// The blobs kept for the events to come, oldest dropped first past [`KEPT_BYTES`].
#[derive(Default)]
struct Kept {
    by_digest: HashMap<String, Vec<u8>>,
    order: VecDeque<String>,
    bytes: usize,
}

impl Kept {
    fn add(&mut self, bytes: Vec<u8>) {
        let hex = hex::encode(Sha256::digest(&bytes));
        if self.by_digest.contains_key(&hex) {
            return;
        }
        self.bytes += bytes.len();
        self.order.push_back(hex.clone());
        self.by_digest.insert(hex, bytes);
        while self.bytes > KEPT_BYTES
            && let Some(old) = self.order.pop_front()
        {
            if let Some(b) = self.by_digest.remove(&old) {
                self.bytes -= b.len();
            }
        }
    }

    fn get(&self, blob: &BlobRef) -> Option<Vec<u8>> {
        self.by_digest.get(&blob.digest.sha256).cloned()
    }
}

/// The span thread: blobs kept, events walked, each finished span to the processor.
fn make_spans(
    receiver: Receiver<Message>,
    mut walker: Walker,
    processor: &BatchSpanProcessor,
    tally: &TallyRef,
) {
    let mut kept = Kept::default();
    let mut last: Option<Box<Event>> = None;
    let send = |span: SpanData| {
        tally.0.made.fetch_add(1, Ordering::Relaxed);
        processor.on_end(span);
    };
    while let Ok(message) = receiver.recv() {
        match message {
            Message::Blob(bytes) => kept.add(bytes),
            Message::Event(ev) => {
                let step = walker.step(&ev, &|b| kept.get(b));
                step.child.into_iter().chain(step.part).for_each(send);
                last = Some(ev);
            }
            Message::Done => break,
        }
    }
    // A run that stopped without `run_finished` (its recorder failed): its span ends at
    // its last event.
    if let Some(span) = last.and_then(|ev| walker.close(&ev)) {
        send(span);
    }
    let dropped = tally.0.dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        tracing::warn!("{dropped} evidence writes came too fast for OpenTelemetry export");
    }
}
