//! A console client over plain HTTP: it keeps the cookies the console sets and reads the CSRF
//! tokens from its forms, as a browser would.

use std::collections::BTreeMap;

use reqwest::redirect::Policy;

/// The admin token of the test configurations (`ADMIN_TOKEN` in `support::env`).
pub(crate) const ADMIN_TOKEN: &str = "admin-token";

/// One answer of the console.
#[derive(Debug)]
pub(crate) struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub retry_after: Option<String>,
    pub set_cookies: Vec<String>,
    pub html: String,
}

impl Page {
    /// The HTML of the element whose start tag holds `marker` (`id="count"`,
    /// `data-destination="app"`), from its start tag up to the first `close` after it (its end
    /// tag, such as `</tr>`: the element must not hold one of its own kind).
    pub(crate) fn fragment(&self, marker: &str, close: &str) -> &str {
        fragment(&self.html, marker, close)
    }

    /// The text of that element: tags left out, entities decoded, white space collapsed.
    pub(crate) fn text(&self, marker: &str, close: &str) -> String {
        text_of(self.fragment(marker, close))
    }

    /// The `data-event-id` of each row of the events table, in the page's order.
    pub(crate) fn event_ids(&self) -> Vec<String> {
        if !self.html.contains("id=\"events\"") {
            return Vec::new();
        }
        let table = self.fragment("id=\"events\"", "</table>");
        table
            .split("data-event-id=\"")
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
            .collect()
    }

    /// The value of the first hidden `csrf` field of the page.
    pub(crate) fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let start = self
            .html
            .find(marker)
            .unwrap_or_else(|| panic!("no csrf field in {}", self.html))
            + marker.len();
        let end = self.html[start..].find('"').unwrap() + start;
        self.html[start..end].to_owned()
    }
}

/// The part of `html` from the start tag holding `marker` up to the first `close` after it.
pub(crate) fn fragment<'a>(html: &'a str, marker: &str, close: &str) -> &'a str {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in {html}"));
    let start = if marker.starts_with('<') {
        at
    } else {
        html[..at].rfind('<').unwrap()
    };
    let end = html[at..]
        .find(close)
        .unwrap_or_else(|| panic!("no {close} after {marker}"))
        + at
        + close.len();
    &html[start..end]
}

/// The elements a browser shows on lines (or cells) of their own.
const BLOCKS: [&str; 13] = [
    "p", "pre", "li", "ol", "ul", "tr", "td", "th", "dt", "dd", "div", "section", "br",
];

/// The text of an HTML fragment as a browser shows it, roughly: tags left out (a block's as a
/// space), the entities maud writes decoded, white space collapsed.
pub(crate) fn text_of(html: &str) -> String {
    let mut text = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        let close = rest[open..].find('>').map_or(rest.len(), |c| open + c + 1);
        let name: String = rest[open + 1..close]
            .trim_start_matches('/')
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if BLOCKS.contains(&name.as_str()) {
            text.push(' ');
        }
        rest = &rest[close.min(rest.len())..];
    }
    text.push_str(rest);
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A client at the console of the gateway at `base`, holding its cookies.
pub(crate) struct Client {
    pub base: String,
    http: reqwest::Client,
    pub cookies: BTreeMap<String, String>,
    /// Headers sent with every request (an `X-Forwarded-For` a proxy would add).
    pub headers: Vec<(String, String)>,
}

impl Client {
    pub(crate) fn new(base: &str) -> Self {
        Self {
            base: base.to_owned(),
            http: idem_testkit::http_client_builder()
                .redirect(Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
            headers: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn answer(&mut self, mut request: reqwest::RequestBuilder) -> Page {
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = if self.cookies.is_empty() {
            request
        } else {
            request.header("cookie", self.cookie_header())
        };
        let response = request.send().await.expect("the console answers");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let location = header("location");
        let retry_after = header("retry-after");
        let set_cookies: Vec<String> = response
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        for set in &set_cookies {
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || set.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status().as_u16();
        Page {
            status,
            location,
            retry_after,
            set_cookies,
            html: response.text().await.unwrap(),
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.answer(request).await
    }

    /// POSTs the form `fields` to `path`.
    pub(crate) async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.answer(request).await
    }

    /// Signs in with `token` from the sign-in page; the answer to the form.
    pub(crate) async fn sign_in_with(&mut self, token: &str) -> Page {
        let form = self.get("/console/sign-in").await;
        assert_eq!(form.status, 200, "{}", form.html);
        let csrf = form.csrf();
        self.post("/console/sign-in", &[("csrf", &csrf), ("token", token)])
            .await
    }

    /// Signs in with the right token; returns the session's CSRF token (from the overview).
    pub(crate) async fn sign_in(&mut self) -> String {
        let answer = self.sign_in_with(ADMIN_TOKEN).await;
        assert_eq!(answer.status, 303, "{}", answer.html);
        assert_eq!(answer.location.as_deref(), Some("/console"));
        let overview = self.get("/console").await;
        assert_eq!(overview.status, 200, "{}", overview.html);
        overview.csrf()
    }
}
