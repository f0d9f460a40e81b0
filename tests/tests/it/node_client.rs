//! A client of a node's API for the cross-process tests: its address and owner token
//! read from the node's home, and one way to send a request with JSON.

use std::net::SocketAddr;

use hearth_tests::NodeHome;
use serde_json::Value;

/// The node's API at `addr`, with its owner token; clones share the connection pool.
#[derive(Clone)]
pub(crate) struct NodeApi {
    pub(crate) addr: SocketAddr,
    pub(crate) token: String,
    pub(crate) client: reqwest::Client,
}

impl NodeApi {
    /// The API of the running `hearth run` on `node` (its `node.http` and `owner.token`).
    pub(crate) fn of(node: &NodeHome) -> anyhow::Result<Self> {
        hearth_hub::hub_client::install_crypto_provider();
        Ok(Self {
            addr: node.http_addr()?,
            token: node.owner_token()?,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .build()?,
        })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}/api/v1{path}", self.addr)
    }

    /// One request with the owner token (and `body` as JSON), whatever it answers.
    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut req = self
            .client
            .request(method.parse()?, self.url(path))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        Ok(req.send().await?)
    }

    /// [`Self::send`], which must succeed; its JSON answer (`null` when empty).
    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let resp = self.send(method, path, body).await?;
        let status = resp.status();
        let text = resp.text().await?;
        anyhow::ensure!(status.is_success(), "{method} {path}: {status} {text}");
        Ok(if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)?
        })
    }
}
