//! Many threads and many async tasks appending to one recorder get one valid chain.

use crate::common;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use common::*;
use provrun_evidence::*;
use serde_json::json;

fn check_all_recorded(dir: &std::path::Path, expected_calls: usize) {
    let r = verify(dir);
    assert!(r.ok && r.complete, "{r:#?}");
    let ids: BTreeSet<String> = read_lines(dir)
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["type"] == "tool_called")
                .then(|| v["payload"]["call_id"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(ids.len(), expected_calls);
}

#[test]
fn threads_appending_concurrently_make_one_chain() {
    for durability in [
        Durability::Flush,
        Durability::GroupCommit,
        Durability::PerEvent,
    ] {
        let dir = scratch("threads");
        let rec = Recorder::create(&dir, "r", durability, &run_started()).unwrap();
        let per = if durability == Durability::Flush {
            200
        } else {
            25
        };
        std::thread::scope(|s| {
            for t in 0..8 {
                let rec = rec.clone();
                s.spawn(move || {
                    let mut seqs = Vec::new();
                    for i in 0..per {
                        seqs.push(rec.record(&tool_call(&format!("t{t}-{i}"), false)).unwrap());
                        if i % 10 == 0 {
                            rec.declarer().declare("tick", json!(i)).unwrap();
                        }
                    }
                    // Each thread sees its own events in increasing order.
                    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
                });
            }
        });
        rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
        check_all_recorded(&dir, 8 * per);
    }
}

#[test]
fn async_tasks_waiting_on_group_commit_make_one_chain() {
    let dir = scratch("tasks");
    let rec = Recorder::create(&dir, "r", Durability::GroupCommit, &run_started()).unwrap();
    let tasks = 50;
    let per = 4;
    let futs: Vec<Pin<Box<dyn Future<Output = Vec<u64>>>>> = (0..tasks)
        .map(|t| {
            let rec = rec.clone();
            Box::pin(async move {
                let mut seqs = Vec::new();
                for i in 0..per {
                    let blob = rec
                        .put_blob_async(format!("{t}-{i}").as_bytes(), "text/plain")
                        .await
                        .unwrap();
                    let mut call = tool_call(&format!("a{t}-{i}"), false);
                    call.result_blob = Some(blob);
                    seqs.push(rec.record_async(&call).await.unwrap());
                }
                seqs
            }) as Pin<Box<dyn Future<Output = Vec<u64>>>>
        })
        .collect();
    let all: Vec<u64> = join_all(futs).into_iter().flatten().collect();
    let unique: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(unique.len(), tasks * per);
    let stepped = join_all(vec![
        Box::pin(rec.step_async()) as Pin<Box<dyn Future<Output = Result<()>>>>
    ]);
    assert!(stepped[0].is_ok());
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    check_all_recorded(&dir, tasks * per);
}

#[test]
fn many_recorders_share_the_group_committer_and_each_bundle_verifies() {
    // Runs under every syncing policy share one sync thread: each run's events, blobs,
    // inputs and outputs must still end up in its own bundle, complete and valid, and
    // a dropped recorder must not stop the others' syncs.
    for durability in [
        Durability::GroupCommit,
        Durability::PerEvent,
        Durability::PerStep,
        Durability::AtEnd,
    ] {
        let dirs: Vec<_> = (0..12).map(|i| scratch(&format!("shared-{i}"))).collect();
        std::thread::scope(|s| {
            for (r, dir) in dirs.iter().enumerate() {
                s.spawn(move || {
                    let rec =
                        Recorder::create(dir, format!("r{r}"), durability, &run_started()).unwrap();
                    std::fs::write(rec.input_dir().join("in.txt"), format!("input {r}")).unwrap();
                    rec.record_inputs().unwrap();
                    for i in 0..6 {
                        let blob = rec
                            .put_blob(format!("{r}-{i}").as_bytes(), "text/plain")
                            .unwrap();
                        let mut call = tool_call(&format!("c{r}-{i}"), false);
                        call.result_blob = Some(blob);
                        rec.record(&call).unwrap();
                        rec.step().unwrap();
                    }
                    std::fs::write(rec.output_dir().join("out.txt"), format!("out {r}")).unwrap();
                    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
                });
            }
        });
        for dir in &dirs {
            check_all_recorded(dir, 6);
            let names: Vec<_> = std::fs::read_dir(dir.join("blobs"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, ["pack"], "one pack, no temporary file left");
            let src = provrun_evidence::pack::FileSource::open(&dir.join("blobs/pack")).unwrap();
            let index = provrun_evidence::pack::read_index(&src).unwrap();
            assert_eq!(index.blobs.len(), 6, "one index record per blob");
        }
    }
}

#[test]
fn blobs_for_the_next_event_are_synced_with_it_under_every_policy() {
    for durability in [
        Durability::Flush,
        Durability::GroupCommit,
        Durability::PerEvent,
        Durability::PerStep,
        Durability::AtEnd,
    ] {
        let dir = scratch("next-event");
        let rec = Recorder::create(&dir, "r", durability, &run_started()).unwrap();
        for i in 0..5 {
            let blob = rec
                .put_blob_for_next_event(format!("body {i}").as_bytes(), "text/plain")
                .wait()
                .unwrap();
            let mut call = tool_call(&format!("n{i}"), false);
            call.result_blob = Some(blob);
            rec.record_async(&call).wait().unwrap();
            // Nothing new since the event: the step needs no batch of its own.
            rec.step().unwrap();
        }
        rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
        check_all_recorded(&dir, 5);
    }
}
