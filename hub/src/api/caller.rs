//! Who is asking, and what each caller may reach: the one place the hub's access policy
//! for relayed requests lives.
//!
//! A request reaches a handler either through the owner's HTTP guard (which inserts a
//! [`Principal`]) or through `hearth/rpc/1` (the rpc service inserts a [`RelayedDevice`]
//! read from the registry for that very request). [`Caller`] extracts which; a request
//! with neither is refused, never treated as the owner.
//!
//! Two layers, both on the hub (a node is never trusted to filter):
//! - per route, [`route_rule`] and [`check_route`], applied by the rpc service before a
//!   relayed request is dispatched: settings, devices and the audit log are refused to a
//!   device scoped to a project (`out_of_scope`), and everything that widens power
//!   (deciding pairing requests, renaming, rescoping or revoking devices, provider keys,
//!   tool permissions, secrets, settings changes, schedule writes) needs a full-scope
//!   device the owner marked as admin (`admin_required`);
//! - per object, [`Caller`]'s methods, called by the handlers: a scoped device reaches
//!   only the projects of its subtree (chat, abort, conversations and messages,
//!   approvals, usage, notifications — one tied to no project is the full devices' —,
//!   schedules and runs). A project outside it is `out_of_scope` whether or not it
//!   exists, so a scoped device learns nothing about the rest; an approval, schedule or
//!   run outside it is not found.
//!
//! The admin flag itself is set only by the owner (the hub's CLI, or `PATCH
//! /devices/{id}` with the owner's credential), never by a relayed request.

use std::collections::HashSet;

use axum::{extract::FromRequestParts, http::request::Parts, http::StatusCode};
use hearth_sync::{DocId, DocumentStore};
use hearth_ui::{RelayedRoute, Verb};
use iroh::EndpointId;

use super::{blocking, guard::Principal, ApiError, ApiResult, ApiState};

/// The device a relayed request comes from, with its grant as read from the registry
/// for this request (never cached from when the connection opened).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedDevice {
    /// The device's key.
    pub id: EndpointId,
    /// The root of the project subtree it may reach (`None`: everything).
    pub scope: Option<DocId>,
    /// Whether the owner lets it widen power.
    pub admin: bool,
}

/// Who a handler serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The owner, let in by the HTTP guard.
    Owner,
    /// A paired device, through its relay.
    Device(RelayedDevice),
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // The device first: a request carrying both is judged by the narrower grant.
        if let Some(device) = parts.extensions.get::<RelayedDevice>() {
            return Ok(Caller::Device(device.clone()));
        }
        if parts.extensions.get::<Principal>().is_some() {
            return Ok(Caller::Owner);
        }
        // Only a wiring mistake gets here: refuse rather than guess.
        Err(ApiError::internal(
            "a request reached a handler with neither the owner's principal nor a relayed device",
        ))
    }
}

/// What a relayed route needs of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Any paired device; the handler confines a scoped one to its subtree.
    AnyDevice,
    /// A device that is not scoped to a project (settings, devices, the audit log).
    FullScope,
    /// A full-scope device the owner marked as admin (widens power).
    Admin,
}

/// The rule of a relayed route; `None` for a route this policy does not know, which is
/// refused (deny by default: a route added to the relay table needs a rule here).
pub fn route_rule(route: &RelayedRoute) -> Option<Rule> {
    use Verb::*;
    Some(match (route.verb, route.path) {
        (Post, "/chat")
        | (Post, "/chat/{conversation}/abort")
        | (Get, "/approvals")
        | (Post, "/approvals/{id}")
        | (Get, "/projects/{project}/conversations")
        | (Get, "/projects/{project}/conversations/{conversation}/messages")
        | (Patch, "/projects/{project}/conversations/{conversation}")
        | (Get, "/usage")
        | (Get, "/notifications")
        | (Post, "/notifications/read")
        | (Get, "/schedules")
        | (Get, "/schedules/{id}")
        | (Get, "/schedules/{id}/runs")
        | (Post, "/schedules/preview")
        | (Get, "/runs/{id}")
        | (Get, "/events") => Rule::AnyDevice,
        (Get, "/audit")
        | (Get, "/settings")
        | (Get, "/settings/providers")
        | (Get, "/projects/{project}/tools")
        | (Get, "/projects/{project}/secrets")
        | (Get, "/devices")
        | (Get, "/devices/pending") => Rule::FullScope,
        (Patch, "/settings")
        | (Put, "/settings/providers/{name}")
        | (Put, "/projects/{project}/tools/{tool}")
        | (Put, "/projects/{project}/secrets/{name}")
        | (Delete, "/projects/{project}/secrets/{name}")
        | (Post, "/devices/approve")
        | (Post, "/devices/deny")
        | (Patch, "/devices/{id}")
        | (Delete, "/devices/{id}")
        // A schedule's auto_approve lets its runs use tools unasked.
        | (Post, "/schedules")
        | (Patch, "/schedules/{id}")
        | (Delete, "/schedules/{id}")
        | (Post, "/schedules/{id}/pause")
        | (Post, "/schedules/{id}/resume")
        | (Post, "/schedules/{id}/run") => Rule::Admin,
        _ => return None,
    })
}

/// Whether `device` may use `route` at all (object checks come later, in the handler).
pub fn check_route(route: &RelayedRoute, device: &RelayedDevice) -> ApiResult<()> {
    let what = format!("{} {}", route.verb.as_str(), route.path);
    let Some(rule) = route_rule(route) else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_relayed",
            format!("{what} is not open to devices"),
        ));
    };
    if rule != Rule::AnyDevice && device.scope.is_some() {
        return Err(out_of_scope(format!(
            "a device scoped to a project may not use {what}: settings, devices and the audit log belong to full devices"
        )));
    }
    if rule == Rule::Admin && !device.admin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin_required",
            format!("{what} widens what devices or the agent may do: only the owner, on the hub or from a device marked admin (`hearth-hub devices admin <id> on`), may use it"),
        ));
    }
    Ok(())
}

fn out_of_scope(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "out_of_scope", message)
}

fn outside(project: &str) -> ApiError {
    out_of_scope(format!("project {project} is not in this device's scope"))
}

/// The projects a caller may reach: all, or a subtree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Everything.
    All,
    /// These projects only (a scoped device's subtree, root included).
    Projects(HashSet<DocId>),
}

impl Reach {
    /// Whether `project` is reachable.
    pub fn contains(&self, project: &DocId) -> bool {
        match self {
            Reach::All => true,
            Reach::Projects(p) => p.contains(project),
        }
    }
}

impl Caller {
    /// Whether this is the owner.
    pub fn is_owner(&self) -> bool {
        matches!(self, Caller::Owner)
    }

    /// The root of the caller's scope, if it is a scoped device.
    pub fn scope_root(&self) -> Option<DocId> {
        match self {
            Caller::Device(d) => d.scope,
            Caller::Owner => None,
        }
    }

    /// What the caller may reach, with a scoped device's subtree computed now (a project
    /// created below the root a moment ago is in it).
    pub async fn reach(&self, store: &DocumentStore) -> ApiResult<Reach> {
        let Some(root) = self.scope_root() else {
            return Ok(Reach::All);
        };
        let store = store.clone();
        let scope = blocking(move || store.scope_blocking(root)).await?;
        Ok(Reach::Projects(scope.projects().clone()))
    }

    /// Refuses `project` unless the caller may reach it.
    pub async fn check_project(&self, store: &DocumentStore, project: DocId) -> ApiResult<()> {
        if self.reach(store).await?.contains(&project) {
            Ok(())
        } else {
            Err(outside(&project.to_string()))
        }
    }

    /// The project a chat-like request means: `given` (a name or id), or, when none is
    /// given, the scope root for a scoped device and `general` for anyone else. A scoped
    /// device gets `out_of_scope` for any project outside its subtree, existing or not.
    pub async fn project(&self, s: &ApiState, given: Option<&str>) -> ApiResult<DocId> {
        match (self.scope_root(), given) {
            (None, given) => Ok(s.chat.resolve(given).await?),
            (Some(root), None) => Ok(root),
            (Some(_), Some(name)) => match s.chat.resolve(Some(name)).await {
                Ok(id) if self.reach(&s.store).await?.contains(&id) => Ok(id),
                _ => Err(outside(name)),
            },
        }
    }

    /// The project id of a path (`/projects/{project}/…`): parsed, reachable, live. A
    /// scoped device is told `out_of_scope` before anything is looked up.
    pub async fn project_id(&self, s: &ApiState, given: &str) -> ApiResult<DocId> {
        let id: DocId = given.parse()?;
        self.check_project(&s.store, id).await?;
        let p = s.store.get::<hearth_sync::Project>(id).await?;
        if p.deleted {
            return Err(ApiError::not_found(format!("no project {id}")));
        }
        Ok(id)
    }

    /// A project filter (`?project=`) of a listing: a scoped device must name a project
    /// of its subtree (its rows are per project; the listing is of that project only).
    pub async fn project_filter(
        &self,
        s: &ApiState,
        given: Option<String>,
    ) -> ApiResult<Option<String>> {
        let id = given.map(|p| p.parse::<DocId>()).transpose()?;
        match (self.scope_root(), id) {
            (None, id) => Ok(id.map(|i| i.to_string())),
            (Some(_), Some(id)) => {
                self.check_project(&s.store, id).await?;
                Ok(Some(id.to_string()))
            }
            (Some(root), None) => Err(out_of_scope(format!(
                "a device scoped to a project lists one project at a time: add project=<id> (its scope is {root} and the projects below it)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_ui::{find_relayed, RELAYED};

    fn device(scope: Option<DocId>, admin: bool) -> RelayedDevice {
        RelayedDevice {
            id: iroh::SecretKey::from_bytes(&[7; 32]).public(),
            scope,
            admin,
        }
    }

    fn code(verb: Verb, path: &str, d: &RelayedDevice) -> Option<&'static str> {
        let m = find_relayed(verb, path).expect("relayed");
        check_route(m.route, d).err().map(|e| e.code())
    }

    #[test]
    fn every_relayed_route_has_a_rule() {
        for r in RELAYED {
            assert!(
                route_rule(r).is_some(),
                "{} {} has no rule",
                r.verb.as_str(),
                r.path
            );
        }
    }

    #[test]
    fn scoped_devices_are_kept_from_settings_devices_and_audit() {
        let scoped = device(Some(DocId::random()), true);
        for (verb, path) in [
            (Verb::Get, "/settings"),
            (Verb::Patch, "/settings"),
            (Verb::Get, "/devices"),
            (Verb::Get, "/devices/pending"),
            (Verb::Post, "/devices/approve"),
            (Verb::Delete, "/devices/abcd"),
            (Verb::Get, "/audit"),
            (Verb::Get, "/settings/providers"),
            (Verb::Put, "/projects/p/tools/notes_create"),
            (Verb::Get, "/projects/p/secrets"),
        ] {
            assert_eq!(code(verb, path, &scoped), Some("out_of_scope"), "{path}");
        }
        for (verb, path) in [
            (Verb::Post, "/chat"),
            (Verb::Get, "/approvals"),
            (Verb::Post, "/approvals/x"),
            (Verb::Get, "/projects/p/conversations"),
            (Verb::Get, "/usage"),
            (Verb::Get, "/notifications"),
            (Verb::Post, "/notifications/read"),
            (Verb::Get, "/events"),
            (Verb::Get, "/schedules"),
            (Verb::Get, "/schedules/s1/runs"),
            (Verb::Get, "/runs/7"),
        ] {
            assert_eq!(
                code(verb, path, &scoped),
                None,
                "{path}: object checks follow"
            );
        }
    }

    #[test]
    fn widening_power_needs_an_admin_device() {
        let plain = device(None, false);
        let admin = device(None, true);
        for (verb, path) in [
            (Verb::Post, "/devices/approve"),
            (Verb::Post, "/devices/deny"),
            (Verb::Patch, "/devices/abcd"),
            (Verb::Delete, "/devices/abcd"),
            (Verb::Put, "/settings/providers/anthropic"),
            (Verb::Put, "/projects/p/tools/shell"),
            (Verb::Put, "/projects/p/secrets/token"),
            (Verb::Delete, "/projects/p/secrets/token"),
            (Verb::Patch, "/settings"),
            (Verb::Post, "/schedules"),
            (Verb::Patch, "/schedules/s1"),
            (Verb::Delete, "/schedules/s1"),
            (Verb::Post, "/schedules/s1/pause"),
            (Verb::Post, "/schedules/s1/resume"),
            (Verb::Post, "/schedules/s1/run"),
        ] {
            assert_eq!(code(verb, path, &plain), Some("admin_required"), "{path}");
            assert_eq!(code(verb, path, &admin), None, "{path}");
        }
        for (verb, path) in [
            (Verb::Get, "/settings"),
            (Verb::Get, "/devices"),
            (Verb::Get, "/audit"),
            (Verb::Post, "/approvals/x"),
            (Verb::Post, "/chat"),
        ] {
            assert_eq!(code(verb, path, &plain), None, "{path}");
        }
    }

    #[test]
    fn reach_contains_only_its_projects() {
        let a = DocId::random();
        let b = DocId::random();
        assert!(Reach::All.contains(&a));
        let r = Reach::Projects(HashSet::from([a]));
        assert!(r.contains(&a));
        assert!(!r.contains(&b));
    }
}
