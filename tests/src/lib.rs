//! End-to-end harness: runs the real `tidings-server` binary on a free loopback port with a
//! temporary data dir and talks HTTPS to it with reqwest, trusting exactly the certificate
//! the server generated in that data dir.
//!
//! # Finding the binary
//! Cargo only tells a package's own tests where its binaries are (`CARGO_BIN_EXE_*`), and
//! `tidings-server` is another package. Cargo puts every binary of a build in the profile
//! directory (`target/debug/`) and test executables in its `deps/` subdirectory, so the
//! harness looks next to its own executable's parent: `current_exe()/../../tidings-server`.
//! `cargo test --workspace` (or `-p tidings-e2e -p tidings-server`) builds that binary before
//! running any test, because `tidings-server` has integration tests of its own. Running
//! `-p tidings-e2e` alone uses the binary the last build left, and fails with advice if there
//! is none or a source file that went into it (as Cargo's dep-info file `tidings-server.d`
//! lists them), or a manifest of the server's crates, is newer than it (building it from inside
//! a test would work, but with other feature flags than the workspace build: a second full
//! compile). `TIDINGS_SERVER_BIN` overrides the path and skips that check.
//!
//! Server logs are kept and shown when a start fails; `TEST_LOG=1` echoes them live.
//!
//! # The store
//! Servers run on sled in their data dir, or with `TIDINGS_E2E_STORE=postgres` each on a
//! fresh PostgreSQL database of its [`DataDir`], made through `TIDINGS_TEST_DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`) and dropped with the data dir.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use reqwest::{Method, Response};
use serde_json::Value;

/// The `TIDINGS_SECRET_KEY` of servers started on a database the test names itself (nodes
/// sharing one database): base64 of 32 bytes of 0x2a.
pub const SHARED_SECRET_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// How long a server may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// The `tidings-server` executable (see the crate docs).
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TIDINGS_SERVER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("test executables live in target/<profile>/deps");
    let path = profile_dir.join(format!("tidings-server{}", std::env::consts::EXE_SUFFIX));
    let advice = "run `cargo test --workspace` or `cargo test -p tidings-e2e -p tidings-server`, \
                  or `cargo build -p tidings-server` first (or set TIDINGS_SERVER_BIN)";
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} does not exist: {advice}", path.display()));
    // Testing an old binary would pass or fail for the wrong reasons.
    if let Some(newer) = newer_source(&path, built) {
        panic!("{} is older than {}: {advice}", path.display(), newer.display());
    }
    path
}

/// A source file of the binary at `binary` changed after `built`, if any. The sources are
/// those Cargo's dep-info file beside the binary (`tidings-server.d`) lists: exactly what
/// went into it, so a file outside the build (a `testing` module, a crate's own tests) is
/// no reason to rebuild, and every crate linked in counts. Without that file, every source
/// file of the server's crates counts. The manifests count either way (features, deps).
fn newer_source(binary: &Path, built: std::time::SystemTime) -> Option<PathBuf> {
    fn walk(dir: &Path, built: std::time::SystemTime) -> Option<PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if let Some(found) = walk(&path, built) {
                    return Some(found);
                }
            } else if path.extension().is_some_and(|e| e == "rs" || e == "toml")
                && entry.metadata().and_then(|m| m.modified()).is_ok_and(|m| m > built)
            {
                return Some(path);
            }
        }
        None
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let newer =
        |path: PathBuf| std::fs::metadata(&path).and_then(|m| m.modified()).is_ok_and(|m| m > built).then_some(path);
    const CRATES: [&str; 7] = [
        "examples/server",
        "http-adapter",
        "core",
        "storage-sled",
        "storage-postgres",
        "dns-hickory",
        "transport-smtp",
    ];
    if let Some(manifest) = CRATES.iter().find_map(|name| newer(root.join(name).join("Cargo.toml"))) {
        return Some(manifest);
    }
    match std::fs::read_to_string(binary.with_extension("d")) {
        Ok(dep_info) => dep_info_sources(&dep_info).into_iter().find_map(newer),
        // Only what goes into the binary: a crate's own tests/ do not.
        Err(_) => CRATES.iter().find_map(|name| walk(&root.join(name).join("src"), built)),
    }
}

/// The prerequisites of a Makefile-style dep-info file (`target: a.rs b.rs`, spaces in
/// names escaped as `\ `).
fn dep_info_sources(dep_info: &str) -> Vec<PathBuf> {
    let Some(first) = dep_info.lines().next() else { return Vec::new() };
    // The target is an absolute path, so the separator is the first ": ".
    let Some((_, sources)) = first.split_once(": ") else { return Vec::new() };
    let mut paths = Vec::new();
    let mut current = String::new();
    let mut chars = sources.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            ' ' => {
                if !current.is_empty() {
                    paths.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        paths.push(PathBuf::from(current));
    }
    paths
}

/// Whether the outside program a test needs runs: `probe` (a harmless invocation, e.g. a
/// version query) exits 0. When it does not, under `TIDINGS_TEST_REQUIRE_ALL=1` (which
/// `./test` sets) this panics saying what to install; otherwise it prints
/// `skipped: <test>: …` to stderr and returns `false`, and the test returns early. So plain
/// `cargo test` on a machine without the tool says what it skipped instead of failing, and the
/// full run never skips silently.
pub fn tool_available(test: &str, probe: &mut Command, install: &str) -> bool {
    let runs = probe.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if runs {
        return true;
    }
    let program = probe.get_program().to_string_lossy().into_owned();
    if std::env::var_os("TIDINGS_TEST_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("{test}: `{program}` is missing or broken: {install} (./test installs it)");
    }
    eprintln!("skipped: {test}: `{program}` is missing or broken: {install} (./test installs it)");
    false
}

/// A well-formed API key that no other test uses: `tid_` and 40 base62 characters.
pub fn fresh_key() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut seed = nanos ^ (u128::from(std::process::id()) << 64) ^ u128::from(COUNTER.fetch_add(1, Ordering::Relaxed));
    let mut key = String::from("tid_");
    for _ in 0..40 {
        // A xorshift-style scramble is plenty: these keys only need to differ.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        key.push(char::from(BASE62[(seed % 62) as usize]));
    }
    key
}

/// The store the harness runs servers on, from `TIDINGS_E2E_STORE`: `sled` (unset) or
/// `postgres`. Any other value is a mistake and panics.
pub fn on_postgres() -> bool {
    match std::env::var("TIDINGS_E2E_STORE").as_deref() {
        Err(_) | Ok("" | "sled") => false,
        Ok("postgres") => true,
        Ok(other) => panic!("TIDINGS_E2E_STORE={other}: expected `sled` or `postgres`"),
    }
}

/// `true`, after printing `skipped on PostgreSQL: {reason}`, when the suite runs on
/// PostgreSQL; for tests (or parts of tests) about sled only.
pub fn skip_on_postgres(reason: &str) -> bool {
    let skip = on_postgres();
    if skip {
        println!("skipped on PostgreSQL: {reason}");
    }
    skip
}

/// The server the scratch databases are made on, unless `TIDINGS_TEST_DATABASE_URL` says.
const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database of its own on a PostgreSQL server, `<prefix>_<random>`, dropped (best effort,
/// `WITH (FORCE)`) when this value is: the database of a [`DataDir`] with
/// `TIDINGS_E2E_STORE=postgres`, or one a benchmark makes through an admin URL it was given.
#[derive(Debug)]
pub struct ScratchDatabase {
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// A fresh database; panics when PostgreSQL does not answer (it was asked for).
    fn create() -> Self {
        let admin_url = std::env::var("TIDINGS_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_owned());
        Self::create_on(&admin_url, "tidings_e2e").unwrap_or_else(|e| {
            panic!(
                "TIDINGS_E2E_STORE=postgres, but no database could be made through {admin_url} \
                 (TIDINGS_TEST_DATABASE_URL): {e}"
            )
        })
    }

    /// A fresh database `<prefix>_<random>` made through `admin_url` (a URL of any database
    /// on the server, as a role that may create databases).
    pub fn create_on(admin_url: &str, prefix: &str) -> Result<Self, String> {
        let name = format!("{prefix}_{}", fresh_key()[4..16].to_ascii_lowercase());
        admin_sql(admin_url, format!("CREATE DATABASE \"{name}\""))?;
        Ok(Self { admin_url: admin_url.to_owned(), name })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its URL: the admin URL with the database name swapped.
    pub fn url(&self) -> String {
        let base = self.admin_url.split('?').next().unwrap_or(&self.admin_url);
        let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
        format!("{server}/{}", self.name)
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        if let Err(e) = admin_sql(&self.admin_url, sql) {
            eprintln!("could not drop the scratch database {}: {e}", self.name);
        }
    }
}

/// Runs `sql` on `admin_url` on a thread with a runtime of its own, so that it can be called
/// from anywhere, inside a test's runtime too (which cannot be blocked on), and waits for it.
fn admin_sql(admin_url: &str, sql: String) -> Result<(), String> {
    let admin_url = admin_url.to_owned();
    let run = move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async {
            let connecting = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls);
            let (client, connection) =
                tokio::time::timeout(Duration::from_secs(5), connecting).await.map_err(|_| "timed out")??;
            let driver = tokio::spawn(connection);
            client.batch_execute(&sql).await?;
            drop(client);
            let _ = driver.await;
            Ok(())
        })
    };
    match std::thread::spawn(run).join() {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err("the thread running it panicked".to_owned()),
    }
}

/// A data directory that outlives one server process, for restart tests. With
/// `TIDINGS_E2E_STORE=postgres` it also stands for a database of its own, made when a server
/// or an operator command first needs it and dropped with the last clone: every server
/// started on it, and every [`DataDir::run_cli`], uses that database.
#[derive(Debug, Clone)]
pub struct DataDir(Arc<DataDirInner>);

#[derive(Debug)]
struct DataDirInner {
    // Dropped before the directory (field order), though neither needs the other.
    database: OnceLock<Option<ScratchDatabase>>,
    dir: tempfile::TempDir,
}

impl DataDir {
    /// A fresh, empty one.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        Self(Arc::new(DataDirInner { database: OnceLock::new(), dir }))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.dir.path()
    }

    /// With `TIDINGS_E2E_STORE=postgres`, the URL of this data dir's database (made now if
    /// it is not yet); `None` on sled.
    pub fn database_url(&self) -> Option<String> {
        self.0.database.get_or_init(|| on_postgres().then(ScratchDatabase::create)).as_ref().map(ScratchDatabase::url)
    }

    /// Runs `tidings-server ARGS…` (an operator subcommand) on this data dir to completion,
    /// on its database with `TIDINGS_E2E_STORE=postgres`.
    pub fn run_cli(&self, args: &[&str]) -> Output {
        let mut command = Command::new(server_binary());
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TIDINGS_DATA_DIR", self.path());
        if let Some(url) = self.database_url() {
            command.env("TIDINGS_DATABASE_URL", url);
        }
        command.output().expect("run tidings-server")
    }

    /// Runs `workspace create NAME` on this data dir (no server may be running on it);
    /// returns the new workspace's id and its first `full` key.
    pub fn create_workspace(&self, name: &str) -> (String, String) {
        let output = self.run_cli(&["workspace", "create", name]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "workspace create failed: {}", String::from_utf8_lossy(&output.stderr));
        let line = |prefix: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(str::to_owned)
                .unwrap_or_else(|| panic!("no `{prefix}` line in the output of workspace create: {stdout}"))
        };
        (line("workspace: "), line("key: "))
    }
}

impl Default for DataDir {
    fn default() -> Self {
        Self::new()
    }
}

/// How to start a server.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The data dir to use; a fresh one when `None`.
    pub data_dir: Option<DataDir>,
    /// `TIDINGS_BOOTSTRAP_KEY`; `None` lets the server generate one.
    pub bootstrap_key: Option<String>,
    /// More `TIDINGS_*` variables.
    pub env: Vec<(String, String)>,
    /// The executable to run; [`server_binary`] when `None`.
    pub binary: Option<PathBuf>,
    /// Start the SMTP submission listeners on free loopback ports, with STARTTLS
    /// (`TIDINGS_SUBMISSION_LISTEN`, [`TestServer::submission_addr`]) and with implicit TLS
    /// (`TIDINGS_SUBMISSION_TLS_LISTEN`, [`TestServer::submission_tls_addr`]).
    pub submission: bool,
}

/// A running `tidings-server`; killed when dropped.
#[derive(Debug)]
pub struct TestServer {
    child: Child,
    data_dir: DataDir,
    addr: SocketAddr,
    submission_addr: Option<SocketAddr>,
    submission_tls_addr: Option<SocketAddr>,
    key: Option<String>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    client: reqwest::Client,
}

impl TestServer {
    /// A server on a fresh data dir with a configured bootstrap key.
    pub async fn start() -> Self {
        Self::start_with(Options { bootstrap_key: Some(fresh_key()), ..Options::default() }).await
    }

    /// A server started with `options`. Panics with the server's output if it does not
    /// print its listening line in time.
    pub async fn start_with(options: Options) -> Self {
        let data_dir = options.data_dir.unwrap_or_default();
        let mut command = Command::new(options.binary.clone().unwrap_or_else(server_binary));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TIDINGS_DATA_DIR", data_dir.path())
            .env("TIDINGS_LISTEN", "127.0.0.1:0")
            // Domain checks in these tests never reach a resolver; a fixed one keeps start-up
            // independent of the machine's resolv.conf.
            .env("TIDINGS_DNS_SERVER", "127.0.0.1:53")
            .env("TIDINGS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(key) = &options.bootstrap_key {
            command.env("TIDINGS_BOOTSTRAP_KEY", key);
        }
        // A test that names its own database (tests/postgres.rs) keeps it.
        let names = |var: &str| options.env.iter().any(|(name, _)| name == var);
        if !names("TIDINGS_DATABASE_URL")
            && let Some(url) = data_dir.database_url()
        {
            command.env("TIDINGS_DATABASE_URL", url);
        }
        // Nodes with data dirs of their own on one database need one sealing key, as in
        // production; a data dir with its own database keeps the key file it generates.
        if names("TIDINGS_DATABASE_URL") && !names("TIDINGS_SECRET_KEY") && !names("TIDINGS_SECRET_KEY_FILE") {
            command.env("TIDINGS_SECRET_KEY", SHARED_SECRET_KEY);
        }
        if options.submission {
            command.env("TIDINGS_SUBMISSION_LISTEN", "127.0.0.1:0");
            command.env("TIDINGS_SUBMISSION_TLS_LISTEN", "127.0.0.1:0");
        }
        for (name, value) in &options.env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("start tidings-server");
        let (tx, rx) = mpsc::channel();
        let stdout = collect_lines(child.stdout.take().expect("piped stdout"), None);
        let stderr = collect_lines(child.stderr.take().expect("piped stderr"), Some(tx));

        let deadline = Instant::now() + START_TIMEOUT;
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("listening on https://") {
                        break addr.trim().parse::<SocketAddr>().expect("a socket address after `listening on`");
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if let Ok(Some(status)) = child.try_wait() {
                // Let the reader threads drain what the process printed before it died.
                std::thread::sleep(Duration::from_millis(100));
                panic!("tidings-server exited with {status} before listening:\n{}", stderr.lock().unwrap().join("\n"));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                panic!(
                    "tidings-server did not listen within {START_TIMEOUT:?}:\n{}",
                    stderr.lock().unwrap().join("\n")
                );
            }
        };
        let client = https_client(&data_dir.path().join("tls/cert.pem"));
        // The generated key is printed before the listening line, so it is there by now
        // unless the stdout reader thread has not caught up; wait briefly for it.
        let key = match options.bootstrap_key {
            Some(key) => Some(key),
            None => wait_for(&stdout, Duration::from_secs(2), |l| l.strip_prefix("bootstrap key: ").map(str::to_owned)),
        };
        // The SMTP listeners bind after the HTTPS one; their lines follow it.
        let listening = |prefix: &str| {
            wait_for(&stderr, Duration::from_secs(5), |l| {
                l.strip_prefix(prefix).map(|a| a.trim().parse::<SocketAddr>().expect("a socket address"))
            })
            .unwrap_or_else(|| panic!("no `{prefix}` line:\n{}", stderr.lock().unwrap().join("\n")))
        };
        let submission_addr = options.submission.then(|| listening("SMTP submission listening on "));
        let submission_tls_addr = options.submission.then(|| listening("SMTP submission (implicit TLS) listening on "));
        Self { child, data_dir, addr, submission_addr, submission_tls_addr, key, stdout, stderr, client }
    }

    /// The full key of the default workspace: the configured or the printed bootstrap key.
    pub fn key(&self) -> &str {
        self.key.as_deref().expect("no bootstrap key was configured or printed")
    }

    /// The process id (for benchmarks that watch its memory or CPU).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The SMTP submission listener's address; panics unless [`Options::submission`] was set.
    pub fn submission_addr(&self) -> SocketAddr {
        self.submission_addr.expect("the server was started without Options::submission")
    }

    /// The implicit-TLS submission listener's address; panics unless [`Options::submission`]
    /// was set.
    pub fn submission_tls_addr(&self) -> SocketAddr {
        self.submission_tls_addr.expect("the server was started without Options::submission")
    }

    /// The TLS certificate the server presents (generated on first start), PEM.
    pub fn cert_path(&self) -> PathBuf {
        self.data_dir.path().join("tls/cert.pem")
    }

    /// The data dir.
    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    /// Everything the server printed on stdout so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Everything the server printed on stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits up to 5 s for a stderr line containing every one of `needles`; the line if seen.
    pub fn wait_for_log(&self, needles: &[&str]) -> Option<String> {
        wait_for(&self.stderr, Duration::from_secs(5), |l| needles.iter().all(|n| l.contains(n)).then(|| l.to_owned()))
    }

    /// `https://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// A request to `path` authenticated with `key`, with an optional JSON body.
    pub async fn call(&self, method: Method, path: &str, key: &str, body: Option<Value>) -> Response {
        let mut request = self.client.request(method, self.url(path)).bearer_auth(key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.expect("an HTTPS response")
    }

    /// `POST /v1/messages` with the bootstrap key and an Idempotency-Key: status, the
    /// `Idempotent-Replayed` header, and the envelope.
    pub async fn send_with_key(&self, body: &Value, idempotency_key: &str) -> (u16, Option<String>, Value) {
        self.post_idempotent("/v1/messages", self.key(), body, idempotency_key).await
    }

    /// `POST path` with `key`, `body` and an Idempotency-Key: the status, the
    /// `Idempotent-Replayed` header, and the envelope.
    pub async fn post_idempotent(
        &self,
        path: &str,
        key: &str,
        body: &Value,
        idempotency_key: &str,
    ) -> (u16, Option<String>, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(key)
            .header("idempotency-key", idempotency_key)
            .json(body)
            .send()
            .await
            .expect("an HTTPS response");
        let replayed = response.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (status, body) = into_parts(response).await;
        (status, replayed, body)
    }

    /// `GET path` with `key`: status and envelope.
    pub async fn get(&self, path: &str, key: &str) -> (u16, Value) {
        into_parts(self.call(Method::GET, path, key, None).await).await
    }

    /// `POST path` with `key` and `body`: status and envelope.
    pub async fn post(&self, path: &str, key: &str, body: Value) -> (u16, Value) {
        into_parts(self.call(Method::POST, path, key, Some(body)).await).await
    }

    /// `DELETE path` with `key`: status and envelope.
    pub async fn delete(&self, path: &str, key: &str) -> (u16, Value) {
        into_parts(self.call(Method::DELETE, path, key, None).await).await
    }

    /// `PATCH path` with `key` and `body`: status and envelope.
    pub async fn patch(&self, path: &str, key: &str, body: Value) -> (u16, Value) {
        into_parts(self.call(Method::PATCH, path, key, Some(body)).await).await
    }

    /// An unauthenticated request to `path` on this server's HTTPS client, for tests that
    /// set headers and bodies themselves (other content types, raw bytes, `X-Api-Key`).
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// A new HTTPS client for this server whose connections leave from `local` (any of
    /// 127.0.0.0/8 on Linux): the server sees another client address, as its per-address
    /// limits (the failed-auth throttle) do. Requests need absolute URLs ([`Self::url`]).
    pub fn client_from(&self, local: std::net::IpAddr) -> reqwest::Client {
        https_client_from(&self.data_dir.path().join("tls/cert.pem"), Some(local))
    }

    /// Sends SIGTERM and waits for the process to exit; returns its status and the data dir
    /// (to start another server on it). Async so that this test's client keeps running while
    /// the server closes its connections (an HTTP/2 close is a conversation).
    pub async fn stop(self) -> (ExitStatus, DataDir) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        self.exited(STOP_TIMEOUT)
            .await
            .unwrap_or_else(|| panic!("tidings-server did not exit within {STOP_TIMEOUT:?} of SIGTERM"))
    }

    /// Waits up to `timeout` for the process to exit by itself; its status and the data dir,
    /// or `None` (and the server is killed when dropped) if it is still running.
    pub async fn exited(mut self, timeout: Duration) -> Option<(ExitStatus, DataDir)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for tidings-server") {
                return Some((status, self.data_dir.clone()));
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the process with SIGKILL, a crash: no shutdown, no flush, in-flight work cut
    /// off. Waits until it is gone; returns the data dir (to start another server on it).
    pub fn kill(mut self) -> DataDir {
        // `Child::kill` is SIGKILL on Unix.
        self.child.kill().expect("kill tidings-server");
        self.child.wait().expect("wait for the killed tidings-server");
        self.data_dir.clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Already exited after `stop`; otherwise the test is over and the server goes.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that trusts only the certificate in `cert_pem` (the server's own).
fn https_client(cert_pem: &Path) -> reqwest::Client {
    https_client_from(cert_pem, None)
}

/// [`https_client`] whose connections leave from `local` when given.
fn https_client_from(cert_pem: &Path, local: Option<std::net::IpAddr>) -> reqwest::Client {
    let pem = std::fs::read(cert_pem).expect("the server's generated certificate");
    let cert = reqwest::Certificate::from_pem(&pem).expect("a PEM certificate");
    reqwest::Client::builder()
        .local_address(local)
        .tls_certs_only([cert])
        .timeout(Duration::from_secs(20))
        // Tracking links answer 302 to sites the tests must not visit: redirects are read, not followed.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTPS client")
}

/// Status and JSON body of a response.
pub async fn into_parts(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("a response body");
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, body)
}

/// Reads `stream` line by line on a thread into the returned list, forwarding each line to
/// `tx` and, with `TEST_LOG=1`, echoing it.
fn collect_lines(
    stream: impl std::io::Read + Send + 'static,
    tx: Option<mpsc::Sender<String>>,
) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let echo = std::env::var_os("TEST_LOG").is_some_and(|v| v == "1");
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if echo {
                eprintln!("[tidings-server] {line}");
            }
            if let Some(tx) = &tx {
                let _ = tx.send(line.clone());
            }
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

/// Polls `lines` until `find` matches one or `timeout` passes.
fn wait_for<T>(lines: &Mutex<Vec<String>>, timeout: Duration, find: impl Fn(&str) -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = lines.lock().unwrap().iter().find_map(|l| find(l)) {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
