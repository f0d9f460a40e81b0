//! The shapes every Hearth HTTP API answer takes, shared by the hub's API and the
//! document routes (which the node will serve too): one error type, [`ApiError`], written
//! as `{ "error": { "code", "message" } }` with the right 4xx (5xx only for the server's
//! own failures, whose details go to the log, not to the client); one page type,
//! [`Page`], written as `{ "data", "total", "limit", "offset" }`, whose `limit` is bounded
//! by [`PageQuery::bounds`]; and the extractors [`ApiJson`] and [`ApiQuery`], which turn
//! a malformed body or query into an [`ApiError`] too.
//!
//! Never holds state and never decides access: it only shapes answers.

use axum::{
    extract::{FromRequest, FromRequestParts, Request},
    http::{request::Parts, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use hearth_sync::StoreError;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// The default page size.
pub const DEFAULT_LIMIT: u32 = 50;
/// The largest page size a client may ask for.
pub const MAX_LIMIT: u32 = 500;

/// An error as the API reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with this status, machine-readable code and message for people.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 410 `gone`.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "gone", message)
    }

    /// 500 `internal`: `detail` is logged; the client sees only that it failed.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error in the API");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error (see the server's log)",
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The machine-readable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message for people.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound { .. } => Self::not_found(e.to_string()),
            StoreError::Invalid { .. } | StoreError::WrongKind { .. } => {
                Self::bad_request(e.to_string())
            }
            StoreError::Ambiguous(_) | StoreError::UnknownHeads { .. } => {
                Self::conflict(e.to_string())
            }
            StoreError::Deleted { .. } => Self::gone(e.to_string()),
            _ => Self::internal(e),
        }
    }
}

/// `Result` of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

/// A JSON body; a malformed one is a 400 (415 without a JSON content type) in the
/// API's error shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(ApiError::new(
                rejection.status(),
                "bad_request",
                rejection.body_text(),
            )),
        }
    }
}

/// A query string; a malformed one is a 400 in the API's error shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Self(v)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// `?limit=&offset=` of every list.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct PageQuery {
    /// Page size, 1 to [`MAX_LIMIT`] (default [`DEFAULT_LIMIT`]).
    pub limit: Option<u32>,
    /// Items to skip.
    pub offset: Option<u32>,
}

impl PageQuery {
    /// The checked `(limit, offset)`: a limit of 0 or above [`MAX_LIMIT`] is a 400.
    pub fn bounds(&self) -> Result<(u32, u32), ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIMIT {
            return Err(ApiError::bad_request(format!(
                "limit must be 1 to {MAX_LIMIT}, not {limit}"
            )));
        }
        Ok((limit, self.offset.unwrap_or(0)))
    }
}

/// A page of a list.
#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    /// The items.
    pub data: Vec<T>,
    /// How many items the whole list has.
    pub total: u64,
    /// The page size asked for.
    pub limit: u32,
    /// Items skipped.
    pub offset: u32,
}

impl<T> Page<T> {
    /// A page cut out of a whole list held in memory.
    pub fn from_all(all: Vec<T>, query: &PageQuery) -> Result<Self, ApiError> {
        let (limit, offset) = query.bounds()?;
        let total = all.len() as u64;
        let data = all
            .into_iter()
            .skip(offset as usize)
            .take(limit as usize)
            .collect();
        Ok(Self {
            data,
            total,
            limit,
            offset,
        })
    }

    /// The same page with its items converted.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            total: self.total,
            limit: self.limit,
            offset: self.offset,
        }
    }
}

impl<T: Serialize> IntoResponse for Page<T> {
    fn into_response(self) -> Response {
        Json(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bounded() {
        let q = |limit, offset| PageQuery { limit, offset };
        assert_eq!(q(None, None).bounds(), Ok((DEFAULT_LIMIT, 0)));
        assert_eq!(q(Some(500), Some(3)).bounds(), Ok((500, 3)));
        assert!(q(Some(0), None).bounds().is_err());
        let e = q(Some(501), None).bounds().expect_err("too big");
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let page = Page::from_all((0..10).collect(), &q(Some(3), Some(8))).expect("page");
        assert_eq!((page.data, page.total), (vec![8, 9], 10));
    }
}
