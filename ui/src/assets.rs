//! The web UI's files, served at `/` (the page) and `/assets/…` by hub and node alike.
//!
//! The files under `ui/assets/` are compiled in by `build.rs` (bytes, gzip form, ETag),
//! so a binary carries its UI and `cargo run` needs no JavaScript tool. Every answer
//! carries the headers that keep a page from being turned against its owner: a strict
//! Content-Security-Policy (scripts and styles only from this origin, no inline script,
//! no plugin, no framing), `nosniff`, and no referrer. A developer may serve the files
//! from a directory instead (`--ui-dir`), read on every request, so editing the UI needs
//! no rebuild.
//!
//! Never serves anything outside its table or that directory (`..`, absolute and hidden
//! paths are refused), and never needs a credential: the page holds no data of its own;
//! everything it shows comes from the API, behind the guard.

use std::path::{Component, Path, PathBuf};

use axum::{
    extract::{Path as UrlPath, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};

/// One compiled-in file.
pub struct Asset {
    /// Its path under `ui/assets/`, `/`-separated.
    pub path: &'static str,
    /// Its bytes.
    pub raw: &'static [u8],
    /// Its bytes, gzipped at build time.
    pub gzip: &'static [u8],
    /// A strong ETag of `raw`, quoted.
    pub etag: &'static str,
}

/// Every compiled-in file, sorted by path.
pub static ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The page every path of the UI starts from.
pub const INDEX: &str = "index.html";

/// The policy every answer carries. `connect-src 'self'` covers the event WebSocket.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The compiled-in file at `path`, if there is one.
pub fn find(path: &str) -> Option<&'static Asset> {
    ASSETS
        .binary_search_by(|a| a.path.cmp(path))
        .ok()
        .map(|i| &ASSETS[i])
}

/// The total size of the compiled-in files, raw and gzipped.
pub fn total_size() -> (usize, usize) {
    ASSETS.iter().fold((0, 0), |(raw, gz), a| {
        (raw + a.raw.len(), gz + a.gzip.len())
    })
}

/// The routes `/` and `/assets/{*path}`, from the compiled-in table or, with `dev_dir`,
/// from that directory.
pub fn router<S: Clone + Send + Sync + 'static>(dev_dir: Option<PathBuf>) -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{*path}", get(file))
        .with_state(dev_dir)
}

async fn index(State(dev): State<Option<PathBuf>>, headers: HeaderMap) -> Response {
    serve(dev.as_deref(), INDEX, &headers).await
}

async fn file(
    State(dev): State<Option<PathBuf>>,
    UrlPath(path): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    serve(dev.as_deref(), &path, &headers).await
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("webmanifest") => "application/manifest+json",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// Whether `path` is a plain relative path with no `..`, no root and no hidden part.
fn plain(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path).components().all(|c| match c {
            Component::Normal(part) => !part.to_string_lossy().starts_with('.'),
            _ => false,
        })
}

fn base_headers(path: &str) -> [(header::HeaderName, HeaderValue); 6] {
    [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type(path)),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        // Revalidate every time (cheap: 304 by ETag), so an upgraded binary's UI is
        // never mixed with an older cached file.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ]
}

fn not_found(path: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("no file {path} in this UI\n"),
    )
        .into_response()
}

async fn serve(dev: Option<&Path>, path: &str, headers: &HeaderMap) -> Response {
    if !plain(path) {
        return not_found(path);
    }
    if let Some(dir) = dev {
        return match tokio::fs::read(dir.join(path)).await {
            Ok(bytes) => (base_headers(path), bytes).into_response(),
            Err(_) => not_found(path),
        };
    }
    let Some(asset) = find(path) else {
        return not_found(path);
    };
    let matches = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == asset.etag);
    let etag = HeaderValue::from_static(asset.etag);
    let vary = (header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if matches {
        return (
            StatusCode::NOT_MODIFIED,
            base_headers(path),
            [(header::ETAG, etag), vary],
        )
            .into_response();
    }
    let gzip = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.split(';').next().is_some_and(|n| n.trim() == "gzip"));
    if gzip {
        (
            base_headers(path),
            [
                (header::ETAG, etag),
                vary,
                (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
            ],
            asset.gzip,
        )
            .into_response()
    } else {
        (base_headers(path), [(header::ETAG, etag), vary], asset.raw).into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get_with(router: Router, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut req = axum::http::Request::get(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        router
            .oneshot(req.body(Body::empty()).expect("request"))
            .await
            .expect("infallible")
    }

    async fn body(resp: Response) -> Vec<u8> {
        resp.into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn the_page_is_served_with_a_strict_policy() {
        let resp = get_with(router(None), "/", &[]).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().expect("ascii");
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"));
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        let page = String::from_utf8(body(resp).await).expect("utf-8");
        assert!(page.contains("<script type=\"module\" src=\"/assets/js/app.js\">"));
        // No inline script: the policy would refuse it anyway.
        assert!(!page.contains("<script>"));
    }

    #[tokio::test]
    async fn gzip_when_asked_and_304_on_a_matching_etag() {
        let asset = find("js/app.js").expect("the shell is compiled in");
        let resp = get_with(
            router(None),
            "/assets/js/app.js",
            &[("accept-encoding", "br, gzip;q=0.8")],
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_ENCODING], "gzip");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&body(resp).await[..])
            .read_to_end(&mut raw)
            .expect("gzip");
        assert_eq!(raw, asset.raw);
        let resp = get_with(
            router(None),
            "/assets/js/app.js",
            &[("if-none-match", asset.etag)],
        )
        .await;
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);
    }

    #[tokio::test]
    async fn nothing_outside_the_table_or_the_directory() {
        for path in [
            "/assets/../Cargo.toml",
            "/assets/%2e%2e/Cargo.toml",
            "/assets/nope.js",
            "/assets/.hidden",
        ] {
            let resp = get_with(router(None), path, &[]).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("secret"), "no").expect("write");
        let inner = dir.path().join("ui");
        std::fs::create_dir(&inner).expect("mkdir");
        std::fs::write(inner.join("index.html"), "dev page").expect("write");
        let dev = || router(Some(inner.clone()));
        assert_eq!(body(get_with(dev(), "/", &[]).await).await, b"dev page");
        for path in [
            "/assets/../secret",
            "/assets/%2e%2e/secret",
            "/assets//etc/passwd",
        ] {
            let resp = get_with(dev(), path, &[]).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[test]
    fn paths_are_plain_or_refused() {
        assert!(plain("js/app.js"));
        for bad in [
            "",
            "../x",
            "/etc/passwd",
            "js/../../x",
            ".git/config",
            "js/.x",
        ] {
            assert!(!plain(bad), "{bad}");
        }
    }
}
