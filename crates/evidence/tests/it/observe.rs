//! A recorder's observer sees each blob before the events that name it and each event
//! exactly as the log holds it (seq, time, chain, payload), in the log's order: what live
//! telemetry relies on to make the same spans a later read of the bundle makes.

use std::sync::{Arc, Mutex};

use provrun_evidence::{
    Durability, Event, RecordObserver, Recorder, RunEnd, RunStatus, read_events,
};

use crate::common::{run_started, scratch, tool_call};

/// What the observer was told: an event, or a blob's bytes and media type.
type Told = Result<Event, (Vec<u8>, String)>;

#[derive(Default)]
struct Seen(Mutex<Vec<Told>>);

impl RecordObserver for Seen {
    fn blob(&self, bytes: &[u8], media_type: &str) {
        self.0
            .lock()
            .unwrap()
            .push(Err((bytes.to_vec(), media_type.to_string())));
    }

    fn event(&self, event: &Event) {
        self.0.lock().unwrap().push(Ok(event.clone()));
    }
}

#[test]
fn the_observer_sees_blobs_then_the_events_as_the_log_holds_them() {
    let dir = scratch("observe");
    let rec = Recorder::create(&dir, "run-observed", Durability::Flush, &run_started()).unwrap();
    let seen = Arc::new(Seen::default());
    rec.observe(seen.clone()).map_err(|_| "first").unwrap();
    assert!(
        rec.observe(seen.clone()).is_err(),
        "one observer per recorder"
    );
    let blob = rec
        .put_blob(b"{\"big\": true}", "application/json")
        .unwrap();
    let mut call = tool_call("c1", false);
    call.result_blob = Some(blob);
    rec.record(&call).unwrap();
    rec.clone().record(&tool_call("c2", false)).unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();

    let log = read_events(&dir).unwrap();
    let seen = seen.0.lock().unwrap();
    assert_eq!(
        seen[0].as_ref().unwrap_err(),
        &(b"{\"big\": true}".to_vec(), "application/json".to_string())
    );
    let events: Vec<&Event> = seen.iter().filter_map(|s| s.as_ref().ok()).collect();
    // Everything after `run_started` (written before the observer was set).
    assert_eq!(events.len(), log.len() - 1);
    for (got, want) in events.iter().zip(&log[1..]) {
        assert_eq!(*got, want, "seq {}", want.seq);
    }
}
