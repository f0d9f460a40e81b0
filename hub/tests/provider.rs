//! Providers against a fake model server on 127.0.0.1 that answers with each provider's
//! real streaming wire format, byte for byte, cut into small HTTP chunks: text deltas,
//! tool-call arguments split across many events, several tool calls in one turn, an
//! overloaded error in the middle of a stream (retried), a rate limit (retried), a
//! rejected key (not retried) and a missing key.

mod common;

use std::time::Duration;

use common::{serve, Reply};
use hearth_hub::agent::provider::{
    ChatRequest, Content, Message, ProviderClient, ProviderError, ProviderKind, Retry, Role,
    StreamEvent, ToolSpec,
};
use serde_json::json;

fn request() -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        system: "You are Hearth.".into(),
        system_dynamic: "Today is 2026-11-23.".into(),
        messages: vec![Message {
            role: Role::User,
            content: vec![Content::Text("Note that I like tea".into())],
        }],
        tools: vec![ToolSpec {
            name: "note_create".into(),
            description: "Create a note".into(),
            input_schema: json!({"type": "object", "properties": {"title": {"type": "string"}}}),
        }],
        max_tokens: 1024,
    }
}

fn fast_retry() -> Retry {
    Retry {
        attempts: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
    }
}

/// An Anthropic Messages stream: text, then two tool_use blocks whose input arrives in
/// many `input_json_delta` fragments.
fn anthropic_stream() -> String {
    let mut s = String::new();
    let mut ev = |name: &str, data: serde_json::Value| {
        s.push_str(&format!("event: {name}\ndata: {data}\n\n"))
    };
    ev(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"test-model","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"cache_creation_input_tokens":0,"cache_read_input_tokens":800,"output_tokens":1}}}),
    );
    ev(
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    );
    ev("ping", json!({"type":"ping"}));
    for t in ["Saving ", "that — ", "☕ noted."] {
        ev(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":t}}),
        );
    }
    ev(
        "content_block_stop",
        json!({"type":"content_block_stop","index":0}),
    );
    for (idx, id, title) in [(1, "toolu_01", "Tea"), (2, "toolu_02", "Biscuits")] {
        ev(
            "content_block_start",
            json!({"type":"content_block_start","index":idx,"content_block":{"type":"tool_use","id":id,"name":"note_create","input":{}}}),
        );
        let args = json!({"title": title, "content": "likes it"}).to_string();
        for piece in args.as_bytes().chunks(3) {
            let piece = String::from_utf8_lossy(piece).into_owned();
            ev(
                "content_block_delta",
                json!({"type":"content_block_delta","index":idx,"delta":{"type":"input_json_delta","partial_json":piece}}),
            );
        }
        ev(
            "content_block_stop",
            json!({"type":"content_block_stop","index":idx}),
        );
    }
    ev(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":87}}),
    );
    ev("message_stop", json!({"type":"message_stop"}));
    s
}

#[tokio::test]
async fn anthropic_text_and_split_tool_calls() {
    let (base, fake) = serve(vec![Reply::Sse(anthropic_stream())]).await;
    let client = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        &base,
        Some("sk-test".into()),
    )
    .expect("client")
    .with_retry(fast_retry());
    let mut events = Vec::new();
    let turn = client
        .stream(&request(), |e| events.push(e))
        .await
        .expect("turn");
    assert_eq!(turn.text, "Saving that — ☕ noted.");
    assert_eq!(turn.stop_reason, "tool_use");
    assert_eq!(turn.tool_calls.len(), 2);
    assert_eq!(
        turn.tool_calls[1].input,
        json!({"title": "Biscuits", "content": "likes it"})
    );
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.cache_read_tokens,
            turn.usage.output_tokens
        ),
        (120, 800, 87)
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
            .count(),
        3
    );
    assert!(
        matches!(&events[3], StreamEvent::ToolCall(c) if c.id == "toolu_01" && c.input["title"] == "Tea")
    );
    let reqs = fake.requests.lock().expect("lock");
    let (headers, body) = &reqs[0];
    assert_eq!(headers["x-api-key"], "sk-test");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["system"][0]["cache_control"]["type"], "ephemeral",
        "the static prefix is cached"
    );
    assert_eq!(body["system"][1]["text"], "Today is 2026-11-23.");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
}

#[tokio::test]
async fn anthropic_overloaded_mid_stream_is_retried() {
    let broken = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half a \"}}\n\n\
event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
        .to_string();
    let (base, fake) = serve(vec![Reply::Sse(broken), Reply::Sse(anthropic_stream())]).await;
    let client = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        &base,
        Some("k".into()),
    )
    .expect("client")
    .with_retry(fast_retry());
    let mut events = Vec::new();
    let turn = client
        .stream(&request(), |e| events.push(e))
        .await
        .expect("retried turn");
    assert_eq!(turn.attempts, 2);
    assert_eq!(
        turn.text, "Saving that — ☕ noted.",
        "the failed try's text is not in the turn"
    );
    assert!(events.iter().any(|e| matches!(e, StreamEvent::Restart { attempt: 2, reason } if reason.contains("overloaded"))));
    assert_eq!(fake.requests.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn rejected_and_missing_keys_are_clear_and_not_retried() {
    let (base, fake) = serve(vec![Reply::Status(
        401,
        json!({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}).to_string(),
    )])
    .await;
    let client = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        &base,
        Some("bad".into()),
    )
    .expect("client")
    .with_retry(fast_retry());
    let err = client
        .stream(&request(), |_| {})
        .await
        .expect_err("rejected");
    assert!(
        matches!(err, ProviderError::Rejected { status: 401, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("invalid x-api-key"), "{err}");
    assert_eq!(
        fake.requests.lock().expect("lock").len(),
        1,
        "a rejected key is not retried"
    );

    let client =
        ProviderClient::new("anthropic", ProviderKind::Anthropic, &base, None).expect("client");
    let err = client
        .stream(&request(), |_| {})
        .await
        .expect_err("missing");
    assert_eq!(
        err.to_string(),
        "no API key for anthropic: set it in the hub's settings"
    );
}

/// An OpenAI Chat Completions stream with two tool calls whose arguments arrive in pieces.
fn openai_stream() -> String {
    let mut s = String::new();
    let mut data = |v: serde_json::Value| s.push_str(&format!("data: {v}\n\n"));
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| json!({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795400000,"model":"test-model","choices":[{"index":0,"delta":delta,"logprobs":null,"finish_reason":finish}]});
    data(chunk(
        json!({"role":"assistant","content":"","refusal":null}),
        json!(null),
    ));
    data(chunk(json!({"content":"On it."}), json!(null)));
    for (idx, id, title) in [(0, "call_a", "Tea"), (1, "call_b", "Scones")] {
        data(chunk(
            json!({"tool_calls":[{"index":idx,"id":id,"type":"function","function":{"name":"note_create","arguments":""}}]}),
            json!(null),
        ));
        let args = json!({"title": title}).to_string();
        for piece in args.as_bytes().chunks(4) {
            let piece = String::from_utf8_lossy(piece).into_owned();
            data(chunk(
                json!({"tool_calls":[{"index":idx,"function":{"arguments":piece}}]}),
                json!(null),
            ));
        }
    }
    data(chunk(json!({}), json!("tool_calls")));
    data(
        json!({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795400000,"model":"test-model","choices":[],"usage":{"prompt_tokens":300,"completion_tokens":40,"total_tokens":340,"prompt_tokens_details":{"cached_tokens":256}}}),
    );
    s.push_str("data: [DONE]\n\n");
    s
}

#[tokio::test]
async fn openai_tool_call_deltas_after_a_rate_limit() {
    let (base, fake) = serve(vec![
        Reply::Status(
            429,
            json!({"error":{"message":"Rate limit reached","type":"requests"}}).to_string(),
        ),
        Reply::Sse(openai_stream()),
    ])
    .await;
    let client = ProviderClient::new(
        "openai",
        ProviderKind::OpenAi,
        &format!("{base}/v1"),
        Some("sk-o".into()),
    )
    .expect("client")
    .with_retry(fast_retry());
    let mut events = Vec::new();
    let turn = client
        .stream(&request(), |e| events.push(e))
        .await
        .expect("turn");
    assert_eq!(turn.attempts, 2);
    assert_eq!(turn.text, "On it.");
    assert_eq!(turn.stop_reason, "tool_calls");
    let titles: Vec<&str> = turn
        .tool_calls
        .iter()
        .filter_map(|c| c.input["title"].as_str())
        .collect();
    assert_eq!(titles, ["Tea", "Scones"]);
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.cache_read_tokens,
            turn.usage.output_tokens
        ),
        (44, 256, 40)
    );
    let reqs = fake.requests.lock().expect("lock");
    assert_eq!(reqs[1].0["authorization"], "Bearer sk-o");
    assert_eq!(reqs[1].1["messages"][0]["role"], "system");
    assert_eq!(reqs[1].1["tools"][0]["function"]["name"], "note_create");
    assert_eq!(reqs[1].1["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn openai_compatible_server_without_a_key() {
    let (base, fake) = serve(vec![Reply::Sse(openai_stream())]).await;
    let client = ProviderClient::new("ollama", ProviderKind::OpenAi, &format!("{base}/v1"), None)
        .expect("client");
    let turn = client.stream(&request(), |_| {}).await.expect("turn");
    assert_eq!(turn.tool_calls.len(), 2);
    assert!(fake.requests.lock().expect("lock")[0]
        .0
        .get("authorization")
        .is_none());
}

#[tokio::test]
async fn embeddings_from_an_openai_compatible_server() {
    let body = json!({"object":"list","data":[
        {"object":"embedding","index":1,"embedding":[0.5,-0.25]},
        {"object":"embedding","index":0,"embedding":[0.1,0.2]}
    ],"model":"nomic-embed-text","usage":{"prompt_tokens":4,"total_tokens":4}});
    let (base, fake) = serve(vec![common::Reply::Status(200, body.to_string())]).await;
    let client = ProviderClient::new("ollama", ProviderKind::OpenAi, &format!("{base}/v1"), None)
        .expect("client");
    let v = client
        .embed("nomic-embed-text", &["tea".into(), "scones".into()])
        .await
        .expect("embed");
    assert_eq!(
        v,
        vec![vec![0.1, 0.2], vec![0.5, -0.25]],
        "vectors come back in input order"
    );
    assert_eq!(
        fake.requests.lock().expect("lock")[0].1["input"][1],
        "scones"
    );
    let anthropic = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        &base,
        Some("k".into()),
    )
    .expect("client");
    assert!(anthropic.embed("x", &["a".into()]).await.is_err());
}
