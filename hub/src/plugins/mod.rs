//! Plugins: what the agent can do beyond Hearth's documents, each plugin a built-in
//! (the computer) or a set of MCP servers, kept in `hub.db`.
//!
//! This module owns a plugin's host-side state (its key-value store per project); it
//! never decides which tools a project may use (the agent's permissions do) and never
//! shows a secret's value.

pub mod kv;
