//! Opening a login link in the owner's browser, for `hearth-hub open` and `hearth open`:
//! only when a desktop session can show one here (not over SSH, not without a display),
//! and never failing the command when none can: the printed link is enough.
//!
//! Starts one opener process (`open` on macOS, `xdg-open` elsewhere) with no input or
//! output of its own; never logs the link.

/// Whether a desktop session can show a browser here.
pub fn desktop_present() -> bool {
    if std::env::var_os("SSH_CONNECTION").is_some() {
        return false;
    }
    if cfg!(target_os = "macos") {
        return true;
    }
    std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
}

/// Opens `url` in a browser if a desktop is present; says on stderr when the opener
/// could not start (the owner opens the printed link instead).
pub fn open_if_desktop(url: &str) {
    if !desktop_present() {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        eprintln!("(could not start {opener}: {e}; open the link yourself)");
    }
}
