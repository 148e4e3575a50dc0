//! Every command that reads a bundle reads it from each source a user may name — a
//! folder, a bundle `.tar` (as `batch` uploads it), or its `file://` URL — and a command
//! that changes a bundle either does so (`sign` packs a signed `.tar` again) or says why
//! it cannot and exits 2 (`resume` of a tar, `sign` of a bucket object), touching nothing.
//! The same commands against an S3-compatible server: tests/it/object_store.rs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::cli::{assert_exit, provrun, s, text};

fn example(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
        .display()
        .to_string()
}

/// A finished scripted run (three tool calls, an output), the same bundle as a `.tar`, and
/// that tar's `file://` URL: the three names of one bundle.
struct Sources {
    dir: tempfile::TempDir,
    folder: PathBuf,
    tar: PathBuf,
    url: String,
}

impl Sources {
    fn new() -> Sources {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("bundle");
        let out = provrun(&[
            "run",
            &example("scripted/agent.toml"),
            "--input",
            &example("scripted/input"),
            "--out",
            &s(&folder),
        ]);
        assert_exit(&out, 0);
        let bucket = dir.path().join("bucket");
        std::fs::create_dir(&bucket).unwrap();
        let tar = bucket.join("run-1.tar");
        std::fs::write(&tar, provrun_store::tar_folder(&folder).unwrap()).unwrap();
        let url = format!("file://{}", tar.display());
        Sources {
            dir,
            folder,
            tar,
            url,
        }
    }

    /// The three names, as command-line arguments.
    fn all(&self) -> [String; 3] {
        [s(&self.folder), s(&self.tar), self.url.clone()]
    }

    /// The digest of the first model request's blob.
    fn request_digest(&self) -> String {
        let events = crate::support::cli::events(&self.folder);
        let called = events.iter().find(|e| e["type"] == "model_called").unwrap();
        called["payload"]["request"]["digest"]["sha256"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// The page's data, read back from a page file.
fn page_data(page: &Path) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let open = "<script type=\"application/json\" id=\"bundle-data\">";
    let start = html.find(open).unwrap() + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn verify_show_view_cat_and_replay_read_a_folder_a_tar_and_a_url_alike() {
    let src = Sources::new();
    let digest = src.request_digest();
    let blob = provrun(&["cat", &s(&src.folder), &digest]).stdout;
    assert!(!blob.is_empty());
    for (i, bundle) in src.all().iter().enumerate() {
        let out = provrun(&["verify", bundle]);
        assert_exit(&out, 0);
        assert!(text(&out.stdout).contains("bundle verifies"), "{bundle}");

        let out = provrun(&["show", bundle]);
        assert_exit(&out, 0);
        assert!(text(&out.stdout).contains("write_file"), "{bundle}");

        let page = src.dir.path().join(format!("page-{i}.html"));
        let out = provrun(&["view", bundle, "-o", &s(&page)]);
        assert_exit(&out, 0);
        let data = page_data(&page);
        // The page names the bundle as the user did, not the folder it was unpacked into.
        assert_eq!(data["bundle"], bundle.as_str());
        assert_eq!(data["verify"]["verdict"], "verifies");
        let outputs = data["outputs"].as_array().unwrap();
        let summary = outputs.iter().find(|o| o["path"] == "summary.md").unwrap();
        assert_eq!(summary["matches"], true, "{bundle}");

        let out = provrun(&["cat", bundle, &digest]);
        assert_exit(&out, 0);
        assert_eq!(out.stdout, blob, "{bundle}");

        let new = src.dir.path().join(format!("replay-{i}"));
        let out = provrun(&["replay", bundle, "--out", &s(&new)]);
        assert_exit(&out, 0);
        assert!(text(&out.stdout).contains("replay matches"), "{bundle}");
        assert_exit(&provrun(&["verify", &s(&new)]), 0);
    }
}

#[test]
fn sign_signs_a_folder_in_place_packs_a_tar_again_and_refuses_a_bucket_object() {
    let src = Sources::new();
    let key = src.dir.path().join("key");
    assert_exit(&provrun(&["keygen", &s(&key)]), 0);
    let public = format!("{}.pub", key.display());

    assert_exit(&provrun(&["sign", &s(&src.folder), "--key", &s(&key)]), 0);
    assert_exit(&provrun(&["verify", &s(&src.folder), "--key", &public]), 0);

    // The tar is replaced by a tar of the signed bundle, nothing left beside it.
    let before = std::fs::read(&src.tar).unwrap();
    let out = provrun(&["sign", &s(&src.tar), "--key", &s(&key)]);
    assert_exit(&out, 0);
    assert!(text(&out.stderr).contains(&format!("signed {}", s(&src.tar))));
    assert_ne!(std::fs::read(&src.tar).unwrap(), before);
    let out = provrun(&["verify", &s(&src.tar), "--key", &public]);
    assert_exit(&out, 0);
    assert!(
        text(&out.stdout).contains("signature"),
        "{}",
        text(&out.stdout)
    );
    let beside: Vec<_> = std::fs::read_dir(src.tar.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["run-1.tar"]);

    // An object in a bucket is not replaced: exit 2, the object unchanged.
    let signed_tar = std::fs::read(&src.tar).unwrap();
    let out = provrun(&["sign", &src.url, "--key", &s(&key)]);
    assert_exit(&out, 2);
    assert!(
        text(&out.stderr).contains("cannot be changed in place"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&src.tar).unwrap(), signed_tar);
}

#[test]
fn resume_refuses_a_tar_and_a_url_saying_why_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let paused = dir.path().join("paused");
    let out = provrun(&["run", &example("approve/agent.toml"), "--out", &s(&paused)]);
    assert_exit(&out, 4);
    let tar = dir.path().join("paused.tar");
    std::fs::write(&tar, provrun_store::tar_folder(&paused).unwrap()).unwrap();
    let before = std::fs::read(&tar).unwrap();
    let url = format!("file://{}", tar.display());
    for (bundle, says) in [
        (s(&tar), "it is a .tar"),
        (url, "it is an object in a bucket"),
    ] {
        let out = provrun(&["resume", &bundle, "--approve", "1.1"]);
        assert_exit(&out, 2);
        let err = text(&out.stderr);
        assert!(
            err.contains("cannot be changed in place") && err.contains(says),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&tar).unwrap(), before);
    // The folder itself resumes.
    let out = provrun(&["resume", &s(&paused), "--approve", "1.1"]);
    assert_exit(&out, 0);
}

#[test]
fn view_of_a_folder_that_is_no_bundle_or_of_a_damaged_tar_makes_no_page() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let page = dir.path().join("page.html");
    let out = provrun(&["view", &s(&empty), "-o", &s(&page)]);
    assert_exit(&out, 2);
    assert!(
        text(&out.stderr).contains("is not a bundle: it has no events.jsonl"),
        "{}",
        text(&out.stderr)
    );
    assert!(!page.exists());
    // Nor does a tar that is cut short; verify says it does not verify.
    let src = Sources::new();
    let bytes = std::fs::read(&src.tar).unwrap();
    let cut = dir.path().join("cut.tar");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    assert_exit(&provrun(&["view", &s(&cut), "-o", &s(&page)]), 1);
    assert!(!page.exists());
    assert_exit(&provrun(&["verify", &s(&cut)]), 1);
    // Nothing at all is a usage error everywhere.
    let nothing = s(&dir.path().join("nothing.tar"));
    for args in [
        vec!["view", &nothing],
        vec!["verify", &nothing],
        vec!["show", &nothing],
        vec!["cat", &nothing, &"0".repeat(64)],
        vec!["replay", &nothing, "--out", "x"],
        vec!["resume", &nothing, "--approve", "1.1"],
    ] {
        let out = provrun(&args);
        assert_exit(&out, 2);
        assert!(
            text(&out.stderr).contains("no bundle"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
