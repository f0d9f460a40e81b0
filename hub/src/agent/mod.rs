//! The agent: model providers ([`provider`]), the tool registry ([`registry`]) and the
//! system tools ([`tools`]), the invocation loop with approvals ([`runner`]), memory and usage.

pub mod memory;
pub mod note_ops;
pub mod provider;
pub mod records;
pub mod registry;
pub mod runner;
pub mod sse;
pub mod tools;
pub mod usage;
