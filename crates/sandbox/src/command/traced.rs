//! A confined command started under the process trail: the command line put behind the
//! trail's stub, and the plan for the tracer that will hold it (see [`crate::trail`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Child;

use crate::error::{Result, SandboxError};
use crate::sandbox::Sandbox;
use crate::trail::watch::{TrailPlan, TrailWatch};
use crate::trail::{ObservedProcess, Trail, TrailSummary};

use super::HELPER_NAME;
use super::cgroup::Cgroup;
use super::outcome::Confinement;
use super::tree::kill_tree;

/// `program args` (run under the name `arg0` when given) as the command to start: behind
/// the stub at `stub` (the helper, as the command's user reaches it) when `sandbox`
/// records the trail and the machine has the helper, with the tracer's plan; else as
/// they are.
pub(super) fn traced(
    sandbox: &Sandbox,
    conf: &Confinement,
    stub: Option<&Path>,
    program: PathBuf,
    args: Vec<OsString>,
    arg0: Option<&'static str>,
) -> (
    PathBuf,
    Vec<OsString>,
    Option<&'static str>,
    Option<TrailPlan>,
) {
    let config = sandbox.trail_config();
    let (Some(stub), Some(helper), false) = (stub, conf.helper.as_deref(), config.off) else {
        return (program, args, arg0, None);
    };
    let mut plan = TrailPlan::new(
        helper,
        HELPER_NAME,
        conf.bwrap.as_deref(),
        std::sync::Arc::clone(&config.secrets),
    );
    if let Some(max) = config.max {
        plan.max = max;
    }
    let (stub, mut stub_args) = TrailPlan::stub_args(stub, arg0, &program);
    stub_args.extend(args);
    (stub, stub_args, Some(HELPER_NAME), Some(plan))
}

/// The trail of one running command: its tracer, or why it runs without one.
#[derive(Debug)]
pub(super) struct Traced {
    watch: Option<TrailWatch>,
    error: Option<String>,
}

/// How long the end of a command waits for its tracer to report the last process.
const TRAIL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts the tracer of `plan` on the just spawned `child` (the stopped stub) and waits
/// until it holds it. Without a plan, `None`. When the tracer cannot attach the command
/// is killed and refused — unless `sandbox` allows degraded commands: then it runs on
/// untraced, and its trail says why.
///
/// # Errors
///
/// [`SandboxError::TrailUnavailable`] when the tracer cannot attach (and degraded commands
/// are not allowed).
pub(super) fn hold(
    sandbox: &Sandbox,
    child: &mut Child,
    cgroup: Option<&Cgroup>,
    plan: Option<TrailPlan>,
) -> Result<Option<Traced>> {
    let Some(plan) = plan else {
        return Ok(None);
    };
    match TrailWatch::start(&plan, child.id()) {
        Ok(watch) => Ok(Some(Traced {
            watch: Some(watch),
            error: None,
        })),
        Err(reason) if sandbox.degraded_allowed() => {
            tracing::warn!(%reason, "the process trail cannot be recorded: the command runs untraced");
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
            }
            Ok(Some(Traced {
                watch: None,
                error: Some(reason),
            }))
        }
        Err(reason) => {
            kill_tree(child, cgroup);
            let _ = child.wait();
            if let Some(cg) = cgroup {
                cg.remove();
            }
            Err(SandboxError::TrailUnavailable { reason })
        }
    }
}

impl Traced {
    /// The images that have ended since the last call.
    pub(super) fn take_finished(&self) -> Vec<ObservedProcess> {
        self.watch
            .as_ref()
            .map(TrailWatch::take_finished)
            .unwrap_or_default()
    }

    /// A handle on the running trail, when there is a tracer.
    pub(super) fn feed(&self) -> Option<crate::trail::TrailFeed> {
        self.watch.as_ref().map(TrailWatch::feed)
    }

    /// The rest of the trail once the command is over (its tree killed).
    pub(super) fn finish(self) -> Trail {
        match self.watch {
            Some(watch) => watch.finish(TRAIL_WAIT),
            None => Trail {
                processes: Vec::new(),
                summary: TrailSummary {
                    mechanism: "ptrace".to_owned(),
                    error: self.error,
                    ..TrailSummary::default()
                },
            },
        }
    }
}
