//! The access guard in front of every route of the hub's API: the shared one of
//! [`mod@hearth_ui::access::guard`] (Host, then Origin, then the owner's credential; the
//! [`Principal`] it lets in goes on the request as an extension), named here so the hub's
//! handlers reach it as `api::guard`.

pub use hearth_ui::access::guard::{guard, Access, Principal};
use hearth_ui::access::Server;

/// The session cookie's name for the hub with this endpoint id (`hearth_hub_<prefix>`).
pub fn cookie_name(hub_id: &str) -> String {
    Server::Hub.cookie_name(hub_id)
}
