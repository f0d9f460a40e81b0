//! The routes a node relays to its hub over `hearth/rpc/1`: one table, read by the hub
//! (which accepts nothing else on that ALPN) and by the node (which forwards exactly
//! these, paths relative to the API root).
//!
//! Relayed: chat, approvals, conversation history, usage, the audit log, settings
//! (runtime settings, provider keys, per-project tools and secrets), devices,
//! notifications, schedules and their runs, and the event stream. Never relayed: `/auth/*` (the owner's browser sessions belong to one
//! host) and the document routes (a node serves those from its own replica).
//!
//! This table says only *what* may travel. Who may use which route is the hub's decision
//! alone, made again for every request; nothing here decides access.

use crate::Verb;

/// How a relayed route travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayKind {
    /// The node forwards the request and streams the hub's answer back.
    Forward,
    /// The hub's numbered event stream: a node reads it with its hub link and merges it
    /// into its own event stream, so its router does not forward this path itself.
    Events,
}

/// One relayed route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayedRoute {
    /// Method.
    pub verb: Verb,
    /// Path relative to the API root, `{param}` placeholders as in the hub's router.
    pub path: &'static str,
    /// One line for people (the node's OpenAPI document shows it).
    pub summary: &'static str,
    /// Query parameters it reads.
    pub query: &'static [&'static str],
    /// How it travels.
    pub kind: RelayKind,
}

const fn fwd(
    verb: Verb,
    path: &'static str,
    summary: &'static str,
    query: &'static [&'static str],
) -> RelayedRoute {
    RelayedRoute {
        verb,
        path,
        summary,
        query,
        kind: RelayKind::Forward,
    }
}

const PAGE: &[&str] = &["limit", "offset"];

/// Every relayed route.
pub const RELAYED: &[RelayedRoute] = &[
    fwd(
        Verb::Post,
        "/chat",
        "Run a chat turn on the hub, streamed as server-sent events",
        &[],
    ),
    fwd(
        Verb::Post,
        "/chat/{conversation}/abort",
        "Stop a conversation's turn",
        &["project"],
    ),
    fwd(
        Verb::Get,
        "/approvals",
        "List approvals",
        &["waiting", "limit", "offset"],
    ),
    fwd(
        Verb::Post,
        "/approvals/{id}",
        "Decide an approval (the first answer wins)",
        &[],
    ),
    fwd(
        Verb::Get,
        "/projects/{project}/conversations",
        "List a project's conversations",
        &["archived", "limit", "offset"],
    ),
    fwd(
        Verb::Get,
        "/projects/{project}/conversations/{conversation}/messages",
        "Read a conversation's messages, newest first",
        PAGE,
    ),
    fwd(
        Verb::Patch,
        "/projects/{project}/conversations/{conversation}",
        "Archive or restore a conversation",
        &[],
    ),
    fwd(
        Verb::Get,
        "/usage",
        "Daily usage by model and project",
        &["project", "model", "since", "until", "limit", "offset"],
    ),
    fwd(
        Verb::Get,
        "/audit",
        "Read the audit log",
        &["project", "tool", "since", "until", "limit", "offset"],
    ),
    fwd(Verb::Get, "/settings", "Read runtime settings", &[]),
    fwd(Verb::Patch, "/settings", "Change runtime settings", &[]),
    fwd(
        Verb::Get,
        "/settings/providers",
        "List providers (keys masked)",
        PAGE,
    ),
    fwd(
        Verb::Put,
        "/settings/providers/{name}",
        "Set a provider key (write-only)",
        &[],
    ),
    fwd(
        Verb::Get,
        "/projects/{project}/tools",
        "A project's tool permissions",
        PAGE,
    ),
    fwd(
        Verb::Put,
        "/projects/{project}/tools/{tool}",
        "Allow or forbid a tool in a project",
        &[],
    ),
    fwd(
        Verb::Get,
        "/projects/{project}/secrets",
        "A project's secrets (masked)",
        PAGE,
    ),
    fwd(
        Verb::Put,
        "/projects/{project}/secrets/{name}",
        "Set a project secret (write-only)",
        &[],
    ),
    fwd(
        Verb::Delete,
        "/projects/{project}/secrets/{name}",
        "Delete a project secret",
        &[],
    ),
    fwd(Verb::Get, "/devices", "List paired devices", PAGE),
    fwd(Verb::Get, "/devices/pending", "List pairing requests", PAGE),
    fwd(
        Verb::Post,
        "/devices/approve",
        "Approve a pairing request",
        &[],
    ),
    fwd(Verb::Post, "/devices/deny", "Deny a pairing request", &[]),
    fwd(
        Verb::Patch,
        "/devices/{id}",
        "Rename a device or change its scope",
        &[],
    ),
    fwd(Verb::Delete, "/devices/{id}", "Revoke a device", &[]),
    fwd(
        Verb::Get,
        "/notifications",
        "List notifications, newest first, with the unread count",
        &["unread", "limit", "offset"],
    ),
    fwd(
        Verb::Post,
        "/notifications/read",
        "Mark notifications read ({ids} or {all: true})",
        &[],
    ),
    fwd(
        Verb::Get,
        "/schedules",
        "List schedules",
        &["project", "task", "limit", "offset"],
    ),
    fwd(Verb::Post, "/schedules", "Create a schedule", &[]),
    fwd(Verb::Get, "/schedules/{id}", "Read a schedule", &[]),
    fwd(Verb::Patch, "/schedules/{id}", "Change a schedule", &[]),
    fwd(Verb::Delete, "/schedules/{id}", "Remove a schedule", &[]),
    fwd(Verb::Post, "/schedules/{id}/pause", "Pause a schedule", &[]),
    fwd(
        Verb::Post,
        "/schedules/{id}/resume",
        "Resume a schedule",
        &[],
    ),
    fwd(Verb::Post, "/schedules/{id}/run", "Run a schedule now", &[]),
    fwd(Verb::Get, "/schedules/{id}/runs", "A schedule's runs", PAGE),
    fwd(Verb::Get, "/runs/{id}", "Read a scheduled run", &[]),
    fwd(
        Verb::Post,
        "/schedules/preview",
        "Say a schedule's timing in words, without saving it",
        &[],
    ),
    RelayedRoute {
        verb: Verb::Get,
        path: "/events",
        summary: "The hub's numbered event stream",
        query: &["after"],
        kind: RelayKind::Events,
    },
];

/// A request path matched against [`RELAYED`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedMatch {
    /// The route.
    pub route: &'static RelayedRoute,
    /// Its path parameters in order, percent-decoded.
    pub params: Vec<(&'static str, String)>,
}

impl RelayedMatch {
    /// The value of path parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The relayed route `verb path` (a path relative to the API root, without its query)
/// names, if any. A literal segment wins over a parameter (`/devices/pending` is not a
/// device id), and a parameter must be a non-empty segment that decodes to UTF-8.
pub fn find_relayed(verb: Verb, path: &str) -> Option<RelayedMatch> {
    let given: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let mut best: Option<(usize, RelayedMatch)> = None;
    for route in RELAYED.iter().filter(|r| r.verb == verb) {
        let template: Vec<&str> = route.path.trim_start_matches('/').split('/').collect();
        if template.len() != given.len() {
            continue;
        }
        let mut params = Vec::new();
        let mut literals = 0;
        let matched = template.iter().zip(&given).all(|(t, g)| {
            match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                Some(name) => match percent_decode(g) {
                    Some(v) if !v.is_empty() => {
                        params.push((name, v));
                        true
                    }
                    _ => false,
                },
                None => {
                    literals += 1;
                    t == g
                }
            }
        });
        if matched && best.as_ref().is_none_or(|(l, _)| literals > *l) {
            best = Some((literals, RelayedMatch { route, params }));
        }
    }
    best.map(|(_, m)| m)
}

/// `%XX` decoding of one path segment; `None` for a bad escape or bytes that are not
/// UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_their_route_with_decoded_params() {
        let m = find_relayed(Verb::Get, "/projects/0123/conversations/my%20chat/messages")
            .expect("messages");
        assert_eq!(
            m.route.path,
            "/projects/{project}/conversations/{conversation}/messages"
        );
        assert_eq!(m.param("project"), Some("0123"));
        assert_eq!(m.param("conversation"), Some("my chat"));
        let pending = find_relayed(Verb::Get, "/devices/pending").expect("pending");
        assert_eq!(pending.route.path, "/devices/pending");
        let patch = find_relayed(Verb::Patch, "/devices/pending").expect("a device id");
        assert_eq!(patch.param("id"), Some("pending"));
        assert_eq!(
            find_relayed(Verb::Get, "/events").map(|m| m.route.kind),
            Some(RelayKind::Events)
        );
    }

    #[test]
    fn documents_auth_and_malformed_paths_are_not_relayed() {
        for (verb, path) in [
            (Verb::Get, "/notes"),
            (Verb::Get, "/projects"),
            (Verb::Get, "/auth/sessions"),
            (Verb::Post, "/auth/logout"),
            (Verb::Get, "/health"),
            (Verb::Delete, "/chat"),
            (Verb::Get, "/projects//conversations"),
            (Verb::Get, "/projects/%zz/conversations"),
            (Verb::Get, "/projects/%ff/conversations"),
            (Verb::Get, "chat"),
            (Verb::Get, "/devices/"),
            (Verb::Get, "/settings/providers/x/y"),
        ] {
            assert_eq!(find_relayed(verb, path), None, "{} {path}", verb.as_str());
        }
    }

    #[test]
    fn the_table_has_no_duplicates() {
        for (i, a) in RELAYED.iter().enumerate() {
            for b in &RELAYED[i + 1..] {
                assert!(
                    (a.verb, a.path) != (b.verb, b.path),
                    "{} {} twice",
                    a.verb.as_str(),
                    a.path
                );
            }
        }
    }
}
