//! The checks of the event log itself: `parse`, `chain` and `sequence`.

use super::bundle::Bundle;
use super::{Acc, Check, CheckCode};
use crate::event::{Confidence, Event, EventType, RunFinished, RunStatus};

/// `parse`: every line is an event; a torn last line is a warning.
pub(super) fn parse(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Parse);
    let log = &b.log;
    if let Some(e) = &log.unreadable {
        acc.fail(e.clone());
    }
    for (i, e) in &log.errors {
        acc.fail(format!("line {}: {e}", i + 1));
    }
    if let Some(n) = log.torn() {
        if log.scan.as_ref().is_some_and(|s| s.torn_zeros) {
            acc.warn(format!(
                "the log ends in {n} zero bytes after its last complete line: space the file \
                 system had allocated but not written when the machine stopped (the run was \
                 interrupted)"
            ));
        } else {
            acc.warn(format!(
                "the last line is torn ({n} bytes without a newline): the run was interrupted"
            ));
        }
    }
    acc.pass = format!(
        "{} event line(s) parse{}",
        log.lines().len(),
        confidence_summary(log.events.iter().flatten().map(|e| e.confidence))
    );
    if matches!(b.declared, Some(None)) {
        acc.fail("line 1: run_started names an unknown blob_store");
    }
    acc.done()
}

/// `chain`: each parsed line's `prev` is the hash of the line before.
pub(super) fn chain(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Chain);
    if let Some(problem) = &b.salts_problem {
        acc.fail(problem.clone());
    }
    let log = &b.log;
    for (i, ev) in log.events.iter().enumerate() {
        if ev.is_some() && !log.chained[i] {
            acc.fail(format!(
                "line {}: prev is not the chain hash of the line before",
                i + 1
            ));
        }
    }
    if !log.all_parsed() && acc.fails.is_empty() {
        acc.fail("not every line could be checked (see parse)");
    }
    let lines = log.lines();
    acc.pass = match log.head() {
        Some(head) => format!("{} line(s) chained; head {head}", lines.len()),
        None => "no lines".to_owned(),
    };
    acc.done()
}

/// `sequence`: `seq` counts from 0, one run id, `run_started` first and only first,
/// `output_skipped` only before the output block, `run_finished` last (earlier ones
/// only `paused`) with the right counts.
pub(super) fn sequence(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Sequence);
    let events = &b.log.events;
    let lines = b.log.lines();
    let first_run_id = events.iter().flatten().next().map(|e| e.run_id.clone());
    // The last `run_finished` seen so far.
    let mut last_finish: Option<(usize, RunFinished)> = None;
    if lines.is_empty() {
        acc.warn("the log has no events");
    }
    for (i, ev) in events.iter().enumerate() {
        let Some(ev) = ev else { continue };
        if ev.seq != i as u64 {
            acc.fail(format!("line {} has seq {} (expected {i})", i + 1, ev.seq));
        }
        if Some(&ev.run_id) != first_run_id.as_ref() {
            acc.fail(format!("line {} belongs to run {:?}", i + 1, ev.run_id));
        }
        if (i == 0) != (ev.kind == EventType::RunStarted) {
            acc.fail(if i == 0 {
                "the first event is not run_started".to_owned()
            } else {
                format!("line {}: run_started again", i + 1)
            });
        }
        if ev.kind == EventType::OutputSkipped {
            // Written by the recorder right before the output_produced block.
            let next = events.get(i + 1).and_then(Option::as_ref).map(|e| e.kind);
            if !matches!(
                next,
                Some(EventType::OutputSkipped | EventType::OutputProduced | EventType::RunFinished)
            ) {
                acc.fail(format!(
                    "line {}: output_skipped is not followed by output_skipped, output_produced or run_finished",
                    i + 1
                ));
            }
        }
        if ev.kind == EventType::RunFinished {
            if let Ok(p) = serde_json::from_value::<RunFinished>(ev.payload.clone()) {
                check_finish(&mut acc, events, i, &p, last_finish.as_ref());
                last_finish = Some((i, p));
            }
        } else if let Some((j, prev)) = &last_finish
            && prev.status != RunStatus::Paused
            && j + 1 == i
        {
            acc.fail(format!(
                "line {}: event after run_finished ({})",
                i + 1,
                prev.status.as_str()
            ));
        }
    }
    if !b.shape.ends_finished && b.log.all_parsed() && !lines.is_empty() {
        acc.warn("the log does not end with run_finished: the run did not finish");
    }
    acc.pass = format!(
        "{} event(s), run_started first, run_finished last ({})",
        lines.len(),
        b.shape.status.map(RunStatus::as_str).unwrap_or("-")
    );
    acc.done()
}

/// The `run_finished` on line index `i` (payload `p`): its counts, and that the one
/// before it (`before`) paused the run.
fn check_finish(
    acc: &mut Acc,
    events: &[Option<Event>],
    i: usize,
    p: &RunFinished,
    before: Option<&(usize, RunFinished)>,
) {
    if p.event_count != i as u64 + 1 {
        acc.fail(format!(
            "line {}: run_finished says {} events, it is event {}",
            i + 1,
            p.event_count,
            i + 1
        ));
    }
    if let Some((j, prev)) = before
        && prev.status != RunStatus::Paused
    {
        acc.fail(format!(
            "line {}: events after run_finished ({}) on line {}",
            i + 1,
            prev.status.as_str(),
            j + 1
        ));
    }
    let block_ok = usize::try_from(p.outputs)
        .ok()
        .and_then(|n| i.checked_sub(n))
        .is_some_and(|from| {
            events[from..i]
                .iter()
                .all(|e| matches!(e, Some(e) if e.kind == EventType::OutputProduced))
        });
    if !block_ok {
        acc.fail(format!(
            "line {}: run_finished says {} outputs, but the lines before it are not that many output_produced events",
            i + 1,
            p.outputs
        ));
    }
}

/// How many events carry each confidence, for the `parse` check's detail: `""` when every
/// event is `observed`, else e.g. `" (3 observed, 5 parsed, 1 declared)"`, so a bundle of
/// an integrated loop or an imported trace says so in `verify`'s output.
fn confidence_summary(confidences: impl Iterator<Item = Confidence>) -> String {
    let (mut observed, mut parsed, mut declared) = (0u64, 0u64, 0u64);
    for c in confidences {
        match c {
            Confidence::Observed => observed += 1,
            Confidence::Parsed => parsed += 1,
            Confidence::Declared => declared += 1,
        }
    }
    if parsed == 0 && declared == 0 {
        return String::new();
    }
    format!(" ({observed} observed, {parsed} parsed, {declared} declared)")
}
