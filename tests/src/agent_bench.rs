//! `hearth-bench agent`: the agent loop's own cost, measured against a fake Anthropic
//! server on 127.0.0.1 that answers instantly in the real streaming wire format.
//!
//! Reference figures come from calling the same server directly with the provider
//! client in the same process; the agent's figures are taken through `Agent::invoke`
//! (prompt assembly, history and transcript in SQLite, tool execution against the
//! document store, events). Printed as `name value unit` lines.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{body::Body, response::Response, routing::post, Router};
use hearth_hub::agent::{
    provider::{ChatRequest, Content, Message, ProviderClient, ProviderKind, Role, StreamEvent},
    runner::{Agent, AgentConfig, AgentEvent},
};
use hearth_sync::{DocumentStore, Project};
use serde_json::{json, Value};

/// An Anthropic Messages event stream, byte for byte as the API sends it.
pub fn anthropic_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or("message")
            )
        })
        .collect()
}

/// A turn that answers with `text` in two deltas.
pub fn anthropic_text_turn(text: &str) -> String {
    let (a, b) = text.split_at(text.len() / 2);
    anthropic_sse(&[
        json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":a}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":b}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}),
        json!({"type":"message_stop"}),
    ])
}

/// A turn that calls tool `name` with `args`, the arguments split across two deltas.
pub fn anthropic_tool_turn(id: &str, name: &str, args: &Value) -> String {
    let args = args.to_string();
    let (a, b) = args.split_at(args.len() / 3);
    anthropic_sse(&[
        json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":a}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":b}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":10}}),
        json!({"type":"message_stop"}),
    ])
}

/// Answers by content, so concurrent channels need no script: a user message asking for
/// a tool gets a tool call; anything else (including a tool result) gets text.
async fn answer(body: String) -> Response {
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let last = v["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let wants_tool = last["role"] == "user" && last.to_string().contains("use a tool");
    let body = if wants_tool {
        anthropic_tool_turn("t1", "notes_query", &json!({"limit": 5}))
    } else {
        anthropic_text_turn("Hello there.")
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap_or_default()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

fn figure(name: &str, value: f64, unit: &str) {
    println!("{name} {value:.3} {unit}");
}

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        model: "claude-sonnet-4-5".into(),
        system: "You are Hearth.".into(),
        system_dynamic: String::new(),
        messages: vec![Message {
            role: Role::User,
            content: vec![Content::Text(text.into())],
        }],
        tools: Vec::new(),
        max_tokens: 256,
    }
}

/// Runs the agent benchmark with `iterations` samples per figure.
pub async fn run(iterations: usize) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, Router::new().route("/v1/messages", post(answer))).await;
    });
    let provider = ProviderClient::new(
        "anthropic",
        ProviderKind::Anthropic,
        &base,
        Some("bench".into()),
    )?;
    let dir = tempfile::tempdir()?;
    let store = DocumentStore::open(dir.path().join("hearth.db"))?;
    let project = store
        .create(Project {
            name: "general".into(),
            ..Project::default()
        })
        .await?
        .id;
    let agent = Arc::new(Agent::new(
        store,
        provider.clone(),
        AgentConfig::default(),
        &dir.path().join("hub.db"),
    )?);

    // First token: direct provider call vs an agent invocation.
    let mut direct = Vec::new();
    let mut direct_turn = Vec::new();
    for _ in 0..iterations {
        let t0 = Instant::now();
        let mut first = None;
        provider
            .stream(&request("hi"), |ev| {
                if first.is_none() && matches!(ev, StreamEvent::TextDelta(_)) {
                    first = Some(t0.elapsed());
                }
            })
            .await?;
        direct_turn.push(t0.elapsed().as_secs_f64() * 1e3);
        direct.push(first.unwrap_or_default().as_secs_f64() * 1e3);
    }
    let mut via_agent = Vec::new();
    let mut agent_turn = Vec::new();
    for i in 0..iterations {
        let mut events = agent.subscribe();
        let channel = format!("ft{}", i % 4);
        let t0 = Instant::now();
        let a = agent.clone();
        let ch = channel.clone();
        let run = tokio::spawn(async move { a.invoke(&ch, project, "hi").await });
        let mut first = None;
        while let Ok(ev) = events.recv().await {
            match ev {
                AgentEvent::TextDelta { channel: c, .. } if c == channel && first.is_none() => {
                    first = Some(t0.elapsed())
                }
                AgentEvent::Finished { channel: c, .. } if c == channel => break,
                _ => {}
            }
        }
        run.await??;
        agent_turn.push(t0.elapsed().as_secs_f64() * 1e3);
        via_agent.push(first.unwrap_or_default().as_secs_f64() * 1e3);
    }
    for v in [
        &mut direct,
        &mut via_agent,
        &mut direct_turn,
        &mut agent_turn,
    ] {
        v.sort_by(f64::total_cmp);
    }
    figure("agent_direct_first_token_p50", pct(&direct, 0.5), "ms");
    figure("agent_first_token_p50", pct(&via_agent, 0.5), "ms");
    figure("agent_first_token_p99", pct(&via_agent, 0.99), "ms");
    figure(
        "agent_added_first_token_p50",
        pct(&via_agent, 0.5) - pct(&direct, 0.5),
        "ms",
    );

    // A tool round: two model calls with a tool run between them.
    let mut direct_round = Vec::new();
    for _ in 0..iterations {
        let t0 = Instant::now();
        provider
            .stream(&request("please use a tool"), |_| {})
            .await?;
        provider.stream(&request("tool result: []"), |_| {}).await?;
        direct_round.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let mut agent_round = Vec::new();
    for i in 0..iterations {
        let t0 = Instant::now();
        let out = agent
            .invoke(&format!("tool{}", i % 4), project, "please use a tool")
            .await?;
        anyhow::ensure!(
            out.steps == 2,
            "expected one tool round, got {} steps",
            out.steps
        );
        agent_round.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    direct_round.sort_by(f64::total_cmp);
    agent_round.sort_by(f64::total_cmp);
    figure("agent_direct_two_calls_p50", pct(&direct_round, 0.5), "ms");
    figure("agent_tool_round_turn_p50", pct(&agent_round, 0.5), "ms");
    figure(
        "agent_added_per_tool_round_p50",
        pct(&agent_round, 0.5) - pct(&direct_round, 0.5),
        "ms",
    );

    // Throughput: 50 channels at once, each running turns back to back.
    let channels = 50;
    let per_channel = (iterations / 10).max(4);
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..channels {
        let a = agent.clone();
        set.spawn(async move {
            for _ in 0..per_channel {
                a.invoke(&format!("load{c}"), project, "hi").await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let agent_tps = (channels * per_channel) as f64 / t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..channels {
        let p = provider.clone();
        set.spawn(async move {
            for _ in 0..per_channel {
                p.stream(&request("hi"), |_| {}).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let direct_tps = (channels * per_channel) as f64 / t0.elapsed().as_secs_f64();
    figure("agent_turns_per_second_50_channels", agent_tps, "turns/s");
    figure(
        "agent_direct_calls_per_second_50_concurrent",
        direct_tps,
        "calls/s",
    );
    figure("agent_throughput_over_direct", agent_tps / direct_tps, "x");
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
