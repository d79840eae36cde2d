//! Headless Chromium driven through WebDriver (Debian's `chromium` and `chromium-driver`,
//! fantoccini as the client), one browser at a time: each test starts its own chromedriver
//! and a browser with a new empty profile, and saves a screenshot of what it checked under
//! `target/tmp/console-screenshots/`. Without Chromium the tests fail, saying how to install
//! it: they never pass without having run.

mod health;
mod scenarios;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::sync::{Mutex, MutexGuard};

/// One browser at a time: the machine has two cores, and a test's timing must not depend on
/// another test's browser.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// The flags Chromium runs with here: headless, no sandbox (the tests run as root), and
/// nothing that reaches the network on its own.
const FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
];

/// Where Chromium and chromedriver are: `IDEM_CHROMIUM` and `IDEM_CHROMEDRIVER`, else
/// Debian's paths.
fn programs() -> (PathBuf, PathBuf) {
    let path = |var: &str, default: &str| {
        std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
    };
    let chromium = path("IDEM_CHROMIUM", "/usr/bin/chromium");
    let driver = path("IDEM_CHROMEDRIVER", "/usr/bin/chromedriver");
    for program in [&chromium, &driver] {
        assert!(
            program.exists(),
            "the console's browser tests need headless Chromium and chromedriver, and {} is \
             missing: install them with `apt-get install -y chromium chromium-driver` (Debian; \
             scripts/services does), or set IDEM_CHROMIUM and IDEM_CHROMEDRIVER to where they are",
            program.display()
        );
    }
    (chromium, driver)
}

/// Where the screenshots go.
pub(crate) fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
}

/// A browser session, with its chromedriver.
pub(crate) struct Browser {
    pub client: Client,
    driver: Child,
    name: &'static str,
    _profile: tempfile::TempDir,
    _turn: MutexGuard<'static, ()>,
}

/// `GET /session/{id}/se/log` of chromedriver: the browser's console messages since the last
/// call.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

impl Browser {
    /// Starts chromedriver and a headless Chromium for test `name`.
    pub(crate) async fn start(name: &'static str) -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let (chromium, driver_path) = programs();
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver_path.display()));
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object")
        };
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let mut builder = ClientBuilder::new(HttpConnector::new());
            builder.capabilities(capabilities.clone());
            match builder.connect(&url).await {
                Ok(client) => break client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("chromedriver at {url} did not start a browser: {e}"),
            }
        };
        Self {
            client,
            driver,
            name,
            _profile: profile,
            _turn: turn,
        }
    }

    /// Opens `url`.
    pub(crate) async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// The element `css` selects, waiting up to 10 s for it.
    pub(crate) async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
    }

    /// The text of the element `css` selects.
    pub(crate) async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    /// Clicks the element `css` selects.
    pub(crate) async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    /// The page's title, checked to be the console's `heading` page.
    pub(crate) async fn expect_title(&self, heading: &str) {
        let title = self.client.title().await.unwrap();
        assert_eq!(title, format!("{heading} · idem console"));
        assert_eq!(self.text("main h1").await, heading);
    }

    /// The path of the page shown.
    pub(crate) async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// Severe messages in the browser's console since the last call (a failed load, a
    /// refused style, an error).
    pub(crate) async fn console_errors(&self) -> Vec<String> {
        let log = self.client.issue_cmd(BrowserLog).await.unwrap();
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Saves a screenshot of the page as `{name}{suffix}.png`; returns where.
    pub(crate) async fn screenshot(&self, suffix: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}{suffix}.png", self.name));
        std::fs::write(&path, png).unwrap();
        println!("screenshot: {}", path.display());
        path
    }

    /// Ends the session and chromedriver.
    pub(crate) async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that failed before `close`: chromedriver must not outlive it.
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
