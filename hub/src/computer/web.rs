//! The computer plugin's `web_fetch`: an HTTP(S) GET turned into readable text, with a
//! size cap, a timeout and a bounded number of redirects.
//!
//! It must never reach the home network or the machine itself unless the owner allows
//! private addresses: every address a name resolves to is checked when a connection is
//! made (a filtering [`Resolve`], so a name that resolves to a private address is
//! refused), a literal IP host is checked before the request and at every redirect hop
//! (reqwest does not call the resolver for literals), and environment proxies are never
//! used. IPv4-mapped, IPv4-compatible, 6to4 and NAT64 IPv6 forms are judged by the IPv4
//! address they carry.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use reqwest::{
    dns::{Addrs, Name, Resolve, Resolving},
    header::{HeaderValue, ACCEPT, CONTENT_TYPE},
    redirect, Url,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::ComputerLimits;

/// Lines of converted HTML wrap at this width.
const TEXT_WIDTH: usize = 100;
/// The HTML converter recurses over the document tree: it runs on a thread of its own
/// with this much stack (reserved, touched only as deep as a page goes).
const CONVERTER_STACK: usize = 64 * 1024 * 1024;
/// Pages that nest deeper than this are converted by stripping tags: the converter's
/// parser slows with the square of the depth. Real pages stay far below it.
const MAX_NESTING: usize = 512;
/// How long the full converter may take before the tag-stripped text is used instead.
const CONVERT_BUDGET: Duration = Duration::from_secs(10);

/// Why a fetch failed. The message goes to the model as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    /// The URL is malformed or not HTTP(S).
    #[error("{0}")]
    Invalid(String),
    /// The address is private, loopback, link-local or otherwise not public.
    #[error(
        "{host} is a private, loopback, link-local or reserved address ({addr}): web_fetch \
         reaches only public addresses unless the owner allows private ones"
    )]
    PrivateAddress {
        /// The host as named.
        host: String,
        /// The address refused.
        addr: IpAddr,
    },
    /// The page is not text.
    #[error("{url} is not text ({content_type}): only text and HTML pages can be fetched")]
    NotText {
        /// The final URL.
        url: String,
        /// Its content type.
        content_type: String,
    },
    /// The request failed (connection, TLS, timeout, redirects).
    #[error("{0}")]
    Request(String),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}

/// Whether `ip` is a public unicast address: not private, loopback, link-local,
/// unique-local, CGNAT, unspecified, multicast, broadcast, documentation or otherwise
/// reserved. IPv6 forms that carry an IPv4 address are judged by it.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0 // "this network", the unspecified address among it
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // CGNAT, 100.64.0.0/10
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4); // ::ffff:a.b.c.d
    }
    if s[..6] == [0; 6] {
        // ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d.
        return s[6] != 0 && is_public_v4(embedded(s[6], s[7]));
    }
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return is_public_v4(embedded(s[6], s[7])); // IPv4-translated, ::ffff:0:a.b.c.d
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded(s[6], s[7])); // NAT64 well-known prefix
    }
    if s[0] == 0x2002 {
        return is_public_v4(embedded(s[1], s[2])); // 6to4
    }
    !((s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // local-use NAT64, 64:ff9b:1::/48
        || (s[0] == 0x100 && s[1..4] == [0; 3]) // discard-only, 100::/64
        || (s[0] == 0x2001 && s[1] == 0) // Teredo: carries an obfuscated IPv4
        || (s[0] == 0x2001 && s[1] == 0xdb8) // documentation
        || (s[0] & 0xfe00) == 0xfc00 // unique local, fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local, fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated), fec0::/10
        || (s[0] & 0xff00) == 0xff00) // multicast
}

/// Which addresses a fetch may reach.
#[derive(Debug, Clone, Default)]
pub(super) struct AddressPolicy {
    /// The owner allows private addresses: nothing is refused.
    pub(super) allow_private: bool,
    /// Addresses treated as public (tests serve "public" pages on 127.0.0.x).
    pub(super) public_for_tests: Vec<IpAddr>,
}

impl AddressPolicy {
    fn allows(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.public_for_tests.contains(&ip)
    }

    /// Checks a URL before it is requested (the first one and every redirect hop):
    /// HTTP(S) only, and a literal IP host must be allowed; names are checked by the
    /// resolver at connect time.
    fn check_url(&self, url: &Url) -> Result<(), WebError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(WebError::Invalid(format!(
                "{url}: only http and https URLs can be fetched"
            )));
        }
        let host = url
            .host_str()
            .ok_or_else(|| WebError::Invalid(format!("{url} has no host")))?;
        // The URL parser normalises IP hosts (`2130706433` is `127.0.0.1`, IPv6 is
        // bracketed), so a literal always parses here and a name never does.
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        match literal {
            Some(addr) if !self.allows(addr) => Err(WebError::PrivateAddress {
                host: host.to_owned(),
                addr,
            }),
            _ => Ok(()),
        }
    }
}

/// Resolves names (through the system, or an injected resolver) and keeps only the
/// addresses the policy allows; a name left with none is refused.
struct GuardedResolver {
    inner: Option<Arc<dyn Resolve>>,
    policy: Arc<AddressPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let inner = self.inner.clone();
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = match inner {
                Some(resolver) => resolver.resolve(name).await?.collect(),
                None => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
            };
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                addrs.into_iter().partition(|a| policy.allows(a.ip()));
            match (allowed.is_empty(), refused.first()) {
                (true, Some(addr)) => Err(Box::new(WebError::PrivateAddress {
                    host,
                    addr: addr.ip(),
                })
                    as Box<dyn std::error::Error + Send + Sync>),
                (true, None) => Err(format!("{host} resolved to no address").into()),
                (false, _) => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
    }
}

/// Arguments of `computer_web_fetch`.
#[derive(Debug, Deserialize)]
pub(super) struct FetchArgs {
    url: String,
}

/// The HTTP client `web_fetch` uses, built once with its guards.
pub(super) struct WebClient {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
}

impl WebClient {
    pub(super) fn new(
        policy: AddressPolicy,
        resolver: Option<Arc<dyn Resolve>>,
        limits: &ComputerLimits,
    ) -> Result<Self, WebError> {
        crate::hub_client::install_crypto_provider();
        let policy = Arc::new(policy);
        let redirect_policy = {
            let policy = policy.clone();
            let max = limits.web_redirects;
            redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() > max {
                    return attempt.error(format!("more than {max} redirects"));
                }
                match policy.check_url(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(e) => attempt.error(e),
                }
            })
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(GuardedResolver {
                inner: resolver,
                policy: policy.clone(),
            })
            .redirect(redirect_policy)
            .timeout(limits.web_timeout)
            .connect_timeout(Duration::from_secs(10).min(limits.web_timeout))
            .user_agent(concat!(
                "Hearth/",
                env!("CARGO_PKG_VERSION"),
                " (web_fetch)"
            ))
            .build()
            .map_err(|e| WebError::Client(e.to_string()))?;
        Ok(Self { client, policy })
    }

    /// Fetches a URL and answers its readable text.
    pub(super) async fn fetch(
        &self,
        args: FetchArgs,
        limits: &ComputerLimits,
    ) -> Result<Value, WebError> {
        let url = Url::parse(&args.url)
            .map_err(|e| WebError::Invalid(format!("{:?} is not a URL: {e}", args.url)))?;
        self.policy.check_url(&url)?;
        let mut response = self
            .client
            .get(url)
            .header(
                ACCEPT,
                HeaderValue::from_static("text/html,text/plain;q=0.9,*/*;q=0.5"),
            )
            .send()
            .await
            .map_err(describe)?;
        let status = response.status();
        let final_url = response.url().to_string();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let not_text = || WebError::NotText {
            url: final_url.clone(),
            content_type: content_type.clone(),
        };
        if is_binary_type(&essence) {
            return Err(not_text());
        }
        let mut body = Vec::new();
        let mut body_cut = false;
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            let room = limits.web_body_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                body_cut = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        if body[..body.len().min(8192)].contains(&0) {
            return Err(not_text());
        }
        let looks_html = essence == "text/html"
            || essence == "application/xhtml+xml"
            || (essence.is_empty() && sniff_html(&body));
        let text = if looks_html {
            html_to_text(body).await
        } else {
            String::from_utf8_lossy(&body).into_owned()
        };
        let (text, text_cut) = cap_chars(text, limits.web_text_chars);
        let mut out = json!({
            "url": final_url,
            "status": status.as_u16(),
            "contentType": content_type,
            "text": text,
            "truncated": body_cut || text_cut,
        });
        if body_cut {
            out["note"] = json!(format!(
                "only the first {} bytes of the page were read",
                limits.web_body_bytes
            ));
        } else if text_cut {
            out["note"] = json!(format!(
                "the text was cut at {} characters",
                limits.web_text_chars
            ));
        }
        Ok(out)
    }
}

/// A request error with its causes, so a refusal from the resolver or the redirect
/// policy reaches the model in words.
fn describe(error: reqwest::Error) -> WebError {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message.push_str(": ");
            message.push_str(&cause_text);
        }
        source = cause.source();
    }
    WebError::Request(message)
}

fn is_binary_type(essence: &str) -> bool {
    ["image/", "audio/", "video/", "font/"]
        .iter()
        .any(|p| essence.starts_with(p))
        || matches!(
            essence,
            "application/pdf"
                | "application/zip"
                | "application/gzip"
                | "application/octet-stream"
                | "application/wasm"
        )
}

fn sniff_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let head = head.trim_start();
    head.starts_with("<!doctype html") || head.starts_with("<html")
}

/// Converts HTML to plain text: with the full converter (links as numbered footnotes)
/// on a thread of its own, or by stripping tags when the page nests too deep for it or
/// it runs past its time (the converter cannot be stopped; the depth bound keeps such a
/// leftover thread short).
async fn html_to_text(body: Vec<u8>) -> String {
    if super::html::nesting_depth(&body) > MAX_NESTING {
        return super::html::strip_tags(&body);
    }
    let body = Arc::new(body);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let input = body.clone();
    let spawned = std::thread::Builder::new()
        .name("web-html2text".into())
        .stack_size(CONVERTER_STACK)
        .spawn(move || {
            let text = html2text::config::plain()
                .link_footnotes(true)
                .string_from_read(input.as_slice(), TEXT_WIDTH);
            let _ = tx.send(text);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "the HTML converter's thread did not start");
        return super::html::strip_tags(&body);
    }
    match tokio::time::timeout(CONVERT_BUDGET, rx).await {
        Ok(Ok(Ok(text))) => text,
        outcome => {
            tracing::debug!(
                timed_out = outcome.is_err(),
                "HTML converted by stripping tags"
            );
            super::html::strip_tags(&body)
        }
    }
}

/// Cuts `text` to at most `max` characters; says whether it cut.
fn cap_chars(text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use axum::{
        extract::Query,
        http::{header, StatusCode},
        response::{IntoResponse, Response},
        routing::get,
        Router,
    };

    use super::*;

    const PAGE: &str = "<!doctype html><html><head><title>T</title>\
        <script>window.evil()</script><style>p { color: red }</style></head>\
        <body><h1>Hello</h1><p>World of <a href=\"https://example.org/x\">links</a>.</p>\
        <ul><li>first</li><li>second</li></ul></body></html>";

    async fn redirect(Query(q): Query<HashMap<String, String>>) -> Response {
        let to = q.get("to").cloned().unwrap_or_default();
        (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
    }

    /// Serves test pages on `ip` (127.0.0.x), port 0.
    async fn serve(ip: [u8; 4]) -> SocketAddr {
        let app = Router::new()
            .route(
                "/",
                get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
            )
            .route("/text", get(|| async { "plain words" }))
            .route("/big", get(|| async { "x".repeat(10_000) }))
            .route(
                "/image",
                get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0x89u8, 0, 0]) }),
            )
            .route("/redirect", get(redirect))
            .route(
                "/loop",
                get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]) }),
            );
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::from(ip), 0))
            .await
            .expect("bind 127.0.0.x");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    /// Names for tests: `intranet.test` is loopback, `public.test` the "public" 127.0.0.2.
    struct MapResolver(HashMap<&'static str, IpAddr>);

    impl Resolve for MapResolver {
        fn resolve(&self, name: Name) -> Resolving {
            let found = self.0.get(name.as_str()).copied();
            let name = name.as_str().to_owned();
            Box::pin(async move {
                match found {
                    Some(ip) => Ok(Box::new(std::iter::once(SocketAddr::new(ip, 0))) as Addrs),
                    None => Err(format!("{name}: unknown test name").into()),
                }
            })
        }
    }

    const PUBLIC_FOR_TESTS: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

    fn client(allow_private: bool, limits: &ComputerLimits) -> WebClient {
        let resolver = MapResolver(HashMap::from([
            ("intranet.test", IpAddr::V4(Ipv4Addr::LOCALHOST)),
            ("public.test", PUBLIC_FOR_TESTS),
        ]));
        WebClient::new(
            AddressPolicy {
                allow_private,
                public_for_tests: vec![PUBLIC_FOR_TESTS],
            },
            Some(Arc::new(resolver)),
            limits,
        )
        .expect("client")
    }

    async fn fetch(client: &WebClient, url: String) -> Result<Value, WebError> {
        client
            .fetch(FetchArgs { url }, &ComputerLimits::default())
            .await
    }

    fn assert_refused(result: Result<Value, WebError>) {
        let message = match result {
            Ok(page) => panic!("fetched a private address: {page}"),
            Err(e) => e.to_string(),
        };
        assert!(
            message.contains("private, loopback, link-local or reserved"),
            "{message}"
        );
    }

    #[test]
    fn classifies_addresses() {
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ];
        let private = [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "192.168.1.1",
            "192.0.2.1",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::ffff:0:7f00:1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2001::1",
            "2001:db8::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
        ];
        for ip in public {
            assert!(is_public(ip.parse().expect(ip)), "{ip} should be public");
        }
        for ip in private {
            assert!(
                !is_public(ip.parse().expect(ip)),
                "{ip} should not be public"
            );
        }
    }

    #[tokio::test]
    async fn refuses_loopback_literals_in_every_form() {
        let private = serve([127, 0, 0, 1]).await;
        let port = private.port();
        let client = client(false, &ComputerLimits::default());
        for url in [
            format!("http://127.0.0.1:{port}/text"),
            format!("http://[::ffff:127.0.0.1]:{port}/text"),
            format!("http://[::1]:{port}/text"),
            format!("http://2130706433:{port}/text"),
            format!("http://0x7f.1:{port}/text"),
            format!("http://0.0.0.0:{port}/text"),
        ] {
            assert_refused(fetch(&client, url).await);
        }
        let err = fetch(&client, "file:///etc/passwd".into())
            .await
            .expect_err("not http");
        assert!(matches!(err, WebError::Invalid(_)), "{err:?}");
    }

    #[tokio::test]
    async fn refuses_a_name_that_resolves_to_loopback() {
        let private = serve([127, 0, 0, 1]).await;
        let client = client(false, &ComputerLimits::default());
        assert_refused(
            fetch(
                &client,
                format!("http://intranet.test:{}/text", private.port()),
            )
            .await,
        );
    }

    #[tokio::test]
    async fn refuses_a_redirect_to_loopback() {
        let private = serve([127, 0, 0, 1]).await;
        let public = serve([127, 0, 0, 2]).await;
        let client = client(false, &ComputerLimits::default());
        // The "public" server itself is reachable, by literal and by name...
        let page = fetch(&client, format!("http://{public}/text"))
            .await
            .expect("public page");
        assert_eq!(page["text"], "plain words");
        let page = fetch(
            &client,
            format!("http://public.test:{}/text", public.port()),
        )
        .await
        .expect("public name");
        assert_eq!(page["text"], "plain words");
        // ...but not where it redirects to, by literal or by name.
        for target in [
            format!("http://127.0.0.1:{}/text", private.port()),
            format!("http://intranet.test:{}/text", private.port()),
        ] {
            assert_refused(fetch(&client, format!("http://{public}/redirect?to={target}")).await);
        }
        let err = fetch(&client, format!("http://{public}/loop"))
            .await
            .expect_err("redirect loop");
        assert!(err.to_string().contains("more than 5 redirects"), "{err}");
    }

    #[tokio::test]
    async fn the_owner_can_allow_private_addresses() {
        let private = serve([127, 0, 0, 1]).await;
        let public = serve([127, 0, 0, 2]).await;
        let client = client(true, &ComputerLimits::default());
        let page = fetch(&client, format!("http://{private}/text"))
            .await
            .expect("allowed");
        assert_eq!(page["text"], "plain words");
        assert_eq!(page["status"], 200);
        let page = fetch(
            &client,
            format!(
                "http://{public}/redirect?to=http://intranet.test:{}/text",
                private.port()
            ),
        )
        .await
        .expect("allowed redirect");
        assert_eq!(page["text"], "plain words");
        assert_eq!(
            page["url"],
            format!("http://intranet.test:{}/text", private.port())
        );
    }

    #[tokio::test]
    async fn converts_html_to_text() {
        let public = serve([127, 0, 0, 2]).await;
        let client = client(false, &ComputerLimits::default());
        let page = fetch(&client, format!("http://{public}/"))
            .await
            .expect("page");
        let text = page["text"].as_str().expect("text");
        for expected in [
            "Hello",
            "World of",
            "links",
            "https://example.org/x",
            "first",
            "second",
        ] {
            assert!(
                text.contains(expected),
                "{expected:?} missing from {text:?}"
            );
        }
        assert!(!text.contains("evil"), "{text}");
        assert!(!text.contains("color"), "{text}");
        assert!(!text.contains('<'), "{text}");
        let err = fetch(&client, format!("http://{public}/image"))
            .await
            .expect_err("not text");
        assert!(matches!(err, WebError::NotText { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn caps_the_body_and_the_text() {
        let public = serve([127, 0, 0, 2]).await;
        let limits = ComputerLimits {
            web_body_bytes: 1000,
            ..ComputerLimits::default()
        };
        let client = client(false, &limits);
        let page = client
            .fetch(
                FetchArgs {
                    url: format!("http://{public}/big"),
                },
                &limits,
            )
            .await
            .expect("page");
        assert_eq!(page["text"].as_str().map(str::len), Some(1000));
        assert_eq!(page["truncated"], true);
        assert!(page["note"].as_str().expect("note").contains("1000 bytes"));
        let (text, cut) = cap_chars("héllo".into(), 2);
        assert_eq!((text.as_str(), cut), ("hé", true));
    }

    #[tokio::test]
    async fn deeply_nested_html_is_converted_quickly() {
        // 200,000 nested tags hold the full converter for many minutes.
        let depth = 200_000;
        let started = std::time::Instant::now();
        let html = format!("{}deep{}", "<div>".repeat(depth), "</div>".repeat(depth));
        assert_eq!(html_to_text(html.into_bytes()).await, "deep\n");
        let unclosed = "<b id=x>t".repeat(depth);
        assert!(html_to_text(unclosed.into_bytes()).await.starts_with("ttt"));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // A page within the bound goes through the full converter (footnoted links).
        let shallow = format!(
            "{}<a href=\"https://example.org/\">x</a>{}",
            "<div>".repeat(100),
            "</div>".repeat(100)
        );
        assert!(html_to_text(shallow.into_bytes())
            .await
            .contains("https://example.org/"));
    }
}
