//! [`ApiRoutes`]: one list of routes that both the axum router and the OpenAPI document
//! are built from, so the document can never miss a route the router serves.
//!
//! Every route is added with its method, path (relative to the API root, axum's `{param}`
//! syntax, which is also OpenAPI's), tag and one-line summary; [`ApiRoutes::openapi`]
//! turns the collected [`Op`]s into an OpenAPI 3.1 document (path parameters from the
//! path, the query parameters named with [`ApiRoutes::query`], a JSON body for
//! POST/PUT/PATCH, and the shared error and page shapes as components).

use axum::{
    handler::Handler,
    routing::{on, MethodFilter},
    Router,
};
use utoipa::openapi::{
    path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem},
    request_body::RequestBodyBuilder,
    schema::{ComponentsBuilder, ObjectBuilder, Type},
    ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, Required,
    ResponseBuilder,
};

/// An HTTP method a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl Verb {
    /// The method's name, upper case.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Self::Get => MethodFilter::GET,
            Self::Post => MethodFilter::POST,
            Self::Put => MethodFilter::PUT,
            Self::Patch => MethodFilter::PATCH,
            Self::Delete => MethodFilter::DELETE,
        }
    }

    fn http(self) -> HttpMethod {
        match self {
            Self::Get => HttpMethod::Get,
            Self::Post => HttpMethod::Post,
            Self::Put => HttpMethod::Put,
            Self::Patch => HttpMethod::Patch,
            Self::Delete => HttpMethod::Delete,
        }
    }

    fn has_body(self) -> bool {
        matches!(self, Self::Post | Self::Put | Self::Patch)
    }
}

/// One route as documented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Method.
    pub verb: Verb,
    /// Path relative to the API root, with `{param}` placeholders.
    pub path: &'static str,
    /// Group in the document.
    pub tag: &'static str,
    /// One line for people.
    pub summary: &'static str,
    /// Query parameters it reads.
    pub query: &'static [&'static str],
}

/// A router and the list of its routes, built together.
#[derive(Debug)]
pub struct ApiRoutes<S = ()> {
    router: Router<S>,
    ops: Vec<Op>,
    tag: &'static str,
}

impl<S: Clone + Send + Sync + 'static> ApiRoutes<S> {
    /// No routes yet; the routes added next are grouped under `tag`.
    pub fn new(tag: &'static str) -> Self {
        Self {
            router: Router::new(),
            ops: Vec::new(),
            tag,
        }
    }

    /// Adds `verb path` served by `handler`, documented by `summary`.
    pub fn route<H, T>(
        mut self,
        verb: Verb,
        path: &'static str,
        summary: &'static str,
        handler: H,
    ) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        // axum merges method routers added for the same path.
        self.router = self.router.route(path, on(verb.filter(), handler));
        self.ops.push(Op {
            verb,
            path,
            tag: self.tag,
            summary,
            query: &[],
        });
        self
    }

    /// Names the query parameters of the route added last.
    pub fn query(mut self, names: &'static [&'static str]) -> Self {
        if let Some(op) = self.ops.last_mut() {
            op.query = names;
        }
        self
    }

    /// Adds every route of `other`.
    pub fn merge(mut self, other: ApiRoutes<S>) -> Self {
        self.router = self.router.merge(other.router);
        self.ops.extend(other.ops);
        self
    }

    /// Gives the handlers their state; the result merges into a router of any state.
    pub fn with_state<S2>(self, state: S) -> ApiRoutes<S2> {
        ApiRoutes {
            router: self.router.with_state(state),
            ops: self.ops,
            tag: self.tag,
        }
    }

    /// The documented routes.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The router and the documented routes.
    pub fn into_parts(self) -> (Router<S>, Vec<Op>) {
        (self.router, self.ops)
    }
}

/// The OpenAPI 3.1 document of `ops`, mounted at `root` (e.g. `/api/v1`).
pub fn openapi(title: &str, version: &str, root: &str, ops: &[Op]) -> OpenApi {
    let mut paths = PathsBuilder::new();
    for op in ops {
        let mut b = OperationBuilder::new()
            .tag(op.tag)
            .summary(Some(op.summary))
            .operation_id(Some(operation_id(op)));
        for name in path_params(op.path) {
            b = b.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
            );
        }
        for name in op.query {
            let ty = if matches!(*name, "limit" | "offset") {
                Type::Integer
            } else {
                Type::String
            };
            b = b.parameter(
                ParameterBuilder::new()
                    .name(*name)
                    .parameter_in(ParameterIn::Query)
                    .required(Required::False)
                    .schema(Some(ObjectBuilder::new().schema_type(ty))),
            );
        }
        if op.verb.has_body() {
            b = b.request_body(Some(
                RequestBodyBuilder::new()
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(ObjectBuilder::new().schema_type(Type::Object)))
                            .build(),
                    )
                    .build(),
            ));
        }
        b = b
            .response(
                "2XX",
                ResponseBuilder::new()
                    .description("Success: the resource, a page (`Page`) or no content.")
                    .build(),
            )
            .response(
                "4XX",
                ResponseBuilder::new()
                    .description("Refused: bad input (400), no credential (401), missing (404), conflict (409), gone (410).")
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ApiError")))
                            .build(),
                    )
                    .build(),
            );
        paths = paths.path(
            format!("{root}{}", op.path),
            PathItem::new(op.verb.http(), b.build()),
        );
    }
    let error = ObjectBuilder::new()
        .property(
            "error",
            ObjectBuilder::new()
                .property("code", ObjectBuilder::new().schema_type(Type::String))
                .property("message", ObjectBuilder::new().schema_type(Type::String))
                .required("code")
                .required("message"),
        )
        .required("error");
    let page = ObjectBuilder::new()
        .property("data", utoipa::openapi::schema::ArrayBuilder::new())
        .property("total", ObjectBuilder::new().schema_type(Type::Integer))
        .property("limit", ObjectBuilder::new().schema_type(Type::Integer))
        .property("offset", ObjectBuilder::new().schema_type(Type::Integer))
        .required("data")
        .required("total")
        .required("limit")
        .required("offset");
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title(title)
                .version(version)
                .description(Some(TEXT_NOTE)),
        )
        .paths(paths.build())
        .components(Some(
            ComponentsBuilder::new()
                .schema("ApiError", error)
                .schema("Page", page)
                .build(),
        ))
        .build()
}

/// What the document says about units and patches.
const TEXT_NOTE: &str = "Lists answer `{ data, total, limit, offset }` with `limit` 1 to 500 \
(default 50); errors answer `{ error: { code, message } }`. A text patch \
(`PATCH /{kind}/{id}/text`) is `{ field, heads, splices: [{ pos, delete, insert }] }`: \
`heads` are the document heads (hex) the splices were computed against, returned as \
`heads` by every read; positions and lengths count UTF-16 code units (what JavaScript \
strings count), each splice against the text the previous ones left. The hub applies the \
patch at that version and merges, so edits that arrived in between never shift it; \
unknown heads answer 409.";

fn operation_id(op: &Op) -> String {
    let mut id = op.verb.as_str().to_ascii_lowercase();
    for seg in op.path.split('/').filter(|s| !s.is_empty()) {
        id.push('_');
        id.extend(
            seg.chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .map(|c| c.to_ascii_lowercase()),
        );
    }
    id
}

/// The `{param}` names of a path.
pub fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_params_come_from_the_path() {
        let op = Op {
            verb: Verb::Patch,
            path: "/notes/{id}/text",
            tag: "notes",
            summary: "s",
            query: &[],
        };
        assert_eq!(operation_id(&op), "patch_notes_id_text");
        assert_eq!(path_params(op.path).collect::<Vec<_>>(), ["id"]);
        let doc = openapi("t", "1", "/api/v1", &[op]);
        let json = serde_json::to_value(&doc).expect("json");
        assert!(json["paths"]["/api/v1/notes/{id}/text"]["patch"].is_object());
    }
}
