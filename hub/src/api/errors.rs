//! How every domain error of the hub maps into the one [`ApiError`]: a status, a code and
//! a message for people. Internal failures keep their detail in the log only. (Owner
//! credential errors map in `hearth_ui::access`, where they are defined.)

use axum::http::StatusCode;

use super::ApiError;
use crate::{
    agent::runner::AgentError, chat::ChatError, devices::DeviceError, plugins::PluginError,
    projects::ProjectError, secrets::SecretError, settings::SettingsError,
};

impl From<DeviceError> for ApiError {
    fn from(e: DeviceError) -> Self {
        let msg = e.to_string();
        match e {
            DeviceError::WrongCode(_) | DeviceError::NoDevice(_) => ApiError::not_found(msg),
            DeviceError::Expired(_) | DeviceError::Used(_) | DeviceError::Denied(_) => {
                ApiError::gone(msg)
            }
            DeviceError::Throttled { .. } => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "throttled", msg)
            }
            DeviceError::Invalid(_) | DeviceError::BadTicket | DeviceError::TicketRequired => {
                ApiError::bad_request(msg)
            }
            DeviceError::Mismatch { .. } => {
                ApiError::new(StatusCode::CONFLICT, "fingerprint_mismatch", msg)
            }
            other => ApiError::internal(other),
        }
    }
}

impl From<ProjectError> for ApiError {
    fn from(e: ProjectError) -> Self {
        match e {
            ProjectError::NotFound(_) => ApiError::not_found(e.to_string()),
            ProjectError::Ambiguous { .. } => ApiError::conflict(e.to_string()),
            other => ApiError::internal(other),
        }
    }
}

impl From<ChatError> for ApiError {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::Project(p) => p.into(),
            ChatError::Invalid(m) => ApiError::bad_request(m),
            ChatError::ShuttingDown => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the hub is shutting down",
            ),
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Invalid(m) => ApiError::bad_request(m),
            other => ApiError::internal(other),
        }
    }
}

impl From<SecretError> for ApiError {
    fn from(e: SecretError) -> Self {
        match e {
            SecretError::Invalid(m) => ApiError::bad_request(m),
            other => ApiError::internal(other),
        }
    }
}

impl From<SettingsError> for ApiError {
    fn from(e: SettingsError) -> Self {
        match e {
            SettingsError::Invalid(m) => ApiError::bad_request(m),
            other => ApiError::internal(other),
        }
    }
}

impl From<PluginError> for ApiError {
    fn from(e: PluginError) -> Self {
        let msg = e.to_string();
        match e {
            PluginError::NotFound(_) | PluginError::NoTool { .. } => ApiError::not_found(msg),
            PluginError::Exists(_) => ApiError::conflict(msg),
            PluginError::Builtin(_) => ApiError::new(StatusCode::CONFLICT, "builtin", msg),
            PluginError::Invalid(_) => ApiError::bad_request(msg),
            other => ApiError::internal(other),
        }
    }
}

impl From<crate::notify::NotifyError> for ApiError {
    fn from(e: crate::notify::NotifyError) -> Self {
        match e {
            crate::notify::NotifyError::ShuttingDown => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the hub is shutting down",
            ),
            other => ApiError::internal(other),
        }
    }
}

impl From<crate::scheduler::ScheduleError> for ApiError {
    fn from(e: crate::scheduler::ScheduleError) -> Self {
        use crate::scheduler::ScheduleError as E;
        let msg = e.to_string();
        match e {
            E::NotFound(_) => ApiError::not_found(msg),
            E::Invalid(_) => ApiError::bad_request(msg),
            E::Exists(_) => ApiError::conflict(msg),
            E::Busy(_) => ApiError::new(StatusCode::CONFLICT, "running", msg),
            E::Stopped => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", msg),
            other => ApiError::internal(other),
        }
    }
}
