//! The CLI's client of the running node's HTTP API (`hearth open`, `hearth status`):
//! finds the API in `$HEARTH_HOME/node.http`, authenticates with the node's owner token
//! (`owner.token`) as `Authorization: Bearer`, and speaks only to the address `hearth
//! run` recorded (loopback unless the owner chose otherwise).
//!
//! A binary edge (anyhow allowed). Never prints the token.

use std::path::Path;

use anyhow::{bail, Context};
use hearth_ui::access::{OwnerToken, Server};
use serde_json::Value;

use crate::api::server::ADDR_FILE;

/// A client of the `hearth run` serving this data directory.
pub(crate) struct NodeClient {
    client: reqwest::Client,
    base: String,
    token: OwnerToken,
}

impl NodeClient {
    /// Finds the running node's API and reads its owner token.
    pub(crate) fn connect(home: &Path) -> anyhow::Result<Self> {
        let addr = std::fs::read_to_string(home.join(ADDR_FILE)).context(
            "`hearth run` is not serving an API here (no node.http): start `hearth run` first",
        )?;
        let token = OwnerToken::read(home, Server::Node)?;
        // Built beside the hub, reqwest wants a crypto provider even for plain HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            client: reqwest::Client::builder()
                .no_proxy()
                .timeout(std::time::Duration::from_secs(10))
                .build()?,
            base: format!("http://{}{}", addr.trim(), hearth_ui::API_ROOT),
            token,
        })
    }

    /// `method {base}{path}` with an optional JSON body, authenticated; the answer's JSON,
    /// or the node's error message.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose());
        if let Some(body) = body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let resp = req.send().await.context("cannot reach `hearth run`")?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            bail!("the node said {status}: {message}");
        }
        serde_json::from_str(&text).context("reading the node's answer")
    }
}

/// `hearth open`: asks the running node for a one-time login link, prints it, and opens
/// it in a browser when a desktop is present (never failing when none is).
pub(crate) async fn open(home: &Path, ttl_secs: u64, browser: bool) -> anyhow::Result<()> {
    let node = NodeClient::connect(home)?;
    let link = node
        .call(
            reqwest::Method::POST,
            "/auth/links",
            Some(&serde_json::json!({ "ttl_secs": ttl_secs })),
        )
        .await?;
    let url = link["url"]
        .as_str()
        .context("the node's answer has no url")?
        .to_string();
    println!("{url}");
    eprintln!("Open this link in your browser to log in (single use, valid {ttl_secs} s).");
    if browser {
        hearth_ui::access::browser::open_if_desktop(&url);
    }
    Ok(())
}
