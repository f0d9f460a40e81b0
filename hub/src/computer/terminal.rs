//! The computer plugin's terminal: commands run through `sh -c` in the project
//! directory, either to completion (with a timeout and an output cap) or in the
//! background (with a rolling buffer of their last lines).
//!
//! Every process gets stdin from /dev/null, its own process group (so a timeout or a
//! kill ends everything it started, not just the shell) and a clean, non-interactive
//! environment built here from a short list: never the hub's own environment, which may
//! hold provider keys. Project secrets reach a process only when the model names them.
//! A command's leftovers in its process group are ended when it exits. Background
//! processes belong to [`Terminals`], are bounded in number, and are killed at shutdown.
//! Where bubblewrap is found (Linux), a command runs confined as a plugin's MCP server
//! is: the hub's data directory is an empty tmpfs with only the project's directory put
//! back, so no command reads `hub.db`, the keys or `server.secret`.

use std::{
    collections::{BTreeMap, VecDeque},
    future::Future,
    os::unix::process::ExitStatusExt,
    path::Path,
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use nix::{
    sys::signal::{killpg, Signal},
    unistd::Pid,
};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::{
    io::{AsyncRead, AsyncReadExt},
    process::{Child, Command},
    sync::{oneshot, watch},
    task::JoinHandle,
};

use super::ComputerLimits;

/// Where `PATH` points when the hub has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long a command's output may take to drain after it exited before its process
/// group is ended, and again after that.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// How long a killed background process gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// A line longer than this is cut (the rest of it still counts as output).
const MAX_LINE_BYTES: usize = 4096;

/// The variables every process gets, in this order; nothing else from the hub's
/// environment passes. `PATH`, `HOME`, `USER`, `LANG` and `TMPDIR` are the hub's own
/// values (with fallbacks); the rest keep git, ssh, editors, pagers and package
/// managers from waiting on a terminal nobody watches.
pub(super) fn clean_env() -> Vec<(&'static str, String)> {
    let inherited = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut env = vec![
        (
            "PATH",
            inherited("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
        ),
        ("HOME", inherited("HOME").unwrap_or_else(|| "/".into())),
        (
            "LANG",
            inherited("LANG").unwrap_or_else(|| "C.UTF-8".into()),
        ),
        ("SHELL", "/bin/sh".into()),
        ("TERM", "dumb".into()),
        ("NO_COLOR", "1".into()),
        ("CI", "1".into()),
        ("DEBIAN_FRONTEND", "noninteractive".into()),
        ("PAGER", "cat".into()),
        ("GIT_PAGER", "cat".into()),
        // An editor that fails at once instead of waiting for a person.
        ("EDITOR", "false".into()),
        ("VISUAL", "false".into()),
        ("GIT_EDITOR", "false".into()),
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        // Answers every credential prompt with nothing, so it fails instead of waiting.
        ("GIT_ASKPASS", "true".into()),
        ("SSH_ASKPASS", "true".into()),
        ("SSH_ASKPASS_REQUIRE", "never".into()),
        ("GCM_INTERACTIVE", "never".into()),
        ("GIT_SSH_COMMAND", "ssh -o BatchMode=yes".into()),
    ];
    for name in ["USER", "TMPDIR"] {
        if let Some(value) = inherited(name) {
            env.push((name, value));
        }
    }
    env
}

/// Whether `name` may be set as a secret's variable: a plain shell name that does not
/// replace one of the clean environment's own variables.
pub(super) fn valid_secret_var(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !clean_env().iter().any(|(fixed, _)| *fixed == name)
        && !matches!(name, "USER" | "TMPDIR" | "LD_PRELOAD" | "LD_LIBRARY_PATH")
}

/// Why a terminal tool failed. The message goes to the model as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TerminalError {
    /// The arguments are malformed.
    #[error("{0}")]
    Invalid(String),
    /// The request cannot be done as asked (too many processes, ...).
    #[error("{0}")]
    Refused(String),
    /// No such background process in this project.
    #[error("no background process {id:?} in this project (see computer_terminal_list)")]
    NotFound {
        /// The id as given.
        id: String,
    },
    /// The shell could not be started.
    #[error("the command could not be started: {0}")]
    Spawn(std::io::Error),
}

/// A process to start: the command line, the project directory and extra variables
/// (named secrets) on top of [`clean_env`].
pub(super) struct Spec<'a> {
    pub(super) command: &'a str,
    pub(super) dir: &'a Path,
    pub(super) extra_env: Vec<(String, String)>,
    /// Run under this confinement: `(bwrap, the hub's data directory)`.
    pub(super) confine: Option<(&'a Path, &'a Path)>,
}

fn spawn(spec: &Spec<'_>) -> Result<(Child, Pid), TerminalError> {
    let shell = ["-c".to_string(), spec.command.to_string()];
    let mut command = match spec.confine {
        Some((bwrap, data_dir)) => {
            let confinement = crate::plugins::sandbox::Confinement {
                data_dir: data_dir.to_path_buf(),
                project_dir: Some(spec.dir.to_path_buf()),
                plugin_dir: spec.dir.to_path_buf(),
                cwd: spec.dir.to_path_buf(),
            };
            let mut c = Command::new(bwrap);
            c.args(crate::plugins::sandbox::bwrap_args(
                &confinement,
                "sh",
                &shell,
            ));
            c
        }
        None => {
            let mut c = Command::new("sh");
            c.args(shell);
            c
        }
    };
    command
        .current_dir(spec.dir)
        .env_clear()
        .envs(clean_env())
        .envs(spec.extra_env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, led by the shell: killing the group ends everything
        // the command started that did not leave it on purpose.
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().map_err(TerminalError::Spawn)?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .filter(|id| *id > 0)
        .map(Pid::from_raw)
        .ok_or_else(|| TerminalError::Spawn(std::io::Error::other("the shell has no pid")))?;
    Ok((child, pid))
}

fn kill_group(group: Pid, signal: Signal) {
    // ESRCH (the group is gone) is the common, harmless case.
    if let Err(e) = killpg(group, signal) {
        tracing::trace!(group = group.as_raw(), error = %e, "killpg");
    }
}

/// Where a process's output lines go.
pub(super) trait LineSink: Send {
    /// One line, without its newline, at most `MAX_LINE_BYTES`.
    fn push(&mut self, line: &[u8]);
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads a pipe to its end, splitting lines (cut at `MAX_LINE_BYTES`) into `sink`.
async fn pump<R: AsyncRead + Unpin, S: LineSink>(pipe: Option<R>, sink: &Mutex<S>) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0u8; 8192];
    let mut line = Vec::new();
    let mut cut = false;
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in buf[..n].split_inclusive(|&b| b == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(line.len());
            cut |= body.len() > room;
            line.extend_from_slice(&body[..body.len().min(room)]);
            if ends {
                if cut {
                    line.extend_from_slice(" [line cut]".as_bytes());
                }
                lock(sink).push(&line);
                line.clear();
                cut = false;
            }
        }
    }
    if !line.is_empty() {
        lock(sink).push(&line);
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct Exit {
    /// Its exit code, when it exited by itself.
    pub(super) code: Option<i32>,
    /// The signal that ended it, if one did.
    pub(super) signal: Option<i32>,
    /// Whether it was stopped (timeout or kill) rather than ending on its own.
    pub(super) stopped: bool,
}

impl Exit {
    fn new(status: Option<ExitStatus>, stopped: bool) -> Self {
        Self {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            stopped,
        }
    }
}

/// Drives a spawned process to its end: pumps its output into `sink` until it exits or
/// `stop` fires; on `stop`, ends its group (SIGTERM first when `term_grace` is given,
/// then SIGKILL); after it exits, ends what it left in its group and drains the pipes
/// for a bounded time.
async fn drive<S: LineSink>(
    mut child: Child,
    group: Pid,
    sink: &Mutex<S>,
    stop: impl Future<Output = ()>,
    term_grace: Option<Duration>,
) -> Exit {
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let pumps = async {
        tokio::join!(pump(out, sink), pump(err, sink));
    };
    tokio::pin!(pumps, stop);
    let mut pumps_done = false;
    let mut stopped = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.ok(),
            () = &mut pumps, if !pumps_done => pumps_done = true,
            () = &mut stop, if !stopped => {
                stopped = true;
                if let Some(grace) = term_grace {
                    kill_group(group, Signal::SIGTERM);
                    // Keeps reading output while the group winds down.
                    let ended = tokio::time::timeout(grace, async {
                        tokio::join!(child.wait(), async {
                            if !pumps_done { (&mut pumps).await }
                        }).0
                    }).await;
                    if let Ok(status) = ended {
                        pumps_done = true;
                        break status.ok();
                    }
                }
                kill_group(group, Signal::SIGKILL);
            }
        }
    };
    if !pumps_done && tokio::time::timeout(DRAIN_GRACE, &mut pumps).await.is_ok() {
        pumps_done = true;
    }
    // Whatever the command left running in its group goes with it.
    kill_group(group, Signal::SIGKILL);
    if !pumps_done {
        // A process that left the group still holds the pipes: stop reading them.
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut pumps).await;
    }
    Exit::new(status, stopped)
}

/// The first and last bytes of a command's output, with a count of what fell between.
pub(super) struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<Vec<u8>>,
    tail_bytes: usize,
    half: usize,
    omitted: u64,
}

impl HeadTail {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            tail_bytes: 0,
            half: cap / 2,
            omitted: 0,
        }
    }

    /// The kept text and how many bytes were left out of the middle.
    pub(super) fn finish(self) -> (String, u64) {
        let mut text = self.head;
        if self.omitted > 0 {
            text.extend_from_slice(
                format!("[... {} bytes of output omitted ...]\n", self.omitted).as_bytes(),
            );
        }
        for line in self.tail {
            text.extend_from_slice(&line);
        }
        (String::from_utf8_lossy(&text).into_owned(), self.omitted)
    }
}

impl LineSink for HeadTail {
    fn push(&mut self, line: &[u8]) {
        let mut line = line.to_vec();
        line.push(b'\n');
        if self.tail.is_empty() && self.head.len() + line.len() <= self.half {
            self.head.extend_from_slice(&line);
            return;
        }
        if line.len() > self.half {
            self.omitted += (line.len() - self.half) as u64;
            line.drain(..line.len() - self.half);
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > self.half {
            let Some(old) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= old.len();
            self.omitted += old.len() as u64;
        }
    }
}

/// What a command run to completion produced.
pub(super) struct RunOutcome {
    pub(super) exit: Exit,
    pub(super) output: String,
    pub(super) omitted: u64,
}

/// Runs a command to completion, killing its process group at `timeout`.
pub(super) async fn run_to_end(
    spec: &Spec<'_>,
    timeout: Duration,
    output_cap: usize,
) -> Result<RunOutcome, TerminalError> {
    let (child, group) = spawn(spec)?;
    let sink = Mutex::new(HeadTail::new(output_cap));
    let exit = drive(child, group, &sink, tokio::time::sleep(timeout), None).await;
    let (output, omitted) = sink
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .finish();
    Ok(RunOutcome {
        exit,
        output,
        omitted,
    })
}

/// Arguments of `computer_terminal_run`.
#[derive(Debug, Deserialize)]
pub(super) struct RunArgs {
    pub(super) command: String,
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    #[serde(default)]
    pub(super) secrets: Vec<String>,
}

/// Arguments of `computer_terminal_start`.
#[derive(Debug, Deserialize)]
pub(super) struct StartArgs {
    pub(super) command: String,
    #[serde(default)]
    pub(super) secrets: Vec<String>,
}

/// Arguments naming one background process.
#[derive(Debug, Deserialize)]
pub(super) struct IdArgs {
    pub(super) id: String,
}

/// Arguments of `computer_terminal_read`.
#[derive(Debug, Deserialize)]
pub(super) struct ReadArgs {
    id: String,
    /// First line wanted, 1-based over everything the process printed.
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
}

/// The JSON a finished run answers with.
pub(super) fn run_result(outcome: RunOutcome, timeout: Duration) -> Value {
    let mut out = json!({
        "exitCode": outcome.exit.code,
        "output": outcome.output,
        "truncated": outcome.omitted > 0,
    });
    if let Some(signal) = outcome.exit.signal {
        out["signal"] = json!(signal);
    }
    if outcome.exit.stopped {
        out["timedOut"] = json!(true);
        out["note"] = json!(format!(
            "timed out after {} s: the command and every process in its group were killed",
            timeout.as_secs()
        ));
    }
    out
}

/// A background process's buffer and end, shared by its driver and the tools.
struct BackgroundState {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
    /// Lines pushed out of the front of the buffer so far.
    dropped: u64,
    max_lines: usize,
    max_bytes: usize,
    exit: Option<Exit>,
    finished_at: Option<Instant>,
}

impl LineSink for BackgroundState {
    fn push(&mut self, line: &[u8]) {
        self.bytes += line.len();
        self.lines.push_back(line.to_vec());
        while self.lines.len() > self.max_lines || self.bytes > self.max_bytes {
            let Some(old) = self.lines.pop_front() else {
                break;
            };
            self.bytes -= old.len();
            self.dropped += 1;
        }
    }
}

/// One process started in the background.
struct Background {
    id: String,
    /// The project it was started for: only that project's tools see it.
    project: String,
    command: String,
    started_unix: u64,
    group: Pid,
    state: Arc<Mutex<BackgroundState>>,
    kill: Mutex<Option<oneshot::Sender<()>>>,
    finished: watch::Receiver<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Background {
    fn summary(&self) -> Value {
        let state = lock(&self.state);
        let mut row = json!({
            "id": self.id,
            "command": self.command,
            "startedAt": self.started_unix,
            "running": state.exit.is_none(),
            "totalLines": state.dropped + state.lines.len() as u64,
        });
        if let Some(exit) = state.exit {
            row["exitCode"] = json!(exit.code);
            if let Some(signal) = exit.signal {
                row["signal"] = json!(signal);
            }
            if exit.stopped {
                row["killed"] = json!(true);
            }
        }
        row
    }
}

/// The background processes of every project, owned by the computer plugin.
pub(super) struct Terminals {
    inner: Mutex<Registry>,
}

struct Registry {
    next_id: u64,
    processes: BTreeMap<u64, Arc<Background>>,
}

impl Terminals {
    pub(super) fn new() -> Self {
        Self {
            inner: Mutex::new(Registry {
                next_id: 1,
                processes: BTreeMap::new(),
            }),
        }
    }

    /// Forgets finished processes past their keeping time or beyond the number kept.
    fn prune(registry: &mut Registry, limits: &ComputerLimits) {
        let now = Instant::now();
        let mut finished: Vec<(Instant, u64)> = registry
            .processes
            .iter()
            .filter_map(|(key, p)| lock(&p.state).finished_at.map(|at| (at, *key)))
            .collect();
        finished.sort();
        let excess = finished
            .len()
            .saturating_sub(limits.background_kept_finished);
        for (i, (at, key)) in finished.into_iter().enumerate() {
            if i < excess || now.duration_since(at) > limits.background_keep_for {
                registry.processes.remove(&key);
            }
        }
    }

    /// Starts a process in the background and answers its id.
    pub(super) fn start(
        &self,
        project: &str,
        spec: &Spec<'_>,
        limits: &ComputerLimits,
    ) -> Result<Value, TerminalError> {
        let mut registry = lock(&self.inner);
        Self::prune(&mut registry, limits);
        let running = registry
            .processes
            .values()
            .filter(|p| lock(&p.state).exit.is_none())
            .count();
        if running >= limits.background_running {
            return Err(TerminalError::Refused(format!(
                "{running} background processes are running, the most allowed: kill one \
                 first (computer_terminal_list, computer_terminal_kill)"
            )));
        }
        let (child, group) = spawn(spec)?;
        let key = registry.next_id;
        registry.next_id += 1;
        let state = Arc::new(Mutex::new(BackgroundState {
            lines: VecDeque::new(),
            bytes: 0,
            dropped: 0,
            max_lines: limits.background_lines,
            max_bytes: limits.background_bytes,
            exit: None,
            finished_at: None,
        }));
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let (finished_tx, finished_rx) = watch::channel(false);
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            let stop = async {
                // A dropped sender (the registry forgot it) is no kill order.
                if kill_rx.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let exit = drive(child, group, &task_state, stop, Some(TERM_GRACE)).await;
            {
                let mut state = lock(&task_state);
                state.exit = Some(exit);
                state.finished_at = Some(Instant::now());
            }
            let _ = finished_tx.send(true);
        });
        let id = format!("p{key}");
        let started_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        registry.processes.insert(
            key,
            Arc::new(Background {
                id: id.clone(),
                project: project.to_owned(),
                command: spec.command.to_owned(),
                started_unix,
                group,
                state,
                kill: Mutex::new(Some(kill_tx)),
                finished: finished_rx,
                task: Mutex::new(Some(task)),
            }),
        );
        Ok(json!({ "id": id, "running": true }))
    }

    fn find(&self, project: &str, id: &str) -> Result<Arc<Background>, TerminalError> {
        let not_found = || TerminalError::NotFound { id: id.to_owned() };
        let key: u64 = id
            .strip_prefix('p')
            .and_then(|n| n.parse().ok())
            .ok_or_else(not_found)?;
        lock(&self.inner)
            .processes
            .get(&key)
            .filter(|p| p.project == project)
            .cloned()
            .ok_or_else(not_found)
    }

    /// This project's background processes, running and recently finished.
    pub(super) fn list(&self, project: &str, limits: &ComputerLimits) -> Value {
        let mut registry = lock(&self.inner);
        Self::prune(&mut registry, limits);
        let processes: Vec<Value> = registry
            .processes
            .values()
            .filter(|p| p.project == project)
            .map(|p| p.summary())
            .collect();
        json!({ "processes": processes })
    }

    /// A page of a background process's buffered output.
    pub(super) fn read(
        &self,
        project: &str,
        args: ReadArgs,
        limits: &ComputerLimits,
    ) -> Result<Value, TerminalError> {
        let process = self.find(project, &args.id)?;
        let mut out = process.summary();
        let state = lock(&process.state);
        let first_kept = state.dropped + 1;
        let total = state.dropped + state.lines.len() as u64;
        let wanted = args.offset.unwrap_or(first_kept).max(1);
        let offset = wanted.max(first_kept);
        let limit = args.limit.unwrap_or(limits.read_lines).max(1);
        let mut text = Vec::new();
        let mut returned = 0u64;
        let skip = usize::try_from(offset - first_kept).unwrap_or(usize::MAX);
        for line in state.lines.iter().skip(skip) {
            if returned >= limit || text.len() + line.len() + 1 > limits.output_bytes {
                break;
            }
            text.extend_from_slice(line);
            text.push(b'\n');
            returned += 1;
        }
        drop(state);
        out["offset"] = json!(offset);
        out["lines"] = json!(returned);
        out["nextOffset"] = json!(offset + returned);
        out["truncated"] = json!(offset + returned <= total);
        out["droppedLines"] = json!(first_kept - 1);
        out["text"] = json!(String::from_utf8_lossy(&text));
        if wanted < first_kept {
            out["note"] = json!(format!(
                "lines before {first_kept} were dropped from the buffer (it keeps the last {})",
                limits.background_lines
            ));
        }
        Ok(out)
    }

    /// Kills a background process's group (SIGTERM, then SIGKILL) and waits for its end.
    pub(super) async fn kill(&self, project: &str, id: &str) -> Result<Value, TerminalError> {
        let process = self.find(project, id)?;
        let order = lock(&process.kill).take();
        if let Some(order) = order {
            let _ = order.send(());
        }
        let mut finished = process.finished.clone();
        let waited = TERM_GRACE + DRAIN_GRACE * 3;
        if tokio::time::timeout(waited, finished.wait_for(|done| *done))
            .await
            .is_err()
        {
            return Err(TerminalError::Refused(format!(
                "{id} did not end within {} s of being killed",
                waited.as_secs()
            )));
        }
        Ok(process.summary())
    }

    /// Kills every background process and waits for their drivers to finish.
    pub(super) async fn shutdown(&self) {
        let processes: Vec<Arc<Background>> = {
            let mut registry = lock(&self.inner);
            std::mem::take(&mut registry.processes)
                .into_values()
                .collect()
        };
        let mut tasks = Vec::new();
        for process in &processes {
            if let Some(order) = lock(&process.kill).take() {
                let _ = order.send(());
            }
            if let Some(task) = lock(&process.task).take() {
                tasks.push(task);
            }
        }
        for result in futures_util::future::join_all(tasks).await {
            if let Err(e) = result {
                tracing::warn!(error = %e, "a background process's driver failed");
            }
        }
    }
}

impl Drop for Terminals {
    /// A safety net when [`Terminals::shutdown`] was never awaited: the drivers may be
    /// gone with their runtime, so end the groups still running directly.
    fn drop(&mut self) {
        let registry = lock(&self.inner);
        for process in registry.processes.values() {
            if lock(&process.state).exit.is_none() {
                kill_group(process.group, Signal::SIGKILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn spec<'a>(command: &'a str, dir: &'a Path) -> Spec<'a> {
        Spec {
            command,
            dir,
            extra_env: Vec::new(),
            confine: None,
        }
    }

    /// Whether a process is gone (or a zombie waiting for its reaper).
    fn is_dead(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
        }
    }

    async fn eventually_dead(pid: i32) -> bool {
        for _ in 0..50 {
            if is_dead(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    #[tokio::test]
    async fn runs_in_the_project_directory_with_exit_code() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = run_to_end(
            &spec("pwd; echo oops >&2; exit 3", tmp.path()),
            Duration::from_secs(20),
            30_000,
        )
        .await
        .expect("run");
        assert_eq!(out.exit.code, Some(3));
        assert!(!out.exit.stopped);
        let dir = tmp.path().canonicalize().expect("canonicalize");
        assert!(
            out.output.contains(&*dir.to_string_lossy()),
            "{}",
            out.output
        );
        assert!(out.output.contains("oops"), "{}", out.output);
        let value = run_result(out, Duration::from_secs(20));
        assert_eq!(value["exitCode"], 3);
        assert!(value.get("timedOut").is_none());
    }

    #[tokio::test]
    async fn a_command_past_its_timeout_is_killed_with_its_process_group() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let out = run_to_end(
            &spec(
                "sleep 30 & echo $! > child.pid; echo started; wait",
                tmp.path(),
            ),
            Duration::from_secs(1),
            30_000,
        )
        .await
        .expect("run");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(out.exit.stopped);
        assert!(out.output.contains("started"), "{}", out.output);
        let child: i32 = std::fs::read_to_string(tmp.path().join("child.pid"))
            .expect("child pid")
            .trim()
            .parse()
            .expect("a pid");
        assert!(
            eventually_dead(child).await,
            "the child sleep {child} survived"
        );
        let value = run_result(out, Duration::from_secs(1));
        assert_eq!(value["timedOut"], true);
        assert!(value["note"].as_str().expect("note").contains("timed out"));
    }

    #[tokio::test]
    async fn what_a_command_leaves_running_ends_with_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = run_to_end(
            &spec("sleep 30 >/dev/null 2>&1 & echo $! > left.pid", tmp.path()),
            Duration::from_secs(20),
            30_000,
        )
        .await
        .expect("run");
        assert_eq!(out.exit.code, Some(0));
        let left: i32 = std::fs::read_to_string(tmp.path().join("left.pid"))
            .expect("pid")
            .trim()
            .parse()
            .expect("a pid");
        assert!(
            eventually_dead(left).await,
            "the leftover sleep {left} survived"
        );
    }

    #[tokio::test]
    async fn output_past_the_cap_keeps_head_and_tail() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = run_to_end(
            &spec("seq 1 100000", tmp.path()),
            Duration::from_secs(20),
            2000,
        )
        .await
        .expect("run");
        assert!(out.output.starts_with("1\n2\n3\n"), "{}", &out.output[..40]);
        assert!(out.output.ends_with("99999\n100000\n"));
        assert!(out.output.contains("bytes of output omitted"));
        assert!(out.output.len() < 2100, "{}", out.output.len());
        assert!(out.omitted > 500_000);
        assert_eq!(run_result(out, Duration::from_secs(20))["truncated"], true);
    }

    #[tokio::test]
    async fn the_environment_is_clean_and_non_interactive() {
        // Cargo sets this for the test process: the hub's own environment is not passed on.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut with_secret = spec("env; read line && echo got-stdin", tmp.path());
        with_secret.extra_env = vec![("DEPLOY_TOKEN".into(), "s3cret".into())];
        let out = run_to_end(&with_secret, Duration::from_secs(20), 30_000)
            .await
            .expect("run");
        let vars: Vec<(&str, &str)> = out
            .output
            .lines()
            .filter_map(|line| line.split_once('='))
            .collect();
        let allowed: Vec<&str> = clean_env()
            .iter()
            .map(|(name, _)| *name)
            .chain(["DEPLOY_TOKEN", "PWD", "SHLVL", "_", "OLDPWD"])
            .collect();
        for (name, _) in &vars {
            assert!(
                allowed.contains(name),
                "{name} leaked into the command's environment"
            );
        }
        for expected in [
            ("GIT_TERMINAL_PROMPT", "0"),
            ("TERM", "dumb"),
            ("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
            ("DEPLOY_TOKEN", "s3cret"),
        ] {
            assert!(vars.contains(&expected), "{expected:?} missing: {vars:?}");
        }
        assert!(!vars.iter().any(|(name, _)| *name == "CARGO_MANIFEST_DIR"));
        // stdin is /dev/null: `read` sees its end at once.
        assert!(!out.output.contains("got-stdin"));
        assert!(!valid_secret_var("PATH"));
        assert!(!valid_secret_var("GIT_ASKPASS"));
        assert!(!valid_secret_var("1ABC"));
        assert!(!valid_secret_var("A-B"));
        assert!(valid_secret_var("DEPLOY_TOKEN"));
    }

    fn bg_limits() -> ComputerLimits {
        ComputerLimits {
            background_running: 2,
            background_lines: 3,
            ..ComputerLimits::default()
        }
    }

    async fn read_until(terminals: &Terminals, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..100 {
            let page = terminals
                .read(
                    "project-a",
                    ReadArgs {
                        id: id.into(),
                        offset: None,
                        limit: None,
                    },
                    &bg_limits(),
                )
                .expect("read");
            if done(&page) {
                return page;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{id} never reached the expected state");
    }

    #[tokio::test]
    async fn background_processes_start_read_list_and_kill() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir: PathBuf = tmp.path().to_path_buf();
        let terminals = Terminals::new();
        let limits = bg_limits();
        let started = terminals
            .start(
                "project-a",
                &spec("echo one; echo two; exec sleep 30", &dir),
                &limits,
            )
            .expect("start");
        let id = started["id"].as_str().expect("id").to_owned();
        let page = read_until(&terminals, &id, |p| {
            p["text"].as_str().is_some_and(|t| t.contains("two"))
        })
        .await;
        assert_eq!(page["running"], true);
        assert_eq!(page["text"], "one\ntwo\n");
        assert_eq!(page["nextOffset"], 3);

        let listed = terminals.list("project-a", &limits);
        assert_eq!(listed["processes"][0]["id"], id.as_str());
        assert_eq!(listed["processes"][0]["running"], true);
        // Another project sees none of it.
        assert_eq!(terminals.list("project-b", &limits)["processes"], json!([]));
        assert!(matches!(
            terminals.kill("project-b", &id).await,
            Err(TerminalError::NotFound { .. })
        ));

        // A rolling buffer: only the last lines are kept, and a read says so.
        let rolled = terminals
            .start("project-a", &spec("seq 1 10", &dir), &limits)
            .expect("start");
        let rolled_id = rolled["id"].as_str().expect("id").to_owned();
        let page = read_until(&terminals, &rolled_id, |p| p["running"] == false).await;
        assert_eq!(page["exitCode"], 0);
        assert_eq!(page["text"], "8\n9\n10\n");
        assert_eq!(page["offset"], 8);
        assert_eq!(page["droppedLines"], 7);
        let from_start = terminals
            .read(
                "project-a",
                ReadArgs {
                    id: rolled_id.clone(),
                    offset: Some(1),
                    limit: None,
                },
                &limits,
            )
            .expect("read");
        assert_eq!(from_start["text"], "8\n9\n10\n");
        assert!(from_start["note"]
            .as_str()
            .expect("note")
            .contains("dropped"));

        // At the limit of running processes, a third is refused.
        let third = terminals
            .start("project-a", &spec("exec sleep 30", &dir), &limits)
            .expect("start");
        let err = terminals
            .start("project-a", &spec("exec sleep 30", &dir), &limits)
            .expect_err("over the limit");
        assert!(err.to_string().contains("running"), "{err}");

        let killed = terminals.kill("project-a", &id).await.expect("kill");
        assert_eq!(killed["running"], false);
        assert_eq!(killed["killed"], true);
        let page = terminals
            .read(
                "project-a",
                ReadArgs {
                    id: id.clone(),
                    offset: Some(2),
                    limit: Some(1),
                },
                &limits,
            )
            .expect("read after kill");
        assert_eq!(page["text"], "two\n");

        // Shutdown ends the rest.
        let third_id = third["id"].as_str().expect("id").to_owned();
        let third_group = terminals.find("project-a", &third_id).expect("third").group;
        terminals.shutdown().await;
        assert!(eventually_dead(third_group.as_raw()).await);
        assert_eq!(terminals.list("project-a", &limits)["processes"], json!([]));
    }
}
