//! `provrun batch --out s3://…` against an S3-compatible server on loopback (moto's server,
//! from a throwaway virtualenv under target/, started here and stopped after): each run's
//! bundle lands as `PREFIX/<id>.tar`; `verify`, `show`, `view`, `cat` and `replay` read it
//! from the bucket (`sign` and `resume` refuse it); a restart skips what the bucket holds
//! and redoes an object that does not verify; and a destination that refuses writes is
//! refused before anything runs.
//!
//! Without Python (or without PyPI) the test is skipped with a loud message, except under
//! `CI=true`, where it fails instead: `cargo xtask ci` installs python3 and venv there.

use std::process::{Command, Output};

use serde_json::Value;

use crate::support::cli::{assert_exit, text};
use crate::support::moto::{self, Moto, virtualenv};

fn unavailable(why: &str) {
    moto::unavailable("object_store", why);
}

fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

// One long scenario on one moto bucket: upload, reads back, resume, each on the last's state.
#[test]
fn a_batch_into_s3_uploads_verifying_bundles_and_resumes_from_the_bucket() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable(&why),
    };
    let moto = Moto::start(&python);
    assert_eq!(moto.request("PUT", "/bundles", b""), 200, "bucket not made");

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("agent.toml"),
        "name = \"s3\"\nmodel = \"script:script.json\"\ninstructions = \"\"\ntools = [\"list_dir\"]\nmax_steps = 4\n",
    )
    .unwrap();
    std::fs::write(
        p.join("script.json"),
        r#"[{"tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "/input"}}]}, {"text": "done"}]"#,
    )
    .unwrap();
    let runs = p.join("runs.jsonl");
    let lines: String = (0..6)
        .map(|i| {
            format!("{{\"id\": \"r{i}\", \"agent\": \"agent.toml\", \"prompt\": \"task {i}\"}}\n")
        })
        .collect();
    std::fs::write(&runs, lines).unwrap();
    // The bundles are built in the work folder named here, so the test can see it emptied.
    let tmp = p.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let work = p.join("work");
    let provrun = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args(args)
            .env("TMPDIR", &tmp)
            .env("AWS_ENDPOINT_URL", moto.endpoint())
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .unwrap()
    };
    let runs_arg = runs.display().to_string();
    let work_arg = work.display().to_string();
    let batch = [
        "batch",
        &runs_arg,
        "--out",
        "s3://bundles/nightly",
        "--work-dir",
        &work_arg,
        "--json",
    ];
    let out = provrun(&batch);
    assert_exit(&out, 0);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 7);
    for l in &lines[..6] {
        let id = l["id"].as_str().unwrap();
        assert_eq!(l["bundle"], format!("s3://bundles/nightly/{id}.tar"));
        assert_eq!(l["status"], "finished");
    }
    // Nothing is left in the work folder: the bucket holds the bundles.
    let left: Vec<_> = std::fs::read_dir(&work).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");

    // verify and show read a bundle straight from the bucket.
    let out = provrun(&["verify", "s3://bundles/nightly/r3.tar"]);
    assert_exit(&out, 0);
    assert!(text(&out.stdout).contains("bundle verifies"));
    let out = provrun(&["show", "s3://bundles/nightly/r3.tar"]);
    assert_exit(&out, 0);
    assert!(
        text(&out.stdout).contains("list_dir"),
        "{}",
        text(&out.stdout)
    );
    // So do view, cat and replay; sign and resume refuse an object (exit 2), unchanged.
    let page = p.join("r3.html");
    let out = provrun(&[
        "view",
        "s3://bundles/nightly/r3.tar",
        "-o",
        &page.display().to_string(),
    ]);
    assert_exit(&out, 0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("\"bundle\":\"s3://bundles/nightly/r3.tar\""));
    // The first request's digest, from the page's data; cat prints its bytes.
    let open = "<script type=\"application/json\" id=\"bundle-data\">";
    let data = &html[html.find(open).unwrap() + open.len()..];
    let data: Value = serde_json::from_str(&data[..data.find("</script>").unwrap()]).unwrap();
    let digest = data["steps"][0]["model"]["request"].as_str().unwrap();
    let out = provrun(&["cat", "s3://bundles/nightly/r3.tar", digest]);
    assert_exit(&out, 0);
    assert_eq!(
        text(&out.stdout),
        data["blobs"][digest]["text"].as_str().unwrap()
    );
    let replayed = p.join("r3-replayed").display().to_string();
    let out = provrun(&["replay", "s3://bundles/nightly/r3.tar", "--out", &replayed]);
    assert_exit(&out, 0);
    assert!(text(&out.stdout).contains("replay matches"));
    let key = p.join("key").display().to_string();
    assert_exit(&provrun(&["keygen", &key]), 0);
    for args in [
        ["sign", "s3://bundles/nightly/r3.tar", "--key", &key],
        ["resume", "s3://bundles/nightly/r3.tar", "--approve", "1.1"],
    ] {
        let out = provrun(&args);
        assert_exit(&out, 2);
        assert!(text(&out.stderr).contains("cannot be changed in place"));
    }

    // Nothing there is a usage error, as for a missing folder (issue 37; it was exit 1).
    let out = provrun(&["verify", "s3://bundles/nightly/nope.tar"]);
    assert_exit(&out, 2);
    assert!(
        text(&out.stderr).contains("no bundle at"),
        "{}",
        text(&out.stderr)
    );

    // An object that is not a verifying bundle is run again; the others are skipped.
    // (Objects need a signed request: boto3, which moto brings, signs it.)
    let put = Command::new(&python)
        .args([
            "-c",
            "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', \
             aws_access_key_id='test', aws_secret_access_key='test')\
             .put_object(Bucket='bundles', Key='nightly/r2.tar', Body=b'garbage')",
            &moto.endpoint(),
        ])
        .output()
        .unwrap();
    assert!(put.status.success(), "{}", text(&put.stderr));
    let out = provrun(&batch);
    assert_exit(&out, 0);
    let lines = json_lines(&out);
    for l in &lines[..6] {
        assert_eq!(l["skipped"], l["id"] != "r2", "{l}");
    }
    assert_eq!(lines[6]["skipped"], 5);
    assert_exit(&provrun(&["verify", "s3://bundles/nightly/r2.tar"]), 0);

    // A destination that refuses writes (no such bucket) is refused before any run.
    let out = provrun(&[
        "batch",
        &runs_arg,
        "--out",
        "s3://no-such-bucket/x",
        "--work-dir",
        &work_arg,
    ]);
    assert_exit(&out, 2);
    assert!(text(&out.stderr).contains("cannot write to `s3://no-such-bucket/x`"));
    // So is a scheme this build does not speak.
    let out = provrun(&["batch", &runs_arg, "--out", "gs://b/x"]);
    assert_exit(&out, 2);
    assert!(
        text(&out.stderr).contains("not supported"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_file_url_and_a_tar_file_work_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("agent.toml"),
        "name = \"f\"\nmodel = \"test\"\ninstructions = \"\"\ntools = []\nmax_steps = 2\n",
    )
    .unwrap();
    let runs = p.join("runs.jsonl");
    std::fs::write(
        &runs,
        "{\"id\": \"a\", \"agent\": \"agent.toml\"}\n{\"id\": \"b\", \"agent\": \"agent.toml\"}\n",
    )
    .unwrap();
    let tmp = p.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let bucket = p.join("bucket");
    std::fs::create_dir(&bucket).unwrap();
    let provrun = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args(args)
            .env("TMPDIR", &tmp)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .unwrap()
    };
    let url = format!("file://{}/runs", bucket.display());
    let work = p.join("work").display().to_string();
    let out = provrun(&[
        "batch",
        &runs.display().to_string(),
        "--out",
        &url,
        "--work-dir",
        &work,
    ]);
    assert_exit(&out, 0);
    let tar = bucket.join("runs/a.tar");
    assert!(tar.is_file());
    assert_exit(&provrun(&["verify", &tar.display().to_string()]), 0);
    assert_exit(&provrun(&["verify", &format!("{url}/b.tar")]), 0);
    // A damaged tar does not verify.
    let mut bytes = std::fs::read(&tar).unwrap();
    let at = bytes.len() / 3;
    bytes.truncate(at);
    let cut = p.join("cut.tar");
    std::fs::write(&cut, bytes).unwrap();
    assert_exit(&provrun(&["verify", &cut.display().to_string()]), 1);
    // A file:// destination that is a file refuses writes: exit 2.
    let file = p.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let out = provrun(&[
        "batch",
        &runs.display().to_string(),
        "--out",
        &format!("file://{}/sub", file.display()),
        "--work-dir",
        &work,
    ]);
    assert_exit(&out, 2);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}
