//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` annotations.

use crate::error::ApiResult;
use crate::extract::Caller;
use crate::routes::*;
use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "belay", description = "Evaluation coverage and source verification on Temporal."),
    paths(
        health::healthz, health::readyz, serve, accounts::me,
        catalogue::ingest_version, catalogue::list_test_cases, catalogue::get_test_case, catalogue::get_version,
        catalogue::update_version, catalogue::create_harness, catalogue::list_harnesses, catalogue::get_harness,
        catalogue::update_harness, catalogue::create_model, catalogue::list_models, catalogue::get_model,
        catalogue::update_model, catalogue::create_gg_config, catalogue::list_gg_configs, catalogue::get_gg_config,
        catalogue::update_gg_config,
        jobs::launch, jobs::list, jobs::get, jobs::cancel, jobs::cancel_bulk, jobs::transitions,
        runs::list, runs::get, runs::review, runs::reviews,
        events::list,
        projects::create, projects::list, projects::get, projects::delete, repo_tokens::issue, repo_tokens::revoke,
        changes::create, changes::list, changes::get, changes::add_task, changes::tasks, changes::start_run,
        changes::record_change_set, changes::get_change_set,
        workspaces::tool, workspaces::publish, workspaces::close, workspaces::get,
        edit_sessions::open, edit_sessions::get, edit_sessions::command, edit_sessions::end,
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document as a value (for tests and for `belay` to print).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// This API's OpenAPI document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "health", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub async fn serve(_c: Caller) -> ApiResult<Json<utoipa::openapi::OpenApi>> {
    Ok(Json(openapi_document()))
}
