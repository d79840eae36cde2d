//! `idem demo --console` (issue 17): after the demo's check, its gateway keeps serving with the
//! console on; the printed URL and token sign in, and the overview shows the demo's events;
//! Ctrl-C (SIGINT) stops it, exit 0.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reqwest::redirect::Policy;

use crate::support::IDEM;

/// The value after `marker` in `html`, up to the next `"`.
fn after<'a>(html: &'a str, marker: &str) -> &'a str {
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in {html}"))
        + marker.len();
    &html[start..start + html[start..].find('"').unwrap()]
}

/// The `name=value` of cookie `name` among an answer's `Set-Cookie` headers.
fn cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no cookie {name}"))
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// Kills the demo if the test fails before it stopped it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_console_keeps_the_gateway_running_with_its_url_and_token() {
    let mut demo = Running(
        Command::new(IDEM)
            .args(["demo", "--console"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = demo.0.stdout.take().unwrap();
    let (lines, printed) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let (mut url, mut token) = (None, None);
    while token.is_none() {
        let line = printed
            .recv_timeout(Duration::from_secs(60))
            .expect("idem demo --console prints the console's URL and a token");
        if let Some(at) = line.trim().strip_prefix("http://") {
            url = Some(format!("http://{at}"));
        }
        if let Some(rest) = line.trim().strip_prefix("token: ") {
            token = rest.split_whitespace().next().map(str::to_owned);
        }
        assert!(!line.starts_with("FAIL"), "{line}");
    }
    let (url, token) = (url.expect("the URL before the token"), token.unwrap());
    assert!(url.ends_with("/console"), "{url}");
    assert_eq!(token.len(), 32, "{token}");
    let base = url.trim_end_matches("/console");

    let client = idem_testkit::http_client_builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let unsigned = client.get(&url).send().await.unwrap();
    assert_eq!(unsigned.status(), 303);
    let form = client
        .get(format!("{base}/console/sign-in"))
        .send()
        .await
        .unwrap();
    let sign_in_cookie = cookie(&form, "idem_console_sign_in");
    let html = form.text().await.unwrap();
    let csrf = after(&html, "name=\"csrf\" value=\"").to_owned();
    let signed_in = client
        .post(format!("{base}/console/sign-in"))
        .header("cookie", sign_in_cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let session = cookie(&signed_in, "idem_console");
    let overview = client
        .get(&url)
        .header("cookie", session)
        .send()
        .await
        .unwrap();
    assert_eq!(overview.status(), 200);
    let html = overview.text().await.unwrap();
    // The demo's 159 Stripe events, accepted.
    assert!(
        html.contains(
            "data-name=\"stripe\"><h3>source <code>stripe</code></h3>"
        ) && html.contains("<tr data-metric=\"accepted\"><th scope=\"row\">accepted</th><td class=\"num last-hour\">159</td>"),
        "{html}"
    );

    let sent = Command::new("kill")
        .args(["-INT", &demo.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = demo.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running after SIGINT"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
    assert!(client.get(&url).send().await.is_err(), "stopped serving");
}
