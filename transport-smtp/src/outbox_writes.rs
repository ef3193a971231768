//! The outbox's files, written in groups by one thread.
//!
//! Each file must appear whole or not at all, and be durable before its send is answered:
//! temporary file, fsync, rename, fsync of the directory. Done per message on the blocking
//! pool, that was two fsyncs and two hand-offs between threads per message, each fsync its
//! own journal commit unless another happened to run at the same moment (bench/README.md,
//! "The outbox writes its files in groups").
//!
//! So one thread writes every file waiting, as a group: each to its temporary file, then
//! each fsynced, then each renamed, then the directory fsynced once, and only then is each
//! send answered. Before the fsyncs, the writeback of every file of the group is started
//! (Linux: `posix_fadvise(DONTNEED)`, which starts it and then drops the clean pages), so the
//! first fsync's journal commit carries the others' data too, and theirs find little left to
//! do. That hint is only about speed: every file is still fsynced before its rename, and the
//! rename is answered only after the directory's fsync.
//!
//! A failure answers the writes it concerns: a file that cannot be written, synced or
//! renamed fails alone; a directory that cannot be synced fails every write renamed in the
//! group (their files may exist, complete, and a retry writes the same bytes again).
//!
//! What waits is bounded: at most [`MAX_QUEUED`] files, past which a write fails at once
//! (the attempt is then retried later, like any local failure), so a disk that stops
//! answering cannot make the queue, and the messages it holds, grow without end. A write
//! whose caller gave up (its send timed out) before its group started is not written.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

/// Most files in one group; the rest wait for the next one.
const MAX_GROUP: usize = 256;

/// Most files waiting; a write past it fails at once (see the module docs).
const MAX_QUEUED: usize = 4 * MAX_GROUP;

/// How long the thread sleeps when nothing is waiting, between checks for a stop.
const IDLE: Duration = Duration::from_millis(200);

/// One file to write and the caller waiting for the answer.
struct Job {
    name: String,
    bytes: Bytes,
    reply: oneshot::Sender<io::Result<()>>,
}

/// What the writers and the thread share.
struct Shared {
    dir: PathBuf,
    prefix: &'static str,
    suffix: &'static str,
    queue: Mutex<Vec<Job>>,
    /// Most jobs `queue` may hold.
    max_queued: usize,
    stop: AtomicBool,
}

impl Shared {
    fn new(dir: &Path, prefix: &'static str, suffix: &'static str, max_queued: usize) -> Self {
        Self {
            dir: dir.to_owned(),
            prefix,
            suffix,
            queue: Mutex::new(Vec::new()),
            max_queued,
            stop: AtomicBool::new(false),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Job>> {
        // Pushes and drains only: nothing is left half-changed by a panic.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writing thread of one outbox. Dropping it writes what is waiting and stops it.
pub(crate) struct GroupWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for GroupWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupWriter").field("dir", &self.shared.dir).finish_non_exhaustive()
    }
}

impl GroupWriter {
    /// Starts the thread writing into `dir`; temporary files are named
    /// `<prefix>…<suffix>`.
    pub(crate) fn start(dir: &Path, prefix: &'static str, suffix: &'static str) -> io::Result<Self> {
        let shared = Arc::new(Shared::new(dir, prefix, suffix, MAX_QUEUED));
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("tidings-outbox".into()).spawn(move || run(&for_thread))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// Writes `bytes` to `<dir>/<name>`, durably (see the module docs), with the next group.
    pub(crate) async fn write(&self, name: String, bytes: Bytes) -> io::Result<()> {
        let (reply, answer) = oneshot::channel();
        {
            let mut queue = self.shared.queue();
            if queue.len() >= self.shared.max_queued {
                return Err(io::Error::other(format!(
                    "{} files are already waiting to be written: the disk is not keeping up",
                    queue.len()
                )));
            }
            queue.push(Job { name, bytes, reply });
        }
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        answer.await.unwrap_or_else(|_| Err(io::Error::other("the outbox's writing thread stopped")))
    }
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // A panic in the thread was reported by the panic hook; nothing more to do here.
            let _ = thread.join();
        }
    }
}

/// Writes groups until stopped and nothing is left waiting.
fn run(shared: &Shared) {
    loop {
        let group: Vec<Job> = {
            let mut queue = shared.queue();
            let n = queue.len().min(MAX_GROUP);
            queue.drain(..n).collect()
        };
        if group.is_empty() {
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::park_timeout(IDLE);
            continue;
        }
        write_group(shared, group);
    }
}

/// The four steps of the module docs, each answering the writes that fail at it.
fn write_group(shared: &Shared, group: Vec<Job>) {
    let mut written = Vec::with_capacity(group.len());
    for job in group {
        if job.reply.is_closed() {
            // Its send gave up (timed out); the retry will write it.
            continue;
        }
        match write_temporary(shared, &job.bytes) {
            Ok(temp) => written.push((job, temp)),
            Err(error) => drop(job.reply.send(Err(error))),
        }
    }
    let mut synced = Vec::with_capacity(written.len());
    for (job, temp) in written {
        match temp.as_file().sync_all() {
            Ok(()) => synced.push((job, temp)),
            Err(error) => drop(job.reply.send(Err(error))),
        }
    }
    let mut renamed = Vec::with_capacity(synced.len());
    for (job, temp) in synced {
        match temp.persist(shared.dir.join(&job.name)) {
            Ok(_) => renamed.push(job),
            Err(error) => drop(job.reply.send(Err(error.error))),
        }
    }
    if renamed.is_empty() {
        return;
    }
    // The renames are durable only once the directory entry is.
    let synced_dir = File::open(&shared.dir).and_then(|dir| dir.sync_all());
    for job in renamed {
        let answer = match &synced_dir {
            Ok(()) => Ok(()),
            Err(error) => Err(io::Error::new(error.kind(), format!("syncing the outbox directory: {error}"))),
        };
        // The caller may have given up (a timeout): nothing to tell it.
        let _ = job.reply.send(answer);
    }
}

/// A temporary file in the outbox holding `bytes`, readable by its owner only (the `600`
/// stays through the rename), its writeback started.
fn write_temporary(shared: &Shared, bytes: &[u8]) -> io::Result<tempfile::NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(shared.prefix).suffix(shared.suffix);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let mut temp = builder.tempfile_in(&shared.dir)?;
    temp.write_all(bytes)?;
    start_writeback(temp.as_file());
    Ok(temp)
}

/// Starts writing `file`'s data to disk without waiting (see the module docs). A hint: a
/// failure changes nothing but speed, since the file is fsynced next.
fn start_writeback(file: &File) {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(dir: &Path) -> GroupWriter {
        GroupWriter::start(dir, ".t-", ".tmp").unwrap()
    }

    #[tokio::test]
    async fn a_write_past_the_queue_bound_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        // No thread: what is queued stays queued, as behind a disk that stopped answering.
        let stalled =
            Arc::new(GroupWriter { shared: Arc::new(Shared::new(dir.path(), ".t-", ".tmp", 3)), thread: None });
        let mut waiting = Vec::new();
        for i in 0..3 {
            let writer = Arc::clone(&stalled);
            waiting.push(tokio::spawn(async move { writer.write(format!("{i}.eml"), Bytes::from_static(b"x")).await }));
        }
        while stalled.shared.queue().len() < 3 {
            tokio::task::yield_now().await;
        }
        let refused =
            tokio::time::timeout(Duration::from_secs(5), stalled.write("over.eml".into(), Bytes::from_static(b"y")))
                .await
                .expect("answered at once");
        let error = refused.expect_err("the fourth write is refused");
        assert!(error.to_string().contains("not keeping up"), "{error}");
        assert_eq!(stalled.shared.queue().len(), 3, "nothing more was queued");
        for task in waiting {
            task.abort();
        }
    }

    #[test]
    fn a_group_skips_the_writes_whose_caller_gave_up() {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared::new(dir.path(), ".t-", ".tmp", 8);
        let (gone, answer) = oneshot::channel();
        drop(answer);
        let (kept, mut kept_answer) = oneshot::channel();
        let job = |name: &str, reply| Job { name: name.into(), bytes: Bytes::from_static(b"z"), reply };
        write_group(&shared, vec![job("gone.eml", gone), job("kept.eml", kept)]);
        assert!(!dir.path().join("gone.eml").exists(), "an abandoned write is not made");
        assert_eq!(std::fs::read(dir.path().join("kept.eml")).unwrap(), b"z");
        assert!(matches!(kept_answer.try_recv(), Ok(Ok(()))));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_each_get_their_file_and_leave_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Arc::new(writer(dir.path()));
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..300 {
            let writer = Arc::clone(&writer);
            writes.spawn(async move {
                let bytes = Bytes::from(format!("message {i}\r\n").repeat(i + 1));
                writer.write(format!("{i}.eml"), bytes).await
            });
        }
        while let Some(written) = writes.join_next().await {
            written.unwrap().unwrap();
        }
        for i in 0..300 {
            let found = std::fs::read(dir.path().join(format!("{i}.eml"))).unwrap();
            assert_eq!(found, format!("message {i}\r\n").repeat(i + 1).into_bytes(), "file {i}");
        }
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        assert_eq!(names.len(), 300, "only the messages: {names:?}");
    }

    #[tokio::test]
    async fn a_write_that_fails_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should go: that rename fails, the other succeeds.
        std::fs::create_dir(dir.path().join("taken.eml")).unwrap();
        std::fs::write(dir.path().join("taken.eml/inside"), b"x").unwrap();
        let writer = writer(dir.path());
        let (bad, good) = tokio::join!(
            writer.write("taken.eml".into(), Bytes::from_static(b"a")),
            writer.write("fine.eml".into(), Bytes::from_static(b"b"))
        );
        assert!(bad.is_err(), "renaming over a non-empty directory fails");
        good.unwrap();
        assert_eq!(std::fs::read(dir.path().join("fine.eml")).unwrap(), b"b");
        let leftovers = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
            .count();
        assert_eq!(leftovers, 0, "the failed write's temporary file is removed");
    }
}
