//! The local web server of `strato view`: the page and the API, behind a per-run token.
//!
//! - **Token.** Each run draws 128 random bits (the OS's generator). The printed URL carries it
//!   (`/?token=T`); the page's answer sets it as a cookie (`HttpOnly`, `SameSite=Strict`), so
//!   the page's own requests carry it. A request without it gets 401, with a wrong one 403
//!   (compared in constant time), whatever its path: nothing is served without it.
//! - **What is served.** The page's three files, compiled into the binary (`src/assets/`),
//!   the API ([`crate::api`]) and the HTML report at `/report` (its sections linking back
//!   into the page, [`strato_report::ViewerLinks`]). No path of a request reaches the file
//!   system.
//! - **Failures.** A bad request gets a 4xx with a one-line JSON error; a method other than
//!   GET gets 405. Answers are computed on a fixed pool of threads from the index in memory,
//!   so many clients queue rather than grow memory.
//! - Bound to loopback unless told otherwise (`--bind`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::api::{Api, ApiError, Params};

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The cookie the page's answer sets.
pub const COOKIE: &str = "strato_view_token";

/// Where and how to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// The address to listen on (loopback by default).
    pub bind: IpAddr,
    /// The port (0: one the OS picks).
    pub port: u16,
    /// Threads answering requests.
    pub threads: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            threads: 4,
        }
    }
}

/// The server failed to start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {message}")]
    Listen { addr: SocketAddr, message: String },
    #[error("cannot draw a random token: {0}")]
    Token(String),
}

/// An answer: status, content type, body, and the cookie to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub set_cookie: Option<String>,
    /// The `Content-Security-Policy` it is served with.
    pub policy: &'static str,
}

/// The policy of the page and the API: its own files only.
pub const PAGE_POLICY: &str =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'";

/// The policy of the report (`/report`): its inline style and SVG, no script, nothing fetched.
pub const REPORT_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

impl Answer {
    fn json(status: u16, value: &Value) -> Answer {
        Answer {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(value).unwrap_or_default(),
            set_cookie: None,
            policy: PAGE_POLICY,
        }
    }

    fn error(status: u16, message: &str) -> Answer {
        Answer::json(status, &json!({ "error": message }))
    }

    fn asset(content_type: &'static str, text: &str) -> Answer {
        Answer {
            status: 200,
            content_type,
            body: text.as_bytes().to_vec(),
            set_cookie: None,
            policy: PAGE_POLICY,
        }
    }
}

/// The API and its token: answers requests, with no socket (the server's threads call it;
/// tests call it directly).
#[derive(Debug)]
pub struct Handler {
    api: Api,
    token: String,
}

impl Handler {
    /// A handler for `api` with a fresh random token.
    pub fn new(api: Api) -> Result<Handler, ServeError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| ServeError::Token(e.to_string()))?;
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Handler { api, token })
    }

    /// The token requests must carry.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The API answered.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Answers one request: `method`, the request target (path and query) and the `Cookie`
    /// header, if any.
    pub fn answer(&self, method: &str, target: &str, cookie: Option<&str>) -> Answer {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let params: Params = {
            let mut p = HashMap::new();
            for (k, v) in form_urlencoded::parse(query.as_bytes()) {
                p.entry(k.into_owned()).or_insert_with(|| v.into_owned());
            }
            p
        };
        let presented = params.get("token").map(String::as_str).or_else(|| {
            cookie.and_then(|c| {
                c.split(';')
                    .filter_map(|kv| kv.trim().split_once('='))
                    .find(|(k, _)| *k == COOKIE)
                    .map(|(_, v)| v)
            })
        });
        match presented {
            None => {
                return Answer::error(
                    401,
                    "this server needs the token of the URL strato view printed",
                )
            }
            Some(t) if !same(t, &self.token) => return Answer::error(403, "wrong token"),
            Some(_) => {}
        }
        if method != "GET" {
            return Answer::error(405, "only GET is served");
        }
        let result = match path {
            "/" | "/index.html" => {
                let mut page = Answer::asset("text/html; charset=utf-8", INDEX_HTML);
                page.set_cookie = Some(format!(
                    "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
                    self.token
                ));
                return page;
            }
            "/report" => {
                let page = format!("/?token={}", self.token);
                let mut report = Answer::asset("text/html; charset=utf-8", self.api.report(&page));
                report.policy = REPORT_POLICY;
                return report;
            }
            "/app.js" => return Answer::asset("text/javascript; charset=utf-8", APP_JS),
            "/app.css" => return Answer::asset("text/css; charset=utf-8", APP_CSS),
            // Browsers ask for it unbidden: nothing, rather than a 404 in the console.
            "/favicon.ico" => {
                return Answer {
                    status: 204,
                    content_type: "image/x-icon",
                    body: Vec::new(),
                    set_cookie: None,
                    policy: PAGE_POLICY,
                }
            }
            "/api/lanes" => Ok(self.api.lanes()),
            "/api/range" => self.api.range(&params),
            "/api/search" => self.api.search(&params),
            "/api/aggregate" => self.api.aggregate(&params),
            "/api/steps" => Ok(self.api.steps()),
            "/api/critical-path" => self.api.critical_path(&params),
            "/api/findings" => self.api.findings(),
            "/api/collectives" => self.api.collectives(&params),
            "/api/diff" => self.api.diff(),
            _ => match path.strip_prefix("/api/event/") {
                Some(id) => self.api.event(id),
                None => Err(ApiError {
                    status: 404,
                    message: format!("nothing is served at {path}"),
                }),
            },
        };
        match result {
            Ok(value) => Answer::json(200, &value),
            Err(e) => Answer::error(e.status, &e.message),
        }
    }
}

/// Compares two tokens in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A listening server.
pub struct Server {
    http: Arc<tiny_http::Server>,
    handler: Arc<Handler>,
    addr: SocketAddr,
    threads: usize,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Listens as `options` say, for `handler`.
    pub fn bind(handler: Handler, options: &ServeOptions) -> Result<Server, ServeError> {
        let wanted = SocketAddr::new(options.bind, options.port);
        let http = tiny_http::Server::http(wanted).map_err(|e| ServeError::Listen {
            addr: wanted,
            message: e.to_string(),
        })?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| ServeError::Listen {
                addr: wanted,
                message: "not an IP socket".into(),
            })?;
        Ok(Server {
            http: Arc::new(http),
            handler: Arc::new(handler),
            addr,
            threads: options.threads.max(1),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to open, token included.
    pub fn url(&self) -> String {
        let host = match self.addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
            IpAddr::V4(ip) => ip.to_string(),
        };
        format!(
            "http://{host}:{}/?token={}",
            self.addr.port(),
            self.handler.token()
        )
    }

    /// Answers requests until the process ends.
    pub fn serve(self) {
        let workers: Vec<_> = (0..self.threads)
            .map(|_| {
                let http = Arc::clone(&self.http);
                let handler = Arc::clone(&self.handler);
                std::thread::spawn(move || {
                    while let Ok(request) = http.recv() {
                        respond(&handler, request);
                    }
                })
            })
            .collect();
        for w in workers {
            let _ = w.join();
        }
    }
}

fn respond(handler: &Handler, request: tiny_http::Request) {
    let cookie = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Cookie"))
        .map(|h| h.value.as_str().to_string());
    let method = request.method().as_str().to_string();
    let answer = handler.answer(&method, request.url(), cookie.as_deref());
    // Always a Content-Length (the answer is whole in memory), never chunked.
    let mut response = tiny_http::Response::from_data(answer.body)
        .with_status_code(answer.status)
        .with_chunked_threshold(usize::MAX);
    let mut header = |name: &str, value: &str| {
        if let Ok(h) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(h);
        }
    };
    header("Content-Type", answer.content_type);
    header("Cache-Control", "no-store");
    header("X-Content-Type-Options", "nosniff");
    header("X-Frame-Options", "DENY");
    header("Referrer-Policy", "no-referrer");
    header("Content-Security-Policy", answer.policy);
    if let Some(cookie) = &answer.set_cookie {
        header("Set-Cookie", cookie);
    }
    // A client that went away is not our failure.
    let _ = request.respond(response);
}
