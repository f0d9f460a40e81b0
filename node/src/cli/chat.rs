//! `hearth chat`: talk to the hub's agent from this laptop's terminal, through the running
//! `hearth run` (whose API relays `POST /chat` and `POST /approvals/{id}` to the hub over
//! `hearth/rpc/1`).
//!
//! Looks and behaves like `hearth-hub chat`: the reply's text as it streams, `⚙` tool
//! calls, `✓`/`✗` tool results, approvals asked inline (`approve <tool> <args>? [y/N]`,
//! or answered by `--yes`/`--no` for scripts). One turn with `--message`, else one turn
//! per line of standard input. With the hub out of reach it says so in one line (notes
//! and tasks still work offline); with no `hearth run` answering it says to start one.
//!
//! A binary edge (anyhow allowed). Prints only what the hub's redacted events carry and
//! never the owner token; never retries a turn (a turn has effects).

use std::{
    io::{BufRead, Write},
    path::Path,
};

use anyhow::bail;
use reqwest::Method;
use serde_json::{json, Value};

use super::client::{CallError, NodeClient};

/// The conversation a terminal chat continues unless told otherwise.
const DEFAULT_CONVERSATION: &str = "terminal";
/// How much of a tool's output is shown.
const RESULT_CHARS: usize = 200;
/// The longest line the decoder buffers (a chat event with a large tool output).
const MAX_LINE: usize = 16 * 1024 * 1024;

#[derive(clap::Args)]
pub(crate) struct ChatArgs {
    /// One message: print the reply and exit. Without it, each line of standard input is
    /// a message.
    #[arg(long, short)]
    message: Option<String>,
    /// The project to chat in, by name or id [default: `general`, or this device's scope].
    #[arg(long, short)]
    project: Option<String>,
    /// The conversation to continue.
    #[arg(long, short, default_value = DEFAULT_CONVERSATION)]
    conversation: String,
    /// Approve every tool call the agent asks about, without asking.
    #[arg(long, conflicts_with = "no")]
    yes: bool,
    /// Deny every tool call the agent asks about, without asking.
    #[arg(long)]
    no: bool,
}

/// Who answers approval requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The person at the terminal.
    Ask,
    /// `--yes`.
    Yes,
    /// `--no`.
    No,
}

/// How a turn ended.
#[derive(Debug, PartialEq, Eq)]
enum TurnEnd {
    /// It finished normally.
    Finished,
    /// It failed, or the answer stopped before it finished.
    Failed(String),
}

pub(crate) async fn run(home: &Path, args: ChatArgs) -> anyhow::Result<()> {
    let node = NodeClient::connect(home)?;
    let answer = match (args.yes, args.no) {
        (true, _) => Answer::Yes,
        (_, true) => Answer::No,
        _ => Answer::Ask,
    };
    if let Some(message) = &args.message {
        return match turn(&node, &args, message, answer).await? {
            TurnEnd::Finished => Ok(()),
            TurnEnd::Failed(why) => bail!("the turn failed: {why}"),
        };
    }
    loop {
        print!("you> ");
        std::io::stdout().flush()?;
        let Some(line) = read_stdin_line().await? else {
            println!();
            return Ok(());
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match turn(&node, &args, line, answer).await {
            // The conversation goes on; the next line may find the hub back.
            Ok(_) => {}
            Err(e @ CallError::HubUnreachable(_)) => eprintln!("{e}"),
            Err(e) => return Err(e.into()),
        }
    }
}

/// One line of standard input, `None` at its end.
async fn read_stdin_line() -> anyhow::Result<Option<String>> {
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map(|n| (n, line))
    })
    .await??;
    Ok((read.0 > 0).then_some(read.1))
}

/// Sends `message`, prints the streamed turn and answers its approvals.
async fn turn(
    node: &NodeClient,
    args: &ChatArgs,
    message: &str,
    answer: Answer,
) -> Result<TurnEnd, CallError> {
    let mut body = json!({ "message": message, "conversation": args.conversation });
    if let Some(project) = &args.project {
        body["project"] = json!(project);
    }
    let mut resp = node.send(Method::POST, "/chat", Some(&body), None).await?;
    let mut lines = EventLines::default();
    let mut out = Screen::default();
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => return Ok(cut(&mut out, &format!("the answer broke off: {e}"))),
        };
        let events = match lines.feed(&chunk) {
            Ok(events) => events,
            Err(e) => return Ok(cut(&mut out, &e)),
        };
        for event in events {
            match shown(&event) {
                Shown::Print(text) => out.print(&text),
                Shown::Approval(ask) => decide(node, &mut out, &ask, answer).await,
                Shown::End { printed, end } => {
                    out.print(&printed);
                    return Ok(end);
                }
                Shown::Nothing => {}
            }
        }
    }
    Ok(cut(&mut out, "the answer ended before the turn finished"))
}

/// Ends a turn whose answer stopped early.
fn cut(out: &mut Screen, why: &str) -> TurnEnd {
    out.print(&format!("\n[{why}]\n"));
    TurnEnd::Failed(why.to_string())
}

/// Standard output, remembering whether the cursor is at the start of a line so that a
/// block that must begin on a line of its own adds no blank line.
#[derive(Debug)]
struct Screen {
    at_line_start: bool,
}

impl Default for Screen {
    fn default() -> Self {
        Self {
            at_line_start: true,
        }
    }
}

impl Screen {
    /// What to write for `text`: its leading line end dropped at the start of a line.
    fn layout<'t>(&mut self, text: &'t str) -> &'t str {
        let text = match text.strip_prefix('\n') {
            Some(rest) if self.at_line_start => rest,
            _ => text,
        };
        if let Some(last) = text.chars().last() {
            self.at_line_start = last == '\n';
        }
        text
    }

    fn print(&mut self, text: &str) {
        let text = self.layout(text);
        let mut out = std::io::stdout();
        // A closed terminal ends the process on the next prompt; the turn goes on.
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// Asks (or answers by flag) one approval request and posts the decision.
async fn decide(node: &NodeClient, out: &mut Screen, ask: &ApprovalAsk, answer: Answer) {
    let question = format!("\napprove {} {}? [y/N] ", ask.name, ask.args);
    let approve = match answer {
        Answer::Yes => {
            out.print(&format!("{question}yes (--yes)\n"));
            true
        }
        Answer::No => {
            out.print(&format!("{question}no (--no)\n"));
            false
        }
        Answer::Ask => {
            out.print(&question);
            match read_stdin_line().await {
                Ok(Some(line)) => {
                    // The person's Enter ended the line (a pipe's does not show).
                    out.at_line_start = true;
                    is_yes(&line)
                }
                // No terminal to ask (or it closed): the safe answer.
                Ok(None) | Err(_) => {
                    out.print("\n");
                    false
                }
            }
        }
    };
    let body = json!({
        "approve": approve,
        "project": ask.project,
        "conversation": ask.conversation,
    });
    let path = format!("/approvals/{}", ask.id);
    if let Err(e) = node.call(Method::POST, &path, Some(&body)).await {
        // Another screen may have answered first; the turn goes on either way.
        out.print(&format!("\n[{e}]\n"));
    }
}

fn is_yes(line: &str) -> bool {
    matches!(line.trim(), "y" | "Y" | "yes" | "Yes" | "YES")
}

/// An approval request of the agent's.
#[derive(Debug, Clone, PartialEq)]
struct ApprovalAsk {
    id: String,
    name: String,
    args: Value,
    project: Value,
    conversation: Value,
}

/// What one chat event means for the terminal.
#[derive(Debug, PartialEq)]
enum Shown {
    /// Print this as it is (it carries its own line ends).
    Print(String),
    /// Ask whether a tool call may run.
    Approval(ApprovalAsk),
    /// The turn is over: print this, then stop.
    End { printed: String, end: TurnEnd },
    /// Nothing to show (`started`, `approval_resolved`, unknown kinds).
    Nothing,
}

/// One event (a `data:` payload) in the same words as `hearth-hub chat`.
fn shown(data: &str) -> Shown {
    let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    let str_of = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    match v["type"].as_str() {
        Some("text") => Shown::Print(str_of("text")),
        Some("restart") => Shown::Print("\n[the model was interrupted; retrying]\n".into()),
        Some("tool_call") => Shown::Print(format!(
            "\n⚙ {} {}\n",
            v["name"].as_str().unwrap_or("?"),
            v["args"]
        )),
        Some("tool_result") => {
            let mark = if v["is_error"] == true { "✗" } else { "✓" };
            let output = str_of("output");
            let mut short: String = output.chars().take(RESULT_CHARS).collect();
            if short.len() < output.len() {
                short.push('…');
            }
            Shown::Print(format!("{mark} {short}\n"))
        }
        Some("approval_requested") => Shown::Approval(ApprovalAsk {
            id: str_of("id"),
            name: v["name"].as_str().unwrap_or("?").to_string(),
            args: v["args"].clone(),
            project: v["project"].clone(),
            conversation: v["conversation"].clone(),
        }),
        Some("error") => {
            let message = str_of("message");
            Shown::End {
                printed: format!("\n[error: {message}]\n"),
                end: TurnEnd::Failed(message),
            }
        }
        Some("finished") => {
            let reason = str_of("reason");
            if reason.starts_with("error") {
                Shown::End {
                    printed: format!("\n[{reason}]\n"),
                    end: TurnEnd::Failed(reason),
                }
            } else {
                Shown::End {
                    printed: "\n".into(),
                    end: TurnEnd::Finished,
                }
            }
        }
        _ => Shown::Nothing,
    }
}

/// The `data:` payloads of a `text/event-stream`, from bytes split anywhere (inside a
/// line, a CRLF or a UTF-8 sequence). Multi-line data is joined with `\n`; comments and
/// other fields are skipped; an event ends at a blank line.
#[derive(Debug, Default)]
struct EventLines {
    buf: Vec<u8>,
    data: Option<String>,
}

impl EventLines {
    /// Feeds bytes; returns the payloads of the events they completed.
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, String> {
        self.buf.extend_from_slice(bytes);
        let mut done = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let mut line = &self.buf[start..start + nl];
            start += nl + 1;
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            if line.is_empty() {
                done.extend(self.data.take());
                continue;
            }
            let Some(value) = line.strip_prefix(b"data:") else {
                continue;
            };
            let value = String::from_utf8_lossy(value.strip_prefix(b" ").unwrap_or(value));
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.data = Some(value.into_owned()),
            }
        }
        self.buf.drain(..start);
        let held = self.buf.len() + self.data.as_ref().map_or(0, String::len);
        if held > MAX_LINE {
            return Err(format!("an event longer than {MAX_LINE} bytes"));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(parts: &[&[u8]]) -> Vec<String> {
        let mut lines = EventLines::default();
        parts
            .iter()
            .flat_map(|p| lines.feed(p).expect("within bounds"))
            .collect()
    }

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let stream = "data: {\"type\":\"text\",\"text\":\"héllo\"}\n\n: a comment\r\n\
                      event: x\r\ndata: one\r\ndata: two\r\n\r\ndata: last\n\n"
            .as_bytes();
        let whole = feed_all(&[stream]);
        assert_eq!(
            whole,
            [
                r#"{"type":"text","text":"héllo"}"#.to_string(),
                "one\ntwo".into(),
                "last".into()
            ]
        );
        // Every split point, including inside `é` and between `\r` and `\n`.
        for cut in 0..stream.len() {
            assert_eq!(feed_all(&[&stream[..cut], &stream[cut..]]), whole, "{cut}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(feed_all(&bytes), whole);
    }

    #[test]
    fn an_unfinished_event_waits_and_a_huge_one_is_refused() {
        let mut lines = EventLines::default();
        assert!(lines.feed(b"data: half").expect("ok").is_empty());
        assert_eq!(lines.feed(b"\n\n").expect("ok"), ["half"]);
        let mut lines = EventLines::default();
        assert!(lines.feed(&vec![b'x'; MAX_LINE + 1]).is_err());
    }

    #[test]
    fn events_render_like_the_hubs_chat() {
        assert_eq!(
            shown(r#"{"type":"text","text":"Hi"}"#),
            Shown::Print("Hi".into())
        );
        assert_eq!(
            shown(r#"{"type":"tool_call","name":"notes_query","args":{"limit":5}}"#),
            Shown::Print("\n⚙ notes_query {\"limit\":5}\n".into())
        );
        assert_eq!(
            shown(r#"{"type":"tool_result","name":"notes_query","output":"[]","is_error":false}"#),
            Shown::Print("✓ []\n".into())
        );
        let long = "x".repeat(RESULT_CHARS + 5);
        let v = json!({"type":"tool_result","output": long, "is_error": true}).to_string();
        assert_eq!(
            shown(&v),
            Shown::Print(format!("✗ {}…\n", "x".repeat(RESULT_CHARS)))
        );
        assert_eq!(
            shown(
                r#"{"type":"approval_requested","id":"a1","name":"notes_delete","args":{"id":"n"},"project":"p","conversation":"terminal"}"#
            ),
            Shown::Approval(ApprovalAsk {
                id: "a1".into(),
                name: "notes_delete".into(),
                args: json!({"id": "n"}),
                project: json!("p"),
                conversation: json!("terminal"),
            })
        );
        assert_eq!(
            shown(r#"{"type":"finished","reason":"done"}"#),
            Shown::End {
                printed: "\n".into(),
                end: TurnEnd::Finished
            }
        );
        assert_eq!(
            shown(r#"{"type":"finished","reason":"error: provider"}"#),
            Shown::End {
                printed: "\n[error: provider]\n".into(),
                end: TurnEnd::Failed("error: provider".into())
            }
        );
        assert_eq!(
            shown(r#"{"type":"error","message":"no key"}"#),
            Shown::End {
                printed: "\n[error: no key]\n".into(),
                end: TurnEnd::Failed("no key".into())
            }
        );
        for quiet in [
            r#"{"type":"started"}"#,
            r#"{"type":"approval_resolved","id":"a1","resolution":"approved"}"#,
            "not json",
        ] {
            assert_eq!(shown(quiet), Shown::Nothing, "{quiet}");
        }
        assert!(is_yes(" y\n") && is_yes("yes") && !is_yes("") && !is_yes("n"));
    }

    #[test]
    fn a_block_on_its_own_line_adds_no_blank_line() {
        let mut screen = Screen::default();
        assert_eq!(screen.layout("\n⚙ notes_query {}\n"), "⚙ notes_query {}\n");
        assert_eq!(screen.layout("Hello"), "Hello");
        assert_eq!(screen.layout("\n⚙ x {}\n"), "\n⚙ x {}\n");
        assert_eq!(screen.layout(""), "");
        assert_eq!(screen.layout("\n"), "");
        assert_eq!(
            screen.layout("\n"),
            "",
            "a line end at the start of a line is dropped"
        );
        assert_eq!(screen.layout("ok"), "ok");
        assert_eq!(screen.layout("\n"), "\n");
    }
}
