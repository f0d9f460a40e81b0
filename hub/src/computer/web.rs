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
const CONVERTER_STACK: usize = 256 * 1024 * 1024;

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
                }) as Box<dyn std::error::Error + Send + Sync>),
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
            .user_agent(concat!("Hearth/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
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
            html_to_text(body).await?
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

/// Converts HTML to plain text (links as numbered footnotes) on a thread with a large
/// stack, since the converter recurses as deep as the page nests.
async fn html_to_text(body: Vec<u8>) -> Result<String, WebError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("web-html2text".into())
        .stack_size(CONVERTER_STACK)
        .spawn(move || {
            let text = html2text::config::plain()
                .link_footnotes(true)
                .string_from_read(body.as_slice(), TEXT_WIDTH);
            let _ = tx.send(text);
        })
        .map_err(|e| WebError::Request(format!("the page could not be converted: {e}")))?;
    match rx.await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(WebError::Request(format!(
            "the page could not be converted to text: {e}"
        ))),
        Err(_) => Err(WebError::Request(
            "the page could not be converted to text".into(),
        )),
    }
}

/// Cuts `text` to at most `max` characters; says whether it cut.
fn cap_chars(text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text, false),
    }
}
