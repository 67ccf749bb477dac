//! The commit log of outputs on object storage (`store::commits`), against
//! the local file system and a real S3 server (SeaweedFS from its pinned
//! wheel): commits read back in order, two writers racing for each number
//! (exactly one wins, the other stops), the probe refusing a store that
//! ignores conditional writes, and garbage collected only by a writer that
//! won, only from before it started. `--features store` (scripts/test).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path as Key;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use rayorch_kit::store::Stores;
use rayorch_kit::store::commits::{CommitError, CommitLog, Options, Segment, read};
use rayorch_kit::store::testing::S3Server;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn segment(kind: &'static str, text: &str) -> Segment {
    Segment {
        kind,
        bytes: Bytes::from(text.to_string()),
        rows: text.lines().count() as u64,
    }
}

/// Commit `keys` as one JSONL segment, one line per root.
async fn commit_roots(log: &mut CommitLog, keys: &[u64]) -> Result<u64, CommitError> {
    let text: String = keys.iter().map(|k| format!("{{\"key\":{k}}}\n")).collect();
    log.commit(vec![segment("jsonl", &text)], keys.to_vec())
        .await
        .map(|r| r.seq)
}

/// Every object under the prefix (relative keys), sorted.
async fn objects(store: &dyn ObjectStore, prefix: &Key) -> Vec<String> {
    use futures::TryStreamExt;
    let all: Vec<ObjectMeta> = store.list(Some(prefix)).try_collect().await.unwrap();
    let p = format!("{}/", prefix.as_ref());
    let mut v: Vec<String> = all
        .into_iter()
        .map(|m| {
            m.location
                .as_ref()
                .strip_prefix(&p)
                .unwrap_or(m.location.as_ref())
                .to_string()
        })
        .collect();
    v.sort();
    v
}

/// The log's behaviour on `store` under `prefix`: commits and reopening,
/// a race, garbage collection. The same on every backend.
async fn exactly_once_on(store: Arc<dyn ObjectStore>, prefix: Key) {
    let opts = Options::default();
    // A first writer commits twice and goes away.
    let (mut first, earlier) = CommitLog::open(store.clone(), prefix.clone(), &opts)
        .await
        .unwrap();
    assert_eq!(earlier.last_seq(), 0);
    assert_eq!(commit_roots(&mut first, &[1, 2]).await.unwrap(), 1);
    assert_eq!(commit_roots(&mut first, &[3]).await.unwrap(), 2);

    // Reopened: both commits, in order, with their roots and segments.
    let (_, committed) = CommitLog::open(store.clone(), prefix.clone(), &opts)
        .await
        .unwrap();
    assert_eq!(committed.last_seq(), 2);
    assert_eq!(committed.roots(), [1, 2, 3].into());
    let segs = committed.segments("jsonl");
    assert_eq!(segs.len(), 2);
    for (seg, want) in segs.iter().zip(["{\"key\":1}\n{\"key\":2}\n", "{\"key\":3}\n"]) {
        assert!(seg.starts_with("data/"), "{seg}");
        let got = store
            .get(&Key::from(format!("{}/{seg}", prefix.as_ref())))
            .await
            .unwrap();
        assert_eq!(got.bytes().await.unwrap(), want.as_bytes());
    }

    // Two resumers race: both saw commit 2; the one that commits 3 first
    // wins, the other is refused and writes no record.
    let (mut a, _) = CommitLog::open(store.clone(), prefix.clone(), &opts)
        .await
        .unwrap();
    let (mut b, _) = CommitLog::open(store.clone(), prefix.clone(), &opts)
        .await
        .unwrap();
    assert_eq!(commit_roots(&mut a, &[4]).await.unwrap(), 3);
    match commit_roots(&mut b, &[4]).await {
        Err(CommitError::Lost { seq: 3, other, .. }) => assert_eq!(other, a.writer()),
        other => panic!("the second writer must lose commit 3: {other:?}"),
    }
    let after = read(&*store, &prefix).await.unwrap();
    assert_eq!(after.last_seq(), 3);
    assert_eq!(after.records[2].writer, a.writer());
    assert_eq!(after.roots(), [1, 2, 3, 4].into(), "root 4 once");
    // The loser's segment is there, named by no record.
    let loser: Vec<String> = objects(&*store, &prefix)
        .await
        .into_iter()
        .filter(|k| k.starts_with("data/") && k.contains(b.writer()))
        .collect();
    assert_eq!(loser.len(), 1, "{loser:?}");

    // A killed writer's leftovers: a segment of a commit it never made.
    let orphan = format!("data/00/{}-00000009.jsonl", "0123456789abcdef");
    store
        .put(
            &Key::from(format!("{}/{orphan}", prefix.as_ref())),
            PutPayload::from("lost\n"),
        )
        .await
        .unwrap();
    // Store clocks tick coarsely: the resumer starts visibly later.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // The next resumer collects nothing before it has won a commit...
    let (mut c, _) = CommitLog::open(store.clone(), prefix.clone(), &opts)
        .await
        .unwrap();
    assert!(
        c.collect_garbage().await.unwrap().is_empty(),
        "not before its first commit"
    );
    // ...and a writer that starts after it keeps what it may still commit.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (mut late, _) = CommitLog::open(store.clone(), prefix.clone(), &opts)
        .await
        .unwrap();
    commit_roots(&mut c, &[5]).await.unwrap();
    let late_err = commit_roots(&mut late, &[6]).await.unwrap_err();
    assert!(matches!(late_err, CommitError::Lost { seq: 4, .. }), "{late_err}");
    // A segment of a number no record holds yet (a live writer's next).
    let pending = format!("data/ab/{}-00000005.jsonl", late.writer());
    store
        .put(
            &Key::from(format!("{}/{pending}", prefix.as_ref())),
            PutPayload::from("pending\n"),
        )
        .await
        .unwrap();
    let gone = c.collect_garbage().await.unwrap();
    assert!(
        gone.iter().any(|k| k.ends_with(a.writer())),
        "an earlier writer's probe goes too: {gone:?}"
    );
    let gone: Vec<String> = gone.into_iter().filter(|k| k.starts_with("data/")).collect();
    // The late writer's segment of number 4, which it lost to `c`, is
    // garbage at once: record 4 exists and is not its own.
    let late_lost: Vec<String> = gone
        .iter()
        .filter(|k| k.contains(late.writer()))
        .cloned()
        .collect();
    assert_eq!(late_lost.len(), 1, "{gone:?}");
    assert!(late_lost[0].contains("-00000004."), "{gone:?}");
    let mut want = vec![orphan.clone(), loser[0].clone(), late_lost[0].clone()];
    want.sort();
    assert_eq!(
        gone, want,
        "the losers' and the killed writer's segments, nothing else"
    );
    let left = objects(&*store, &prefix).await;
    assert!(
        left.contains(&pending),
        "a segment that may still be committed stays: {left:?}"
    );
    assert!(
        left.iter()
            .any(|k| k.ends_with(late.writer()) && k.starts_with("_rayorch/probe/")),
        "and a later writer's probe: {left:?}"
    );
    // Every committed segment is still there.
    let last = read(&*store, &prefix).await.unwrap();
    for s in last.segments("jsonl") {
        assert!(left.contains(&s), "{s} was deleted");
    }
    assert_eq!(last.roots(), [1, 2, 3, 4, 5].into());
}

#[test]
fn on_a_local_disk_each_commit_is_written_once_and_one_writer_wins_each_number() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    rt().block_on(exactly_once_on(store, Key::from("out/run")));
}

#[test]
fn on_s3_each_commit_is_written_once_and_one_writer_wins_each_number() {
    let server = S3Server::start().unwrap();
    // The bucket exists once something is in it.
    server.put(&[("s3://outputs/readme.txt", b"outputs")]).unwrap();
    let stores = Stores::new(S3Server::options(&server.endpoint()));
    let (store, _) = stores.resolve("s3://outputs/readme.txt").unwrap();
    rt().block_on(exactly_once_on(store, Key::from("corpus/run-1")));
}

/// A store that ignores conditional writes: a create-only put overwrites,
/// as some S3-compatible servers do.
#[derive(Debug)]
struct IgnoresConditions(Arc<dyn ObjectStore>);

impl std::fmt::Display for IgnoresConditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IgnoresConditions({})", self.0)
    }
}

#[async_trait::async_trait]
impl ObjectStore for IgnoresConditions {
    async fn put_opts(
        &self,
        location: &Key,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        opts.mode = PutMode::Overwrite;
        self.0.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Key,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Key, options: GetOptions) -> object_store::Result<GetResult> {
        self.0.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<Key>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<Key>> {
        self.0.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&Key>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.0.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Key>) -> object_store::Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Key,
        to: &Key,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.0.copy_opts(from, to, options).await
    }
}

#[test]
fn a_store_that_ignores_conditional_writes_is_refused_unless_at_least_once_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let store: Arc<dyn ObjectStore> = Arc::new(IgnoresConditions(inner));
    rt().block_on(async {
        let err = CommitLog::open(store.clone(), Key::from("out"), &Options::default())
            .await
            .unwrap_err();
        assert!(matches!(err, CommitError::NoConditionalWrites { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("ignores conditional writes") && text.contains("at-least-once"),
            "{text}"
        );
        assert!(read(&*store, &Key::from("out")).await.unwrap().records.is_empty());
        let opts = Options {
            at_least_once: true,
            ..Options::default()
        };
        let (mut log, _) = CommitLog::open(store.clone(), Key::from("out"), &opts)
            .await
            .unwrap();
        assert_eq!(commit_roots(&mut log, &[7]).await.unwrap(), 1);
    });
}

/// The job-facing side: outputs at a `file://` URL committed in the
/// background, due by bytes, read back by a resume that holds nothing but
/// the URL.
#[test]
fn bucket_outputs_commit_in_the_background_and_a_resume_needs_only_the_url() {
    use rayorch_kit::store::outputs::{BucketOptions, BucketOutputs};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/out/", dir.path().display());
    let opts = BucketOptions {
        target_bytes: 32,
        interval: Duration::from_secs(3600),
        source: "5 documents, list digest 1".into(),
        ..BucketOptions::default()
    };
    let (mut out, earlier) = BucketOutputs::open(&url, opts.clone()).unwrap();
    assert!(earlier.records.is_empty());
    assert!(!out.due(0) && !out.due(31) && out.due(32), "due by bytes");
    for k in 0..5u64 {
        let line = format!("{{\"key\":{k}}}\n");
        out.commit(vec![segment("jsonl", &line)], vec![k]).unwrap();
    }
    let done = out.finish().unwrap();
    assert_eq!((done.commits, done.roots, done.segments), (5, 5, 5));

    // A resume elsewhere: the URL alone says what is done.
    let (mut again, committed) = BucketOutputs::open(&url, opts.clone()).unwrap();
    assert_eq!(committed.roots(), (0..5).collect());
    assert_eq!(committed.segments("jsonl").len(), 5);
    assert_eq!(again.finish().unwrap().commits, 0);
    let url_file = again.put_run_file("summary.json", b"{}".to_vec()).unwrap();
    assert!(
        url_file.ends_with(&format!("out/runs/{}/summary.json", again.writer())),
        "{url_file}"
    );

    // A resume over other inputs is refused, naming both.
    let other = BucketOptions {
        source: "6 documents, list digest 2".into(),
        ..opts.clone()
    };
    let err = BucketOutputs::open(&url, other).unwrap_err();
    assert!(
        err.contains("other inputs") && err.contains("list digest 1"),
        "{err}"
    );

    // Not a place for outputs: a clear error.
    let err = BucketOutputs::open("https://example.invalid/out/", BucketOptions::default()).unwrap_err();
    assert!(err.contains("not an output URL"), "{err}");
}
