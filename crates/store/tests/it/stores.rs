//! A folder store, a tar file and a `file://` bucket: list, open, tar, put, write back.

use std::path::{Path, PathBuf};

use futures_util::StreamExt as _;
use provrun_store::{Location, Store, StoreError, open, open_blocking, tar_folder};

/// A small folder that looks like a bundle: a log, a blob and an output.
fn bundle(at: &Path, marker: &str) -> PathBuf {
    std::fs::create_dir_all(at.join("output")).unwrap();
    std::fs::create_dir_all(at.join("blobs")).unwrap();
    std::fs::write(
        at.join("events.jsonl"),
        format!("{{\"marker\":\"{marker}\"}}\n"),
    )
    .unwrap();
    std::fs::write(at.join("blobs/pack"), [0u8, 1, 2, 3, 255]).unwrap();
    std::fs::write(at.join("output/answer.txt"), marker).unwrap();
    at.to_path_buf()
}

async fn collect(store: &Store, id: &str) -> Vec<u8> {
    let download = store.tar(id).await.unwrap().expect("the bundle is there");
    let mut chunks = download.chunks;
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    if let Some(size) = download.size {
        assert_eq!(size, bytes.len() as u64);
    }
    bytes
}

#[tokio::test]
async fn a_folder_store_lists_opens_and_streams_its_bundles_folders_and_tars_alike() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dest");
    bundle(&root.join("a"), "a");
    let b = bundle(&dir.path().join("b-src"), "b");
    std::fs::write(root.join("b.tar"), tar_folder(&b).unwrap()).unwrap();
    // Not bundles: a folder without a log, a hidden folder, a name that is no id, a file.
    std::fs::create_dir_all(root.join("empty")).unwrap();
    bundle(&root.join(".provrun-aside/a.1"), "old");
    bundle(&root.join("not an id"), "x");
    std::fs::write(root.join("notes.txt"), "hello").unwrap();

    let store = Store::open(&root.display().to_string()).unwrap();
    assert!(!store.is_bucket());
    let listed = store.list().await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(listed[0].location, Location::Folder(root.join("a")));
    assert_eq!(listed[1].location, Location::TarFile(root.join("b.tar")));
    // A folder's size is its files'; a tar's the file's.
    assert_eq!(listed[0].size, 15 + 5 + 1);
    assert_eq!(
        listed[1].size,
        std::fs::metadata(root.join("b.tar")).unwrap().len()
    );
    assert!(listed.iter().all(|l| l.modified.is_some()));

    let a = store.open_bundle("a").await.unwrap().unwrap();
    assert_eq!(a.dir(), root.join("a"));
    assert!(!a.is_copy());
    let b_open = store.open_bundle("b").await.unwrap().unwrap();
    assert!(b_open.is_copy());
    assert_eq!(
        std::fs::read(b_open.dir().join("output/answer.txt")).unwrap(),
        b"b"
    );
    assert!(store.open_bundle("zzz").await.unwrap().is_none());
    let bad = store.open_bundle("../b-src").await.unwrap_err();
    assert!(matches!(bad, StoreError::BadId(_)), "{bad}");

    // A folder is packed as it is read, to the same bytes as tar_folder; a tar is sent
    // as stored.
    assert_eq!(
        collect(&store, "a").await,
        tar_folder(&root.join("a")).unwrap()
    );
    assert_eq!(
        collect(&store, "b").await,
        std::fs::read(root.join("b.tar")).unwrap()
    );
    assert!(store.tar("zzz").await.unwrap().is_none());

    // Put moves a finished folder in; one that is there already is left as it is.
    let c = bundle(&dir.path().join("work/c"), "c");
    store.put("c", &c).await.unwrap();
    assert!(!c.exists());
    assert!(root.join("c/events.jsonl").is_file());
    store.put("c", &root.join("c")).await.unwrap();
    let d = bundle(&dir.path().join("work/d"), "d");
    let taken = store.put("a", &d).await.unwrap_err();
    assert!(
        taken.to_string().contains("cannot put a bundle at"),
        "{taken}"
    );
}

#[tokio::test]
async fn a_file_bucket_keeps_one_tar_per_bundle_and_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/bucket/runs", dir.path().display());
    let store = Store::open(&url).unwrap();
    assert!(store.is_bucket());
    assert_eq!(store.name(), url);
    std::fs::create_dir_all(dir.path().join("bucket/runs")).unwrap();
    store.probe().await.unwrap();
    for id in ["r2", "r1"] {
        let folder = bundle(&dir.path().join("work").join(id), id);
        store.put(id, &folder).await.unwrap();
    }
    // Deeper objects and other names are not bundles of this prefix.
    std::fs::create_dir_all(dir.path().join("bucket/runs/deeper")).unwrap();
    std::fs::write(dir.path().join("bucket/runs/deeper/x.tar"), b"x").unwrap();
    std::fs::write(dir.path().join("bucket/runs/notes.txt"), b"x").unwrap();
    let listed = store.list().await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2"]);
    assert_eq!(
        listed[0].location,
        Location::Object(format!("{url}/r1.tar"))
    );
    assert_eq!(store.bundle_name("r1"), format!("{url}/r1.tar"));

    let tar = std::fs::read(dir.path().join("bucket/runs/r1.tar")).unwrap();
    assert_eq!(listed[0].size, tar.len() as u64);
    assert_eq!(collect(&store, "r1").await, tar);
    let opened = store.open_bundle("r2").await.unwrap().unwrap();
    assert_eq!(
        std::fs::read(opened.dir().join("output/answer.txt")).unwrap(),
        b"r2"
    );
    assert!(store.open_bundle("r3").await.unwrap().is_none());
    assert!(store.tar("r3").await.unwrap().is_none());

    // The same object by URL, as a user names it.
    let location = Location::parse(format!("{url}/r1.tar")).unwrap();
    let by_url = open(&location).await.unwrap();
    assert_eq!(
        std::fs::read(by_url.dir().join("output/answer.txt")).unwrap(),
        b"r1"
    );
    let err = by_url.write_back().unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    let missing = open(&Location::parse(format!("{url}/nope.tar")).unwrap())
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert!(matches!(
        Store::open("gs://b/x").unwrap_err(),
        StoreError::BadUrl { .. }
    ));
}

#[test]
fn a_changed_copy_of_a_tar_is_written_back_over_its_file_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let src = bundle(&dir.path().join("src"), "t");
    let tar = dir.path().join("t.tar");
    std::fs::write(&tar, tar_folder(&src).unwrap()).unwrap();
    let location = Location::parse(&tar).unwrap();
    let opened = open_blocking(&location).unwrap();
    opened.require_log().unwrap();
    std::fs::write(opened.dir().join("statement.dsse.json"), "{}\n").unwrap();
    opened.write_back().unwrap();
    let back = open_blocking(&location).unwrap();
    assert_eq!(
        std::fs::read(back.dir().join("statement.dsse.json")).unwrap(),
        b"{}\n"
    );
    // Nothing is left beside the tar.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A folder without a log is no bundle.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = open_blocking(&Location::parse(&empty).unwrap())
        .unwrap()
        .require_log()
        .unwrap_err();
    assert!(err.to_string().contains("is not a bundle"), "{err}");
    // A damaged tar is a tar error that names it.
    let cut = dir.path().join("cut.tar");
    let bytes = std::fs::read(&tar).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let err = open_blocking(&Location::parse(&cut).unwrap()).unwrap_err();
    assert!(matches!(err, StoreError::Tar { .. }), "{err}");
}
