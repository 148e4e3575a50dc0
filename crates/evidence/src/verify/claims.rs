//! The `claims` check: a wrapped program's claimed commands against the processes its
//! sandbox was seen to start ([`crate::claims`]). Present only when a session log was
//! imported (or a call claims a command); what does not match is a warning, never a
//! failure.

use super::bundle::Bundle;
use super::{Acc, Check, CheckCode};
use crate::claims::match_claims;
use crate::event::Event;

/// `claims`, when the log has an imported session log or claimed commands.
pub(super) fn claims(b: &Bundle<'_>) -> Option<Check> {
    let events: Vec<Event> = b.log.events.iter().flatten().cloned().collect();
    let report = match_claims(&events)?;
    let mut acc = Acc::new(CheckCode::Claims);
    if report.claims > 0 && !report.traced {
        acc.warn(format!(
            "{} claimed calls ran commands, but the log holds no process trail of the program \
             to match them against",
            report.claims
        ));
        return Some(acc.done());
    }
    for c in &report.unobserved {
        acc.warn(format!(
            "line {}: claimed call {:?} ({}) ran `{}`, but no observed process did",
            c.seq + 1,
            c.run_call_id.as_deref().unwrap_or(&c.call_id),
            c.name,
            shorten(&c.command)
        ));
    }
    for p in &report.unclaimed {
        acc.warn(format!(
            "line {}: process {} `{}` is accounted for by no claimed call",
            p.seq + 1,
            p.id,
            shorten(&p.argv.join(" "))
        ));
    }
    if !report.trail_complete {
        acc.warn("the trail did not see everything (incomplete, or over its cap)");
    }
    acc.pass = format!(
        "{} claimed commands, each matched by an observed process; {} observed processes, each \
         accounted for",
        report.claims, report.processes
    );
    Some(acc.done())
}

/// `text` on one line and cut to 120 characters, for a detail.
fn shorten(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}
