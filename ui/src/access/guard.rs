//! The access guard in front of every route of a hub's or node's API: who may ask, and
//! from where.
//!
//! In order, for every request:
//! 1. `Host` must name this server: `localhost`, `127.0.0.1` or `[::1]` with the API's
//!    own port, or a host the owner configured (`--http-host`). Anything else is 421
//!    `misdirected_host`: that is how a DNS-rebinding page (`evil.example` re-resolved to
//!    127.0.0.1) is told apart from the owner's own browser.
//! 2. A request that changes state (any method but GET, HEAD and OPTIONS, bodyless or
//!    not) or upgrades to a WebSocket is refused with 403 `foreign_origin` if it carries
//!    an `Origin` that is not an allowed host (or `null`), or `Sec-Fetch-Site:
//!    cross-site`: that stops cross-site requests from any page the owner visits.
//! 3. Except for `GET /api/v1/health`, the login link (`GET /api/v1/auth/login`) and
//!    the UI's files (`GET` outside `/api/v1`, see `assets`),
//!    the owner's credential is required: `Authorization: Bearer <owner.token>`
//!    (compared in constant time) or this server's session cookie (named for this
//!    instance, `hearth_hub_<id prefix>` or `hearth_node_<id prefix>`, since cookies
//!    ignore ports and a node may run beside the hub). Missing or wrong: 401
//!    `unauthenticated`. The principal let in goes on the request as an extension.
//!
//! Never trusts the peer address: loopback is not a credential.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{
    owner::{OwnerSessions, OwnerToken},
    Server,
};
use crate::{ApiError, API_ROOT};

/// Who the guard let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The owner, by the token (the CLI).
    Token,
    /// The owner, by a browser session with this id.
    Session(String),
}

/// What the guard checks against.
pub struct Access {
    token: OwnerToken,
    sessions: Arc<OwnerSessions>,
    cookie_name: String,
    port: u16,
    hosts: Vec<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("cookie_name", &self.cookie_name)
            .field("port", &self.port)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// `host[:port]` split, lowercased; IPv6 in brackets. `None` if malformed.
fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    let s = s.trim().to_ascii_lowercase();
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        let host = format!("[{inner}]");
        return match after {
            "" => Some((host, None)),
            p => Some((host, Some(p.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), Some(p.parse().ok()?))),
        Some(_) => None,
        None => Some((s, None)),
    }
}

impl Access {
    /// A guard for the API listening on `port`, with extra allowed `hosts`; the cookie
    /// is named for the server `sessions` belong to (see [`Server::cookie_name`]).
    pub fn new(
        token: OwnerToken,
        sessions: Arc<OwnerSessions>,
        cookie_name: String,
        port: u16,
        hosts: Vec<String>,
    ) -> Self {
        Self {
            token,
            sessions,
            cookie_name,
            port,
            hosts,
        }
    }

    /// Which server this guards.
    pub fn server(&self) -> Server {
        self.sessions.server()
    }

    /// The session cookie's name.
    pub fn cookie_name(&self) -> &str {
        &self.cookie_name
    }

    /// The owner sessions.
    pub fn sessions(&self) -> &Arc<OwnerSessions> {
        &self.sessions
    }

    /// Whether `host` (with `port`, if given) names this server.
    fn host_allowed(&self, host: &str, port: Option<u16>) -> bool {
        if matches!(host, "localhost" | "127.0.0.1" | "[::1]") && port == Some(self.port) {
            return true;
        }
        self.hosts.iter().any(|h| match split_host_port(h) {
            Some((name, Some(p))) => name == host && Some(p) == port,
            Some((name, None)) => name == host,
            None => false,
        })
    }

    fn check_host(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let misdirected = |what: &str| {
            ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_host",
                format!("{what}: this {} answers only to localhost, 127.0.0.1 or [::1] on port {}, or a host configured with --http-host", self.server().noun(), self.port),
            )
        };
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| misdirected("no Host header"))?;
        match split_host_port(host) {
            Some((name, port)) if self.host_allowed(&name, port) => Ok(()),
            _ => Err(misdirected(&format!(
                "Host {host:?} is not this {}",
                self.server().noun()
            ))),
        }
    }

    fn check_origin(&self, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
        let upgrade = headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if safe && !upgrade {
            return Ok(());
        }
        let foreign = |what: String| ApiError::new(StatusCode::FORBIDDEN, "foreign_origin", what);
        if headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
        {
            return Err(foreign(
                "cross-site requests may not change anything".into(),
            ));
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let text = origin.to_str().unwrap_or("");
        let allowed = text.split_once("://").and_then(|(scheme, rest)| {
            let default_port = match scheme.to_ascii_lowercase().as_str() {
                "http" => 80,
                "https" => 443,
                _ => return None,
            };
            let (name, port) = split_host_port(rest)?;
            Some(self.host_allowed(&name, Some(port.unwrap_or(default_port))))
        });
        if allowed == Some(true) {
            Ok(())
        } else {
            Err(foreign(format!(
                "Origin {text:?} is not this {}: requests from other sites may not change anything",
                self.server().noun()
            )))
        }
    }

    fn is_public(method: &Method, path: &str) -> bool {
        if !(*method == Method::GET || *method == Method::HEAD) {
            return false;
        }
        match path.strip_prefix(API_ROOT) {
            Some(rel) => rel == crate::HEALTH_PATH || rel == super::LOGIN_PATH,
            // The UI's files (`assets`): they hold no data, and a signed-out browser
            // must load the page that tells its owner how to sign in.
            None => true,
        }
    }

    fn cookie<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie_name)
            .map(|(_, value)| value.trim())
    }

    /// The principal a request's credential names.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let open = self.server().open_command();
        let unauthenticated = |m: &str| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                format!("{m}: send `Authorization: Bearer <$HEARTH_HOME/owner.token>`, or log in with the link `{open}` prints"),
            )
        };
        if let Some(auth) = headers.get(header::AUTHORIZATION) {
            let given = auth
                .to_str()
                .ok()
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .unwrap_or("");
            return if self.token.matches(given) {
                Ok(Principal::Token)
            } else {
                Err(unauthenticated("wrong credential"))
            };
        }
        let Some(cookie) = self.cookie(headers).map(str::to_string) else {
            return Err(unauthenticated("no credential"));
        };
        let sessions = self.sessions.clone();
        match super::blocking(move || sessions.check(&cookie)).await? {
            Some(id) => Ok(Principal::Session(id)),
            None => Err(unauthenticated("the session ended or expired")),
        }
    }
}

/// The middleware: Host, then Origin, then the credential.
pub async fn guard(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    // The body is not `Sync`: keep it out of the checks, which await.
    let (mut parts, body) = req.into_parts();
    let checked = async {
        access.check_host(&parts.headers)?;
        access.check_origin(&parts.method, &parts.headers)?;
        if Access::is_public(&parts.method, parts.uri.path()) {
            return Ok(None);
        }
        access.authenticate(&parts.headers).await.map(Some)
    }
    .await;
    match checked {
        Ok(principal) => {
            if let Some(p) = principal {
                parts.extensions.insert(p);
            }
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => {
            let unauthenticated = e.status() == StatusCode::UNAUTHORIZED;
            let mut resp = e.into_response();
            if unauthenticated {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            resp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(dir: &tempfile::TempDir) -> Access {
        let token = OwnerToken::load_or_create(dir.path()).expect("token");
        let sessions = Arc::new(crate::access::owner::tests::sessions(
            &dir.path().join("owner.db"),
        ));
        Access::new(
            token,
            sessions,
            "hearth_hub_x".into(),
            4200,
            vec!["hearth.example.com".into(), "box.lan:8443".into()],
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    #[test]
    fn hosts_name_this_hub_or_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(&dir);
        for ok in [
            "127.0.0.1:4200",
            "localhost:4200",
            "LOCALHOST:4200",
            "[::1]:4200",
            "hearth.example.com",
            "hearth.example.com:443",
            "box.lan:8443",
        ] {
            assert!(a.check_host(&headers(&[("host", ok)])).is_ok(), "{ok}");
        }
        for bad in [
            "evil.example:4200",
            "127.0.0.1:4201",
            "127.0.0.1",
            "localhost",
            "box.lan:8444",
            "127.0.0.1.evil.example:4200",
            "",
            "[::1",
        ] {
            let e = a.check_host(&headers(&[("host", bad)])).expect_err(bad);
            assert_eq!(e.status(), StatusCode::MISDIRECTED_REQUEST, "{bad}");
        }
        assert!(a.check_host(&HeaderMap::new()).is_err());
    }

    #[test]
    fn foreign_origins_may_not_change_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(&dir);
        let post = Method::POST;
        assert!(
            a.check_origin(&post, &headers(&[])).is_ok(),
            "no Origin: a CLI"
        );
        for ok in [
            "http://127.0.0.1:4200",
            "http://localhost:4200",
            "https://hearth.example.com",
        ] {
            assert!(
                a.check_origin(&post, &headers(&[("origin", ok)])).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://evil.example:4200",
            "null",
            "http://127.0.0.1:4201",
            "http://127.0.0.1",
            "file://",
        ] {
            let e = a
                .check_origin(&Method::DELETE, &headers(&[("origin", bad)]))
                .expect_err(bad);
            assert_eq!(e.status(), StatusCode::FORBIDDEN, "{bad}");
        }
        // Reads are not refused for their Origin, but a WebSocket upgrade is.
        let evil = [("origin", "http://evil.example:4200")];
        assert!(a.check_origin(&Method::GET, &headers(&evil)).is_ok());
        let upgrade = headers(&[
            ("origin", "http://evil.example:4200"),
            ("upgrade", "websocket"),
        ]);
        assert!(a.check_origin(&Method::GET, &upgrade).is_err());
        let cross = headers(&[("sec-fetch-site", "cross-site")]);
        assert!(a.check_origin(&post, &cross).is_err());
    }

    #[tokio::test]
    async fn credentials_token_or_this_instances_cookie() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(&dir);
        let token = a.token.expose().to_string();
        let bearer = format!("Bearer {token}");
        assert_eq!(
            a.authenticate(&headers(&[("authorization", &bearer)]))
                .await,
            Ok(Principal::Token)
        );
        let wrong = format!("Bearer {}x", &token[..63]);
        assert!(a
            .authenticate(&headers(&[("authorization", &wrong)]))
            .await
            .is_err());
        assert!(a.authenticate(&HeaderMap::new()).await.is_err());
        let (link, _) = a
            .sessions
            .create_link(std::time::Duration::from_secs(60))
            .expect("link");
        let s = a.sessions.redeem_link(&link, "t").expect("session");
        let ours = format!("other=1; hearth_hub_x={}", s.token);
        assert_eq!(
            a.authenticate(&headers(&[("cookie", &ours)])).await,
            Ok(Principal::Session(s.id.clone()))
        );
        // Another instance's cookie on the same host (a node beside the hub) is not ours.
        let theirs = format!("hearth_node_y={}", s.token);
        assert!(a
            .authenticate(&headers(&[("cookie", &theirs)]))
            .await
            .is_err());
        assert!(Access::is_public(&Method::GET, "/api/v1/health"));
        assert!(!Access::is_public(&Method::POST, "/api/v1/health"));
        assert!(!Access::is_public(&Method::GET, "/api/v1/notes"));
        assert!(!Access::is_public(&Method::GET, "/api/v1x/notes"));
        assert!(Access::is_public(&Method::GET, "/assets/js/app.js"));
        assert!(!Access::is_public(&Method::POST, "/assets/js/app.js"));
    }

    #[tokio::test]
    async fn a_nodes_guard_names_the_node_and_its_own_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = OwnerToken::load_or_create(dir.path()).expect("token");
        let conn = rusqlite::Connection::open(dir.path().join("node.db")).expect("db");
        conn.execute_batch(crate::access::owner::SESSION_TABLES)
            .expect("tables");
        let sessions = Arc::new(OwnerSessions::new(conn, Server::Node));
        let a = Access::new(
            token,
            sessions,
            Server::Node.cookie_name("abcdefghijkl"),
            4300,
            Vec::new(),
        );
        assert_eq!(a.cookie_name(), "hearth_node_abcdefghij");
        let e = a
            .authenticate(&HeaderMap::new())
            .await
            .expect_err("no credential");
        assert!(e.message().contains("`hearth open`"), "{e}");
        let e = a
            .check_host(&headers(&[("host", "127.0.0.1:4200")]))
            .expect_err("the hub's port");
        assert!(e.message().contains("this node answers only"), "{e}");
    }
}
