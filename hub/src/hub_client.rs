//! The CLI's client of the running hub's HTTP API (`hearth-hub chat`, `hearth-hub open`):
//! finds the API in `$HEARTH_HOME/hub.http`, authenticates with the owner token
//! (`owner.token`) as `Authorization: Bearer`, and speaks only to loopback.
//!
//! A binary edge (anyhow allowed). Never prints the token; the login link it prints is
//! single use and short-lived.

use std::path::Path;

use anyhow::{bail, Context};
use serde_json::Value;

use crate::owner::OwnerToken;

/// A client of the hub running on this data directory.
pub struct HubClient {
    client: reqwest::Client,
    base: String,
    token: OwnerToken,
}

impl HubClient {
    /// Finds the running hub of `home` and reads the owner token.
    pub fn connect(home: &Path) -> anyhow::Result<Self> {
        let addr = std::fs::read_to_string(home.join("hub.http"))
            .context("the hub is not running here (no hub.http): start `hearth-hub` first")?;
        let token = OwnerToken::read(home, hearth_ui::access::Server::Hub)?;
        install_crypto_provider();
        Ok(Self {
            client: reqwest::Client::builder().build()?,
            base: format!("http://{}", addr.trim()),
            token,
        })
    }

    /// `POST {base}/api/v1{path}` with a JSON body, authenticated; fails on a non-2xx
    /// answer with the hub's error message.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<reqwest::Response> {
        let resp = self
            .client
            .post(format!("{}/api/v1{path}", self.base))
            .bearer_auth(self.token.expose())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .context("cannot reach the hub")?;
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            bail!("the hub said {status}: {message}");
        }
        Ok(resp)
    }
}

/// reqwest is built without a crypto provider of its own: installs ring's, as iroh uses,
/// before a client is built (repeated calls are harmless).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `hearth-hub open`: asks the running hub for a one-time login link, prints it, and
/// opens it in a browser when a desktop is present (never failing when none is).
pub async fn open(home: &Path, ttl_secs: u64, browser: bool) -> anyhow::Result<()> {
    let hub = HubClient::connect(home)?;
    let text = hub
        .post("/auth/links", &serde_json::json!({ "ttl_secs": ttl_secs }))
        .await?
        .text()
        .await?;
    let link: Value = serde_json::from_str(&text).context("reading the hub's answer")?;
    let url = link["url"]
        .as_str()
        .context("the hub's answer has no url")?
        .to_string();
    println!("{url}");
    eprintln!("Open this link in your browser to log in (single use, valid {ttl_secs} s).");
    if browser {
        hearth_ui::access::browser::open_if_desktop(&url);
    }
    Ok(())
}
