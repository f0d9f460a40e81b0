//! The agent's building blocks. Today: model providers ([`provider`]) with streaming and
//! tool calls. The tool loop, system tools, approvals and memory build on this next.

pub mod memory;
pub mod note_ops;
pub mod provider;
pub mod records;
pub mod runner;
pub mod sse;
pub mod tools;
pub mod usage;
