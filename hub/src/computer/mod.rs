//! The built-in computer plugin: the agent's hands on the home machine, confined to the
//! project's directory (`<home>/projects/<project id>`).
//!
//! - [`files`]: read (line windows), write, edit by exact replacement, delete, copy,
//!   move, list and search, every path resolved beneath the project directory;
//! - [`terminal`]: commands through `sh -c` in the project directory, to completion
//!   (timeout, output cap) or in the background (rolling buffer), each in its own
//!   process group with a clean non-interactive environment;
//! - [`web`]: `web_fetch`, an HTTP(S) GET to readable text that refuses non-public
//!   addresses unless the owner allows them.
//!
//! Handlers only do the work: approvals, taint (untrusted text read this turn) and the
//! audit log belong to the agent's runner, which reads each tool's risk and effect from
//! its descriptor. This plugin must never reach a path outside the project directory,
//! never hand a process the hub's own environment, and never show the model a secret's
//! value.

pub mod files;
mod html;
pub mod terminal;
pub mod web;

use std::{
    net::IpAddr,
    sync::{Arc, OnceLock},
    time::Duration,
};

/// The bounds every tool keeps to.
#[derive(Debug, Clone)]
pub struct ComputerLimits {
    /// Lines a file read (or a background process read) returns unless told otherwise.
    pub read_lines: u64,
    /// Bytes of text one file read returns at most.
    pub read_bytes: usize,
    /// Bytes one write (or an edited file) may have.
    pub write_bytes: usize,
    /// Entries a list returns at most.
    pub list_entries: usize,
    /// Results a search returns unless told otherwise (at most five times this).
    pub search_hits: usize,
    /// Files bigger than this are skipped by a content search.
    pub search_file_bytes: u64,
    /// Directory entries a list, search or copy visits at most.
    pub walk_entries: usize,
    /// Bytes of output a command run (or a background read) returns at most.
    pub output_bytes: usize,
    /// A command's timeout unless told otherwise.
    pub run_timeout: Duration,
    /// The longest timeout a command may ask for.
    pub run_timeout_max: Duration,
    /// Background processes running at once, across all projects.
    pub background_running: usize,
    /// Lines a background process's buffer keeps.
    pub background_lines: usize,
    /// Bytes a background process's buffer keeps.
    pub background_bytes: usize,
    /// Finished background processes kept for reading.
    pub background_kept_finished: usize,
    /// How long a finished background process is kept for reading.
    pub background_keep_for: Duration,
    /// Bytes of a fetched body read at most.
    pub web_body_bytes: usize,
    /// Characters of fetched text returned at most.
    pub web_text_chars: usize,
    /// A fetch's whole time, redirects included.
    pub web_timeout: Duration,
    /// Redirects a fetch follows at most.
    pub web_redirects: usize,
}

impl Default for ComputerLimits {
    fn default() -> Self {
        Self {
            read_lines: 2000,
            read_bytes: 256 * 1024,
            write_bytes: 10 * 1024 * 1024,
            list_entries: 1000,
            search_hits: 200,
            search_file_bytes: 10 * 1024 * 1024,
            walk_entries: 100_000,
            output_bytes: 30_000,
            run_timeout: Duration::from_secs(120),
            run_timeout_max: Duration::from_secs(600),
            background_running: 16,
            background_lines: 5000,
            background_bytes: 2 * 1024 * 1024,
            background_kept_finished: 32,
            background_keep_for: Duration::from_secs(3600),
            web_body_bytes: 2 * 1024 * 1024,
            web_text_chars: 100_000,
            web_timeout: Duration::from_secs(30),
            web_redirects: 5,
        }
    }
}

/// How the computer plugin is set up.
#[derive(Clone, Default)]
pub struct ComputerConfig {
    /// The owner allows `web_fetch` to reach private, loopback and link-local addresses.
    pub allow_private_network: bool,
    /// Resolves names for `web_fetch` instead of the system (tests); its answers are
    /// still checked.
    pub resolver: Option<Arc<dyn reqwest::dns::Resolve>>,
    /// Addresses `web_fetch` treats as public (tests serve "public" pages on 127.0.0.x).
    pub public_for_tests: Vec<IpAddr>,
    /// The bounds.
    pub limits: ComputerLimits,
}

impl std::fmt::Debug for ComputerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputerConfig")
            .field("allow_private_network", &self.allow_private_network)
            .field("resolver", &self.resolver.as_ref().map(|_| "injected"))
            .field("public_for_tests", &self.public_for_tests)
            .field("limits", &self.limits)
            .finish()
    }
}

/// The computer plugin's state: its configuration, the background processes it owns
/// and its HTTP client.
pub struct Computer {
    config: ComputerConfig,
    terminals: terminal::Terminals,
    /// Built on the first fetch; a failure to build is reported to the model.
    web: OnceLock<Result<web::WebClient, String>>,
}

impl std::fmt::Debug for Computer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Computer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Computer {
    /// A computer plugin with no processes yet.
    pub fn new(config: ComputerConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            terminals: terminal::Terminals::new(),
            web: OnceLock::new(),
        })
    }

    /// Kills every background process and waits for them to end.
    pub async fn shutdown(&self) {
        self.terminals.shutdown().await;
    }

    fn web(&self) -> Result<&web::WebClient, web::WebError> {
        self.web
            .get_or_init(|| {
                let policy = web::AddressPolicy {
                    allow_private: self.config.allow_private_network,
                    public_for_tests: self.config.public_for_tests.clone(),
                };
                web::WebClient::new(policy, self.config.resolver.clone(), &self.config.limits)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| web::WebError::Request(e.clone()))
    }
}
