//! Model providers: Anthropic Messages and OpenAI Chat Completions (also any
//! OpenAI-compatible server: Ollama, llama.cpp, vLLM), streamed over SSE.
//!
//! One [`ProviderClient`] per provider. [`ProviderClient::stream`] sends a [`ChatRequest`],
//! reports text deltas and complete tool calls to a callback as they arrive, and returns
//! the finished [`Turn`]. Tool-call arguments arrive as JSON fragments split across many
//! events; they are reassembled per call and parsed once the call is complete.
//! Rate limits (429), server errors (5xx) and overloaded errors are retried with
//! exponential backoff, also when they arrive in the middle of a stream (the callback
//! then sees [`StreamEvent::Restart`] and must drop what it showed of the failed try).
//! A missing or rejected key is a clear error and is never retried.
//!
//! This module never logs request bodies or keys.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde_json::{json, Value};

use super::sse::{SseDecoder, SseEvent};

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions (and compatible servers).
    OpenAi,
}

/// A model named `provider:model`, e.g. `anthropic:claude-sonnet-4-5` or `ollama:llama3.2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// The provider's name as configured (`anthropic`, `openai`, `ollama`, …).
    pub provider: String,
    /// The model id the provider knows.
    pub model: String,
}

impl std::str::FromStr for ModelRef {
    type Err = ProviderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() => Ok(Self {
                provider: p.to_string(),
                model: m.to_string(),
            }),
            _ => Err(ProviderError::Config(format!(
                "model {s:?} is not written as provider:model"
            ))),
        }
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider, self.model)
    }
}

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user (and tool results).
    User,
    /// The model.
    Assistant,
}

/// A part of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Text.
    Text(String),
    /// A tool call the model made.
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The call it answers.
        id: String,
        /// Output text.
        content: String,
        /// Whether the tool failed.
        is_error: bool,
    },
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Speaker.
    pub role: Role,
    /// Parts.
    pub content: Vec<Content>,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its input.
    pub input_schema: Value,
}

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// Model id (without the provider prefix).
    pub model: String,
    /// The static system prefix (cached by providers that support it).
    pub system: String,
    /// The part of the system prompt that changes per turn (date, summary).
    pub system_dynamic: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Offered tools.
    pub tools: Vec<ToolSpec>,
    /// Output limit.
    pub max_tokens: u32,
}

/// Token counts of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens (not counting cache reads).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
}

/// A complete tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Parsed arguments.
    pub input: Value,
}

/// What the caller hears while a turn streams.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text.
    TextDelta(String),
    /// A tool call, complete with its arguments.
    ToolCall(ToolCall),
    /// The try failed mid-stream and is being retried: forget what this turn showed.
    Restart {
        /// Number of the coming attempt (2 for the first retry).
        attempt: u32,
        /// Why.
        reason: String,
    },
}

/// A finished turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// All text.
    pub text: String,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped (`end_turn`, `tool_use`, `stop`, `tool_calls`, `max_tokens`…).
    pub stop_reason: String,
    /// Tokens.
    pub usage: Usage,
    /// Attempts it took.
    pub attempts: u32,
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
    /// No key is set for a provider that needs one.
    #[error("no API key for {provider}: set it in the hub's settings")]
    MissingKey {
        /// The provider.
        provider: String,
    },
    /// The provider rejected the key.
    #[error("{provider} rejected the API key ({status}): {message}")]
    Rejected {
        /// The provider.
        provider: String,
        /// HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// Retryable trouble that outlasted the retries, or a non-retryable HTTP error.
    #[error("{provider} failed ({status}): {message}")]
    Status {
        /// The provider.
        provider: String,
        /// HTTP status (0 for errors inside a stream).
        status: u16,
        /// Its message.
        message: String,
        /// Whether trying again may help.
        retryable: bool,
    },
    /// The connection failed.
    #[error("cannot reach {provider}: {message}")]
    Network {
        /// The provider.
        provider: String,
        /// Why.
        message: String,
    },
    /// The stream broke the provider's own format.
    #[error("{provider} sent something unexpected: {message}")]
    Protocol {
        /// The provider.
        provider: String,
        /// What.
        message: String,
    },
}

impl ProviderError {
    fn retryable(&self) -> bool {
        match self {
            Self::Status { retryable, .. } => *retryable,
            Self::Network { .. } => true,
            _ => false,
        }
    }
}

/// Retry policy.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts in all.
    pub attempts: u32,
    /// First delay; doubles each time.
    pub base_delay: Duration,
    /// Longest delay.
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

/// A configured provider.
#[derive(Clone)]
pub struct ProviderClient {
    name: String,
    kind: ProviderKind,
    base_url: String,
    api_key: Option<String>,
    http: reqwest::Client,
    retry: Retry,
}

impl fmt::Debug for ProviderClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key never appears in logs.
        f.debug_struct("ProviderClient")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "********"))
            .finish()
    }
}

fn http_client() -> Result<reqwest::Client, ProviderError> {
    // reqwest is built without a crypto provider of its own; use ring, as iroh does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| ProviderError::Config(format!("HTTP client: {e}")))
}

impl ProviderClient {
    /// A client for provider `name` of `kind` at `base_url` (e.g. `https://api.anthropic.com`,
    /// `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`).
    pub fn new(
        name: &str,
        kind: ProviderKind,
        base_url: &str,
        api_key: Option<String>,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            name: name.to_string(),
            kind,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
            http: http_client()?,
            retry: Retry::default(),
        })
    }

    /// Changes the retry policy.
    pub fn with_retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Embeds `texts` with `model` through an OpenAI-compatible `/embeddings` endpoint
    /// (OpenAI, Ollama, llama.cpp, vLLM), one vector per text, in order.
    pub async fn embed(
        &self,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        if self.kind != ProviderKind::OpenAi {
            return Err(ProviderError::Config(format!(
                "{} has no embeddings API: use an OpenAI-compatible provider for the embedding model",
                self.name
            )));
        }
        let mut rb = self
            .http
            .post(format!("{}/embeddings", self.base_url))
            .header("content-type", "application/json");
        if let Some(k) = &self.api_key {
            rb = rb.bearer_auth(k);
        }
        let body = json!({ "model": model, "input": texts });
        let net = |e: reqwest::Error| ProviderError::Network {
            provider: self.name.clone(),
            message: e.to_string(),
        };
        let resp = rb.body(body.to_string()).send().await.map_err(net)?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(net)?;
        if status != 200 {
            let message = error_message(&text);
            return Err(match status {
                401 | 403 => ProviderError::Rejected {
                    provider: self.name.clone(),
                    status,
                    message,
                },
                _ => ProviderError::Status {
                    provider: self.name.clone(),
                    status,
                    message,
                    retryable: status == 429 || status >= 500,
                },
            });
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| self.protocol(format!("embeddings: {e}")))?;
        let mut rows: Vec<(u64, Vec<f32>)> = v["data"]
            .as_array()
            .ok_or_else(|| self.protocol("embeddings: no data array".into()))?
            .iter()
            .map(|d| {
                let idx = d["index"].as_u64().unwrap_or(0);
                let vec = d["embedding"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_f64())
                        .map(|x| x as f32)
                        .collect()
                });
                vec.map(|v| (idx, v))
                    .ok_or_else(|| self.protocol("embeddings: an item has no vector".into()))
            })
            .collect::<Result<_, _>>()?;
        rows.sort_by_key(|(i, _)| *i);
        if rows.len() != texts.len() {
            return Err(self.protocol(format!(
                "embeddings: {} vectors for {} texts",
                rows.len(),
                texts.len()
            )));
        }
        Ok(rows.into_iter().map(|(_, v)| v).collect())
    }

    /// Streams one turn, retrying retryable failures.
    pub async fn stream(
        &self,
        req: &ChatRequest,
        mut on_event: impl FnMut(StreamEvent) + Send,
    ) -> Result<Turn, ProviderError> {
        if self.kind == ProviderKind::Anthropic && self.api_key.is_none() {
            return Err(ProviderError::MissingKey {
                provider: self.name.clone(),
            });
        }
        let mut delay = self.retry.base_delay;
        for attempt in 1..=self.retry.attempts.max(1) {
            let mut emitted = false;
            let result = self
                .attempt(req, &mut |ev| {
                    emitted = true;
                    on_event(ev)
                })
                .await;
            match result {
                Ok(mut turn) => {
                    turn.attempts = attempt;
                    return Ok(turn);
                }
                Err(e) if e.retryable() && attempt < self.retry.attempts => {
                    tracing::warn!(provider = %self.name, attempt, error = %e, "model request failed; retrying");
                    if emitted {
                        on_event(StreamEvent::Restart {
                            attempt: attempt + 1,
                            reason: e.to_string(),
                        });
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.retry.max_delay);
                }
                Err(e) => return Err(e),
            }
        }
        Err(ProviderError::Config("no attempt was made".into()))
    }

    async fn attempt(
        &self,
        req: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Turn, ProviderError> {
        let (url, body) = match self.kind {
            ProviderKind::Anthropic => (
                format!("{}/v1/messages", self.base_url),
                anthropic_body(req),
            ),
            ProviderKind::OpenAi => (
                format!("{}/chat/completions", self.base_url),
                openai_body(req),
            ),
        };
        let mut rb = self
            .http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        match (self.kind, &self.api_key) {
            (ProviderKind::Anthropic, Some(k)) => {
                rb = rb
                    .header("x-api-key", k)
                    .header("anthropic-version", "2023-06-01");
            }
            (ProviderKind::OpenAi, Some(k)) => rb = rb.bearer_auth(k),
            _ => {}
        }
        let net = |e: reqwest::Error| ProviderError::Network {
            provider: self.name.clone(),
            message: e.to_string(),
        };
        let mut resp = rb.body(body.to_string()).send().await.map_err(net)?;
        let status = resp.status().as_u16();
        if status != 200 {
            let text = resp.text().await.unwrap_or_default();
            let message = error_message(&text);
            return Err(match status {
                401 | 403 => ProviderError::Rejected {
                    provider: self.name.clone(),
                    status,
                    message,
                },
                408 | 409 | 429 | 500..=599 => ProviderError::Status {
                    provider: self.name.clone(),
                    status,
                    message,
                    retryable: true,
                },
                _ => ProviderError::Status {
                    provider: self.name.clone(),
                    status,
                    message,
                    retryable: false,
                },
            });
        }
        let mut decoder = SseDecoder::default();
        let mut state = match self.kind {
            ProviderKind::Anthropic => Decoder::Anthropic(AnthropicStream::default()),
            ProviderKind::OpenAi => Decoder::OpenAi(OpenAiStream::default()),
        };
        while let Some(chunk) = resp.chunk().await.map_err(net)? {
            let events = decoder
                .feed(&chunk)
                .map_err(|e| self.protocol(e.to_string()))?;
            for ev in events {
                let done = match &mut state {
                    Decoder::Anthropic(s) => {
                        s.on_event(&ev, on_event).map_err(|e| self.classify(e))?
                    }
                    Decoder::OpenAi(s) => {
                        s.on_event(&ev, on_event).map_err(|e| self.classify(e))?
                    }
                };
                if done {
                    return Ok(state.finish());
                }
            }
        }
        match state {
            // OpenAI-compatible servers may end without `[DONE]`; a finish reason suffices.
            Decoder::OpenAi(s) if !s.turn.stop_reason.is_empty() => Ok(s.finish()),
            _ => Err(ProviderError::Network {
                provider: self.name.clone(),
                message: "the stream ended before the turn did".into(),
            }),
        }
    }

    fn protocol(&self, message: String) -> ProviderError {
        ProviderError::Protocol {
            provider: self.name.clone(),
            message,
        }
    }

    fn classify(&self, e: StreamFailure) -> ProviderError {
        match e {
            StreamFailure::Remote { kind, message } => {
                let retryable = matches!(
                    kind.as_str(),
                    "overloaded_error"
                        | "rate_limit_error"
                        | "api_error"
                        | "server_error"
                        | "timeout"
                );
                ProviderError::Status {
                    provider: self.name.clone(),
                    status: 0,
                    message: format!("{kind}: {message}"),
                    retryable,
                }
            }
            StreamFailure::Malformed(m) => self.protocol(m),
        }
    }
}

fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.chars().take(300).collect())
}

enum StreamFailure {
    Remote { kind: String, message: String },
    Malformed(String),
}

enum Decoder {
    Anthropic(AnthropicStream),
    OpenAi(OpenAiStream),
}

impl Decoder {
    fn finish(self) -> Turn {
        match self {
            Decoder::Anthropic(s) => s.turn,
            Decoder::OpenAi(s) => s.finish(),
        }
    }
}

fn parse(data: &str) -> Result<Value, StreamFailure> {
    serde_json::from_str(data)
        .map_err(|e| StreamFailure::Malformed(format!("bad JSON in event: {e}")))
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path).and_then(Value::as_u64).unwrap_or(0)
}

/// Parses a tool call's reassembled arguments, reports the call and adds it to the turn.
fn finish_call(
    turn: &mut Turn,
    out: &mut dyn FnMut(StreamEvent),
    id: String,
    name: String,
    args: &str,
) -> Result<(), StreamFailure> {
    let input = if args.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(args).map_err(|e| {
            StreamFailure::Malformed(format!("arguments of tool call {id} are not JSON: {e}"))
        })?
    };
    let call = ToolCall { id, name, input };
    out(StreamEvent::ToolCall(call.clone()));
    turn.tool_calls.push(call);
    Ok(())
}

/// Anthropic: content blocks by index; tool input as `input_json_delta` fragments.
#[derive(Default)]
struct AnthropicStream {
    turn: Turn,
    blocks: BTreeMap<u64, (String, String, String)>, // index → (id, name, partial json)
}

impl AnthropicStream {
    fn on_event(
        &mut self,
        ev: &SseEvent,
        out: &mut dyn FnMut(StreamEvent),
    ) -> Result<bool, StreamFailure> {
        let v = parse(&ev.data)?;
        match v["type"].as_str().unwrap_or(ev.event.as_str()) {
            "message_start" => {
                let m = &v["message"]["usage"];
                self.turn.usage.input_tokens = u(m, "/input_tokens");
                self.turn.usage.cache_read_tokens = u(m, "/cache_read_input_tokens");
                self.turn.usage.cache_write_tokens = u(m, "/cache_creation_input_tokens");
                self.turn.usage.output_tokens = u(m, "/output_tokens");
            }
            "content_block_start" => {
                let b = &v["content_block"];
                if b["type"] == "tool_use" {
                    let idx = u(&v, "/index");
                    let id = b["id"].as_str().unwrap_or_default().to_string();
                    let name = b["name"].as_str().unwrap_or_default().to_string();
                    self.blocks.insert(idx, (id, name, String::new()));
                }
            }
            "content_block_delta" => {
                let d = &v["delta"];
                match d["type"].as_str() {
                    Some("text_delta") => {
                        let t = d["text"].as_str().unwrap_or_default();
                        self.turn.text.push_str(t);
                        out(StreamEvent::TextDelta(t.to_string()));
                    }
                    Some("input_json_delta") => {
                        let idx = u(&v, "/index");
                        let Some(block) = self.blocks.get_mut(&idx) else {
                            return Err(StreamFailure::Malformed(format!(
                                "tool input for unknown block {idx}"
                            )));
                        };
                        block
                            .2
                            .push_str(d["partial_json"].as_str().unwrap_or_default());
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some((id, name, json)) = self.blocks.remove(&u(&v, "/index")) {
                    finish_call(&mut self.turn, out, id, name, &json)?;
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.turn.stop_reason = r.to_string();
                }
                if v.pointer("/usage/output_tokens").is_some() {
                    self.turn.usage.output_tokens = u(&v, "/usage/output_tokens");
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                return Err(StreamFailure::Remote {
                    kind: v
                        .pointer("/error/type")
                        .and_then(Value::as_str)
                        .unwrap_or("error")
                        .to_string(),
                    message: v
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
            }
            _ => {} // ping and future event types
        }
        Ok(false)
    }
}

/// OpenAI: `choices[0].delta` carries text and `tool_calls[i]` fragments by index.
#[derive(Default)]
struct OpenAiStream {
    turn: Turn,
    calls: BTreeMap<u64, (String, String, String)>,
}

impl OpenAiStream {
    fn on_event(
        &mut self,
        ev: &SseEvent,
        out: &mut dyn FnMut(StreamEvent),
    ) -> Result<bool, StreamFailure> {
        if ev.data.trim() == "[DONE]" {
            self.flush_calls(out)?;
            return Ok(true);
        }
        let v = parse(&ev.data)?;
        if let Some(err) = v.get("error") {
            return Err(StreamFailure::Remote {
                kind: err["type"]
                    .as_str()
                    .or_else(|| err["code"].as_str())
                    .unwrap_or("server_error")
                    .to_string(),
                message: err["message"].as_str().unwrap_or_default().to_string(),
            });
        }
        if let Some(usage) = v.get("usage").filter(|u| !u.is_null()) {
            let cached = u(usage, "/prompt_tokens_details/cached_tokens");
            self.turn.usage.input_tokens = u(usage, "/prompt_tokens").saturating_sub(cached);
            self.turn.usage.cache_read_tokens = cached;
            self.turn.usage.output_tokens = u(usage, "/completion_tokens");
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.turn.text.push_str(t);
            out(StreamEvent::TextDelta(t.to_string()));
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let idx = u(tc, "/index");
            let entry = self.calls.entry(idx).or_default();
            if let Some(id) = tc["id"].as_str() {
                entry.0 = id.to_string();
            }
            if let Some(name) = tc.pointer("/function/name").and_then(Value::as_str) {
                entry.1.push_str(name);
            }
            if let Some(args) = tc.pointer("/function/arguments").and_then(Value::as_str) {
                entry.2.push_str(args);
            }
        }
        if let Some(r) = choice["finish_reason"].as_str() {
            self.turn.stop_reason = r.to_string();
            self.flush_calls(out)?;
        }
        Ok(false)
    }

    fn flush_calls(&mut self, out: &mut dyn FnMut(StreamEvent)) -> Result<(), StreamFailure> {
        for (_, (id, name, args)) in std::mem::take(&mut self.calls) {
            finish_call(&mut self.turn, out, id, name, &args)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Turn {
        let mut sink = |_| {};
        let _ = self.flush_calls(&mut sink);
        self.turn
    }
}

fn anthropic_body(req: &ChatRequest) -> Value {
    let mut system = vec![
        json!({ "type": "text", "text": req.system, "cache_control": { "type": "ephemeral" } }),
    ];
    if !req.system_dynamic.is_empty() {
        system.push(json!({ "type": "text", "text": req.system_dynamic }));
    }
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m
                .content
                .iter()
                .map(|c| match c {
                    Content::Text(t) => json!({ "type": "text", "text": t }),
                    Content::ToolUse { id, name, input } => {
                        json!({ "type": "tool_use", "id": id, "name": name, "input": input })
                    }
                    Content::ToolResult { id, content, is_error } => {
                        json!({ "type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error })
                    }
                })
                .collect();
            json!({ "role": if m.role == Role::User { "user" } else { "assistant" }, "content": content })
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "system": system,
        "messages": messages,
        "stream": true,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
            .collect();
    }
    body
}

fn openai_body(req: &ChatRequest) -> Value {
    let mut system = req.system.clone();
    if !req.system_dynamic.is_empty() {
        system.push_str("\n\n");
        system.push_str(&req.system_dynamic);
    }
    let mut messages = vec![json!({ "role": "system", "content": system })];
    for m in &req.messages {
        let mut text = String::new();
        let mut calls = Vec::new();
        for c in &m.content {
            match c {
                Content::Text(t) => text.push_str(t),
                Content::ToolUse { id, name, input } => calls.push(json!({
                    "id": id, "type": "function",
                    "function": { "name": name, "arguments": input.to_string() }
                })),
                Content::ToolResult { id, content, .. } => {
                    messages
                        .push(json!({ "role": "tool", "tool_call_id": id, "content": content }));
                }
            }
        }
        match m.role {
            Role::Assistant => {
                let mut msg = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) } });
                if !calls.is_empty() {
                    msg["tool_calls"] = json!(calls);
                }
                messages.push(msg);
            }
            Role::User if !text.is_empty() => {
                messages.push(json!({ "role": "user", "content": text }))
            }
            Role::User => {}
        }
    }
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({ "type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema } })
            })
            .collect();
    }
    body
}
