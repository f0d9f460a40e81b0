//! The CLI's client of the running node's HTTP API (`hearth open`, `hearth status`,
//! `hearth chat`): finds the API in `$HEARTH_HOME/node.http`, authenticates with the
//! node's owner token (`owner.token`) as `Authorization: Bearer`, speaks only to the
//! address `hearth run` recorded (loopback unless the owner chose otherwise), and turns
//! failures into words (`hearth run` not answering, the hub out of reach).
//!
//! A binary edge (anyhow allowed). Never prints the token.

use std::{path::Path, time::Duration};

use anyhow::{bail, Context};
use hearth_ui::access::{OwnerToken, Server};
use serde_json::Value;

use crate::api::server::ADDR_FILE;

/// How long the CLI waits for a connection to `hearth run` (it is on this machine).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a plain (non-streamed) call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to the running node failed, in words for the terminal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CallError {
    /// Nothing answers at the recorded address.
    #[error("no `hearth run` answers at {addr}: start `hearth run` first")]
    NoNode {
        /// The address in `node.http`.
        addr: String,
        /// Why the connection failed.
        source: reqwest::Error,
    },
    /// The node answered that its hub is out of reach (503 `hub_unreachable`).
    #[error("the hub is out of reach: {0}; notes and tasks still work offline")]
    HubUnreachable(String),
    /// The node (or the hub through it) refused the request.
    #[error("the node said {status}: {message}")]
    Refused {
        /// HTTP status.
        status: reqwest::StatusCode,
        /// The error's message.
        message: String,
    },
    /// The answer could not be read.
    #[error("reading the node's answer: {0}")]
    Read(String),
}

/// A client of the `hearth run` serving this data directory.
pub(crate) struct NodeClient {
    client: reqwest::Client,
    addr: String,
    base: String,
    token: OwnerToken,
}

impl NodeClient {
    /// Finds the running node's API and reads its owner token.
    pub(crate) fn connect(home: &Path) -> anyhow::Result<Self> {
        let addr = match std::fs::read_to_string(home.join(ADDR_FILE)) {
            Ok(addr) => addr,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("`hearth run` is not serving an API here (no node.http): start `hearth run` first")
            }
            Err(e) => return Err(e).context(format!("reading {ADDR_FILE} in {}", home.display())),
        };
        let addr = addr.trim().to_string();
        let token = OwnerToken::read(home, Server::Node)?;
        // Built beside the hub, reqwest wants a crypto provider even for plain HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            // No overall timeout here: a chat streams for as long as its turn runs.
            client: reqwest::Client::builder()
                .no_proxy()
                .connect_timeout(CONNECT_TIMEOUT)
                .build()?,
            base: format!("http://{addr}{}", hearth_ui::API_ROOT),
            addr,
            token,
        })
    }

    /// `method {base}{path}` with an optional JSON body, authenticated, within `timeout`
    /// if given; the answer once its head says success (its body still to read).
    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, CallError> {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose());
        if let Some(body) = body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let resp = req.send().await.map_err(|source| CallError::NoNode {
            addr: self.addr.clone(),
            source,
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.unwrap_or_default();
        Err(refusal(status, &text))
    }

    /// `method {base}{path}` with an optional JSON body, authenticated; the answer's JSON
    /// (`null` for an empty body), or why not.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, CallError> {
        let resp = self.send(method, path, body, Some(CALL_TIMEOUT)).await?;
        let text = resp
            .text()
            .await
            .map_err(|e| CallError::Read(e.to_string()))?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| CallError::Read(e.to_string()))
    }
}

/// The error a failed answer (`status`, body `text`) stands for.
fn refusal(status: reqwest::StatusCode, text: &str) -> CallError {
    let error = serde_json::from_str::<Value>(text).unwrap_or_default();
    let message = error["error"]["message"]
        .as_str()
        .unwrap_or(text)
        .to_string();
    match error["error"]["code"].as_str() {
        Some("hub_unreachable") => {
            // The node's message goes on to say what needs the hub; the terminal says
            // what still works instead.
            let why = message
                .split_once(crate::relay_routes::NEEDS_THE_HUB)
                .map_or(message.as_str(), |(why, _)| why);
            CallError::HubUnreachable(why.trim_end_matches([':', ' ']).to_string())
        }
        _ => CallError::Refused { status, message },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_out_of_reach_is_one_line_saying_what_still_works() {
        let body = serde_json::json!({"error": {
            "code": "hub_unreachable",
            "message": format!("{}: {}", crate::LinkError::Unreachable, crate::relay_routes::NEEDS_THE_HUB),
        }});
        let e = refusal(reqwest::StatusCode::SERVICE_UNAVAILABLE, &body.to_string());
        assert_eq!(
            e.to_string(),
            "the hub is out of reach: the hub is unreachable; notes and tasks still work offline"
        );
        let e = refusal(
            reqwest::StatusCode::NOT_FOUND,
            r#"{"error":{"code":"not_found","message":"no project Work"}}"#,
        );
        assert_eq!(
            e.to_string(),
            "the node said 404 Not Found: no project Work"
        );
        let e = refusal(reqwest::StatusCode::BAD_GATEWAY, "plain words");
        assert_eq!(e.to_string(), "the node said 502 Bad Gateway: plain words");
    }
}
