//! A real browser for the dashboard's tests: Debian's headless Chromium driven over WebDriver
//! by `chromedriver`, through the `fantoccini` client.
//!
//! Each [`Browser`] runs a `chromedriver --port=<free port>` of its own, in a process group
//! of its own with its temporary files in a directory of its own, and opens one session on
//! it (one Chromium). Dropping it kills that process group (chromedriver and the Chromium it
//! started) and removes the directory; [`Browser::close`] ends the session cleanly first.
//! Sessions share nothing (cookies, cache, storage), so two browsers are two people.
//!
//! Chromium is `/usr/bin/chromium` (`TIDINGS_CHROMIUM` overrides it), chromedriver the one on
//! `PATH` (`TIDINGS_CHROMEDRIVER` overrides it). A test first asks [`available`]: without
//! them, plain `cargo test` skips it saying what to install, and `./test` fails it
//! ([`crate::tool_available`]); [`Browser::start`] itself panics without them.
//!
//! The server's certificate is self-signed: the session accepts insecure certificates
//! (`acceptInsecureCerts`), which is what makes `https://127.0.0.1:<port>` load at all.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

pub use fantoccini;

/// How long a wait for the page (an element, a state) lasts before the test fails.
pub const WAIT: Duration = Duration::from_secs(15);
/// How long chromedriver may take to answer its first request.
const DRIVER_START: Duration = Duration::from_secs(20);

/// What to install when Chromium or chromedriver is missing.
const INSTALL: &str = "install Chromium and its WebDriver (Debian: apt-get install chromium chromium-driver)";

/// Whether Chromium and chromedriver run, for the test named `test`: when they do not, it
/// says so and returns `false` (the test returns early), or under `./test` fails
/// ([`crate::tool_available`]).
pub fn available(test: &str) -> bool {
    crate::tool_available(test, Command::new(chromium_binary()).arg("--version"), INSTALL)
        && crate::tool_available(test, Command::new(chromedriver_binary()).arg("--version"), INSTALL)
}

/// The Chromium executable.
fn chromium_binary() -> PathBuf {
    std::env::var_os("TIDINGS_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

/// The chromedriver executable.
fn chromedriver_binary() -> PathBuf {
    std::env::var_os("TIDINGS_CHROMEDRIVER").map_or_else(|| PathBuf::from("chromedriver"), PathBuf::from)
}

/// A `chromedriver` process in its own process group, killed with everything it started
/// when dropped.
#[derive(Debug)]
struct Driver {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
    // Chromium's profile and scratch files, and the log: removed after the processes that
    // write into it are gone (field order).
    _dir: tempfile::TempDir,
}

impl Driver {
    fn start() -> Self {
        let chromium = chromium_binary();
        assert!(chromium.is_file(), "{} does not exist: {INSTALL}", chromium.display());
        let dir = tempfile::Builder::new().prefix("tidings-browser").tempdir().expect("a temporary directory");
        let log = dir.path().join("chromedriver.log");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(chromedriver_binary())
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            // Chromium's profile and scratch files go with this directory.
            .env("TMPDIR", dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} ({e}): {INSTALL}", chromedriver_binary().display()));
        let mut driver = Self { child, addr, log, _dir: dir };
        let deadline = Instant::now() + DRIVER_START;
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = driver.child.try_wait() {
                panic!("chromedriver exited with {status} before listening:\n{}", driver.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen within {DRIVER_START:?}:\n{}",
                driver.log_text()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        driver
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The group is chromedriver's pid (`process_group(0)`); Chromium's processes are in it.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One headless Chromium session (see the module docs).
#[derive(Debug)]
pub struct Browser {
    client: Client,
    // Dropped after the client.
    driver: Driver,
}

impl Browser {
    /// A fresh browser whose viewport is `width` × `height` CSS pixels.
    pub async fn start(width: u32, height: u32) -> Self {
        let driver = Driver::start();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--lang=en-US",
            &format!("--window-size={width},{height}"),
        ];
        let capabilities = json!({
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": { "binary": chromium_binary(), "args": args },
        });
        let Value::Object(capabilities) = capabilities else { unreachable!("an object") };
        let client = ClientBuilder::rustls()
            .expect("rustls for the WebDriver client")
            .capabilities(capabilities)
            .connect(&format!("http://{}", driver.addr))
            .await
            .unwrap_or_else(|e| panic!("no Chromium session ({e}):\n{}\n{INSTALL}", driver.log_text()));
        let browser = Self { client, driver };
        browser.set_viewport(width, height).await;
        browser
    }

    /// The WebDriver client, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Ends the session (Chromium exits) and stops chromedriver.
    pub async fn close(self) {
        let Self { client, driver } = self;
        let _ = client.close().await;
        drop(driver);
    }

    /// Resizes the window so that the viewport (`innerWidth` × `innerHeight`) is exactly
    /// `width` × `height`.
    pub async fn set_viewport(&self, width: u32, height: u32) {
        let wanted = (i64::from(width), i64::from(height));
        let deadline = Instant::now() + WAIT;
        loop {
            let inner = self.inner_size().await;
            if inner == wanted {
                return;
            }
            assert!(Instant::now() < deadline, "the viewport is {inner:?} after asking for {wanted:?}");
            // The window is the viewport plus whatever frame it has: measured, not assumed.
            let (outer_w, outer_h) = self.client.get_window_size().await.expect("the window size");
            let outer = (outer_w as i64 + wanted.0 - inner.0, outer_h as i64 + wanted.1 - inner.1);
            let outer = (u32::try_from(outer.0).unwrap_or(width), u32::try_from(outer.1).unwrap_or(height));
            self.client.set_window_size(outer.0, outer.1).await.expect("set the window size");
            // A resize reaches the page a little later (more so on a busy machine).
            for _ in 0..20 {
                if self.inner_size().await != inner {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The viewport's size in CSS pixels (`innerWidth`, `innerHeight`).
    async fn inner_size(&self) -> (i64, i64) {
        let inner = self.execute("return [window.innerWidth, window.innerHeight];", vec![]).await;
        (inner[0].as_i64().unwrap_or(0), inner[1].as_i64().unwrap_or(0))
    }

    /// Navigates to `url` and waits for the load.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("navigate to {url}: {e}"));
    }

    /// The current URL.
    pub async fn url(&self) -> reqwest::Url {
        self.client.current_url().await.expect("the current URL")
    }

    /// The current URL's path.
    pub async fn path(&self) -> String {
        self.url().await.path().to_owned()
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; its result.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap_or_else(|e| panic!("script failed ({e}): {script}"))
    }

    /// Runs `script` asynchronously: it calls `arguments[arguments.length - 1]` with its result.
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute_async(script, args).await.unwrap_or_else(|e| panic!("script failed ({e}): {script}"))
    }

    /// The element matching `css`, if there is one now.
    pub async fn try_find(&self, css: &str) -> Option<Element> {
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => Some(element),
            Err(e) if e.is_no_such_element() => None,
            Err(e) => panic!("find {css}: {e}"),
        }
    }

    /// The element matching `css`; fails the test (with the page's URL and text) if there is
    /// none now.
    pub async fn find(&self, css: &str) -> Element {
        match self.try_find(css).await {
            Some(element) => element,
            None => panic!("no `{css}` on {}:\n{}", self.url().await, self.page_text().await),
        }
    }

    /// Every element matching `css`.
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        self.client.find_all(Locator::Css(css)).await.unwrap_or_else(|e| panic!("find all {css}: {e}"))
    }

    /// Waits up to [`WAIT`] for an element matching `css`.
    pub async fn wait_for(&self, css: &str) -> Element {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(element) = self.try_find(css).await {
                return element;
            }
            if Instant::now() >= deadline {
                panic!("no `{css}` within {WAIT:?} on {}:\n{}", self.url().await, self.page_text().await);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Reloads the page until an element matching `css` is on it, up to [`WAIT`]: for
    /// server-rendered pages that show a state reached in the background.
    pub async fn reload_until(&self, css: &str) -> Element {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(element) = self.try_find(css).await {
                return element;
            }
            if Instant::now() >= deadline {
                panic!("no `{css}` within {WAIT:?} on {}:\n{}", self.url().await, self.page_text().await);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            self.client.refresh().await.expect("reload");
        }
    }

    /// Scrolls the element matching `css` into view (which also starts loading a lazy
    /// iframe or image); the element.
    pub async fn scroll_to(&self, css: &str) -> Element {
        let element = self.find(css).await;
        let reference = serde_json::to_value(&element).expect("an element reference");
        self.execute("arguments[0].scrollIntoView({block: 'center'});", vec![reference]).await;
        element
    }

    /// Scrolls the iframe matching `css` into view, waits until its document has loaded
    /// something other than `about:blank`, and makes it the context of what follows
    /// (until [`Self::leave_frame`]).
    pub async fn enter_frame(&self, css: &str) {
        let frame = self.scroll_to(css).await;
        frame.enter_frame().await.unwrap_or_else(|e| panic!("enter {css}: {e}"));
        let deadline = Instant::now() + WAIT;
        loop {
            let state = self.execute("return [location.href, document.readyState];", vec![]).await;
            if state[0] != "about:blank" && state[1] == "complete" {
                return;
            }
            assert!(Instant::now() < deadline, "{css} did not load within {WAIT:?}: {state}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Back from a frame to the page.
    pub async fn leave_frame(&self) {
        self.client.enter_parent_frame().await.expect("back to the page");
    }

    /// The visible text of the page's body.
    pub async fn page_text(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(e) => format!("(no body: {e})"),
        }
    }

    /// Clears the field matching `css` and types `text` into it.
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.unwrap_or_else(|e| panic!("clear {css}: {e}"));
        if !text.is_empty() {
            field.send_keys(text).await.unwrap_or_else(|e| panic!("type into {css}: {e}"));
        }
    }

    /// Sets the value of the field matching `css` without typing (long or multi-line text).
    pub async fn set_value(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        let script = "arguments[0].value = arguments[1];";
        let element = serde_json::to_value(&field).expect("an element reference");
        self.execute(script, vec![element, json!(text)]).await;
    }

    /// Clicks the element matching `css` (no waiting for a page it may load).
    pub async fn click(&self, css: &str) {
        let element = self.find(css).await;
        element.click().await.unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Clicks the element matching `css`, which loads another page (a link, a submit
    /// button), and waits until that page has loaded.
    pub async fn click_to_navigate(&self, css: &str) {
        let element = self.find(css).await;
        self.navigating(async { element.click().await.unwrap_or_else(|e| panic!("click {css}: {e}")) }).await;
    }

    /// Runs `action`, which loads another page, and waits until that page has loaded: the
    /// current document is marked first, and a document without the mark that has finished
    /// loading is the new one.
    pub async fn navigating<T>(&self, action: impl std::future::Future<Output = T>) -> T {
        self.execute("window.__tidingsOldPage = true;", vec![]).await;
        let result = action.await;
        self.wait_for_new_page().await;
        result
    }

    /// Waits until the document marked by [`Self::navigating`] is replaced by one that has
    /// finished loading.
    async fn wait_for_new_page(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            // While the navigation runs, scripts may fail; that is waiting too.
            if let Ok(state) =
                self.client.execute("return [!!window.__tidingsOldPage, document.readyState];", vec![]).await
                && state == json!([false, "complete"])
            {
                return;
            }
            assert!(Instant::now() < deadline, "no new page within {WAIT:?} (still {})", self.url().await);
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Clicks the element matching `css`, accepts the confirmation dialog that asks first
    /// (`window.confirm`), and waits until the page it then loads has loaded.
    pub async fn click_and_confirm(&self, css: &str) {
        let element = self.find(css).await;
        self.execute("window.__tidingsOldPage = true;", vec![]).await;
        element.click().await.unwrap_or_else(|e| panic!("click {css}: {e}"));
        let deadline = Instant::now() + WAIT;
        while self.client.get_alert_text().await.is_err() {
            assert!(Instant::now() < deadline, "clicking {css} asked nothing within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.client.accept_alert().await.expect("accept the confirmation");
        self.wait_for_new_page().await;
    }

    /// The HTTP status of the response that loaded the current page (Navigation Timing).
    pub async fn response_status(&self) -> u16 {
        let script = "const n = performance.getEntriesByType('navigation')[0]; return n ? n.responseStatus : 0;";
        let status = self.execute(script, vec![]).await;
        status.as_u64().and_then(|s| u16::try_from(s).ok()).unwrap_or_else(|| panic!("no response status: {status}"))
    }

    /// Presses a key (see [`fantoccini::key::Key`]) on whatever has the focus (the body
    /// when nothing has), as typing does.
    pub async fn press(&self, key: fantoccini::key::Key) {
        let focused = self.client.active_element().await.expect("the focused element");
        focused.send_keys(&char::from(key).to_string()).await.expect("press a key");
    }

    /// The focused element, described as `a[href="…"]` for a link, else `tag#id`, else
    /// `tag[name=…]`, else `tag:text`; `body` when nothing has the focus.
    pub async fn focused(&self) -> String {
        let script = "const e = document.activeElement; if (!e || e === document.body) return 'body';
            if (e.tagName === 'A' && e.getAttribute('href')) return 'a[href=\"' + e.getAttribute('href') + '\"]';
            if (e.id) return e.tagName.toLowerCase() + '#' + e.id;
            if (e.name) return e.tagName.toLowerCase() + '[name=' + e.name + ']';
            return e.tagName.toLowerCase() + ':' + (e.textContent || '').trim();";
        self.execute(script, vec![]).await.as_str().unwrap_or_default().to_owned()
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        self.client.screenshot().await.expect("a screenshot")
    }
}
