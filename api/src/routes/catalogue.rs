//! Catalogue endpoints: test cases and versions, harnesses, models, and gg configurations (owner
//! only: another account's configuration is not found).

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, Caller, Operator};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use belay_domain::catalogue::{
    GgConfig, GgConfigInput, GgConfigUpdate, Harness, HarnessInput, HarnessUpdate, Model, ModelInput, ModelUpdate,
    Provider, ProviderInput, ProviderUpdate, TestCase, TestCaseVersion, TestCaseVersionInput, TestCaseVersionUpdate,
};
use belay_domain::ids::GgConfigId;

/// Ingests a version of a test case (the case is created with its first version).
#[utoipa::path(post, path = "/v1/test-cases", tag = "catalogue", request_body = TestCaseVersionInput,
    responses((status = 201, body = TestCaseVersion), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn ingest_version(
    _c: Operator,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<TestCaseVersionInput>,
) -> ApiResult<(StatusCode, Json<TestCaseVersion>)> {
    input.validate()?;
    Ok((
        StatusCode::CREATED,
        Json(s.store.ingest_test_case_version(&input).await?),
    ))
}

/// Every test case with its versions and its latest version.
#[utoipa::path(get, path = "/v1/test-cases", tag = "catalogue", responses((status = 200, body = [TestCase])))]
pub async fn list_test_cases(_c: Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<TestCase>>> {
    Ok(Json(s.store.list_test_cases().await?))
}

/// One test case.
#[utoipa::path(get, path = "/v1/test-cases/{slug}", tag = "catalogue", params(("slug" = String, Path)),
    responses((status = 200, body = TestCase), (status = 404, body = ErrorBody)))]
pub async fn get_test_case(
    _c: Caller,
    State(s): State<AppState>,
    Path(slug): Path<String>,
) -> ApiResult<Json<TestCase>> {
    s.store
        .get_test_case(&slug)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("test case {slug} not found")))
}

/// One version of a test case.
#[utoipa::path(get, path = "/v1/test-cases/{slug}/versions/{version}", tag = "catalogue",
    params(("slug" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = TestCaseVersion), (status = 404, body = ErrorBody)))]
pub async fn get_version(
    _c: Caller,
    State(s): State<AppState>,
    Path((slug, version)): Path<(String, String)>,
) -> ApiResult<Json<TestCaseVersion>> {
    s.store
        .get_test_case_version(&slug, &version)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("test case version {slug}@{version} not found")))
}

/// Edits a version; refused (409) once the version has runs.
#[utoipa::path(put, path = "/v1/test-cases/{slug}/versions/{version}", tag = "catalogue",
    params(("slug" = String, Path), ("version" = String, Path)), request_body = TestCaseVersionUpdate,
    responses((status = 200, body = TestCaseVersion), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_version(
    _c: Operator,
    State(s): State<AppState>,
    Path((slug, version)): Path<(String, String)>,
    ApiJson(update): ApiJson<TestCaseVersionUpdate>,
) -> ApiResult<Json<TestCaseVersion>> {
    update.validate()?;
    Ok(Json(s.store.update_test_case_version(&slug, &version, &update).await?))
}

/// Adds a harness.
#[utoipa::path(post, path = "/v1/harnesses", tag = "catalogue", request_body = HarnessInput,
    responses((status = 201, body = Harness), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_harness(
    _c: Operator,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<HarnessInput>,
) -> ApiResult<(StatusCode, Json<Harness>)> {
    input.validate()?;
    let h = s.store.create_harness(&input).await?;
    wake(&s).await;
    Ok((StatusCode::CREATED, Json(h)))
}

/// Every harness.
#[utoipa::path(get, path = "/v1/harnesses", tag = "catalogue", responses((status = 200, body = [Harness])))]
pub async fn list_harnesses(_c: Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<Harness>>> {
    Ok(Json(s.store.list_harnesses().await?))
}

/// One harness.
#[utoipa::path(get, path = "/v1/harnesses/{name}", tag = "catalogue", params(("name" = String, Path)),
    responses((status = 200, body = Harness), (status = 404, body = ErrorBody)))]
pub async fn get_harness(_c: Caller, State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Harness>> {
    s.store
        .get_harness(&name)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("harness {name} not found")))
}

/// Changes a harness's cap, routing or adapter.
#[utoipa::path(patch, path = "/v1/harnesses/{name}", tag = "catalogue", params(("name" = String, Path)), request_body = HarnessUpdate,
    responses((status = 200, body = Harness), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_harness(
    _c: Operator,
    State(s): State<AppState>,
    Path(name): Path<String>,
    ApiJson(update): ApiJson<HarnessUpdate>,
) -> ApiResult<Json<Harness>> {
    update.validate()?;
    let h = s.store.update_harness(&name, &update).await?;
    // A raised cap may let held jobs start.
    wake(&s).await;
    Ok(Json(h))
}

/// Adds a model to the catalogue.
#[utoipa::path(post, path = "/v1/models", tag = "catalogue", request_body = ModelInput,
    responses((status = 201, body = Model), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_model(
    _c: Operator,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<ModelInput>,
) -> ApiResult<(StatusCode, Json<Model>)> {
    input.validate()?;
    Ok((StatusCode::CREATED, Json(s.store.create_model(&input).await?)))
}

/// Every model.
#[utoipa::path(get, path = "/v1/models", tag = "catalogue", responses((status = 200, body = [Model])))]
pub async fn list_models(_c: Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<Model>>> {
    Ok(Json(s.store.list_models().await?))
}

/// One model.
#[utoipa::path(get, path = "/v1/models/{id}", tag = "catalogue", params(("id" = String, Path)),
    responses((status = 200, body = Model), (status = 404, body = ErrorBody)))]
pub async fn get_model(_c: Caller, State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Model>> {
    s.store
        .get_model(&id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("model {id} not found")))
}

/// Replaces a model's context window and list price (absent or null: unknown).
#[utoipa::path(put, path = "/v1/models/{id}", tag = "catalogue", params(("id" = String, Path)), request_body = ModelUpdate,
    responses((status = 200, body = Model), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_model(
    _c: Operator,
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiJson(update): ApiJson<ModelUpdate>,
) -> ApiResult<Json<Model>> {
    update.validate()?;
    let m = s.store.update_model(&id, &update).await?;
    wake(&s).await;
    Ok(Json(m))
}

/// Saves a gg configuration in the caller's account.
#[utoipa::path(post, path = "/v1/gg-configs", tag = "catalogue", request_body = GgConfigInput,
    responses((status = 201, body = GgConfig), (status = 422, body = ErrorBody)))]
pub async fn create_gg_config(
    Caller(a): Caller,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<GgConfigInput>,
) -> ApiResult<(StatusCode, Json<GgConfig>)> {
    input.validate()?;
    Ok((
        StatusCode::CREATED,
        Json(s.store.create_gg_config(&a.id, &input).await?),
    ))
}

/// The caller's gg configurations.
#[utoipa::path(get, path = "/v1/gg-configs", tag = "catalogue", responses((status = 200, body = [GgConfig])))]
pub async fn list_gg_configs(Caller(a): Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<GgConfig>>> {
    Ok(Json(s.store.list_gg_configs(&a.id).await?))
}

/// One of the caller's gg configurations (another account's is not found).
#[utoipa::path(get, path = "/v1/gg-configs/{id}", tag = "catalogue", params(("id" = String, Path)),
    responses((status = 200, body = GgConfig), (status = 404, body = ErrorBody)))]
pub async fn get_gg_config(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<GgConfigId>,
) -> ApiResult<Json<GgConfig>> {
    s.store
        .get_gg_config(&a.id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("gg configuration {id} not found in this account")))
}

/// Renames or reshapes one of the caller's gg configurations.
#[utoipa::path(patch, path = "/v1/gg-configs/{id}", tag = "catalogue", params(("id" = String, Path)), request_body = GgConfigUpdate,
    responses((status = 200, body = GgConfig), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_gg_config(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<GgConfigId>,
    ApiJson(update): ApiJson<GgConfigUpdate>,
) -> ApiResult<Json<GgConfig>> {
    update.validate()?;
    s.store
        .update_gg_config(&a.id, &id, &update)
        .await
        .map(Json)
        .map_err(|e| match e {
            belay_store::StoreError::NotFound { .. } => {
                ApiError::not_found(format!("gg configuration {id} not found in this account"))
            }
            other => other.into(),
        })
}

/// Deletes one of the caller's gg configurations. It keeps its id: the cells that name it stay
/// countable and report `gg_config_deleted`.
#[utoipa::path(delete, path = "/v1/gg-configs/{id}", tag = "catalogue", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_gg_config(
    Caller(a): Caller,
    State(s): State<AppState>,
    Path(id): Path<GgConfigId>,
) -> ApiResult<StatusCode> {
    if s.store.delete_gg_config(&a.id, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "gg configuration {id} not found in this account"
        )))
    }
}

/// Adds a provider, with an optional lane (`maxParallelism`, 1 to 10000).
#[utoipa::path(post, path = "/v1/providers", tag = "catalogue", request_body = ProviderInput,
    responses((status = 201, body = Provider), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_provider(
    _c: Operator,
    State(s): State<AppState>,
    ApiJson(input): ApiJson<ProviderInput>,
) -> ApiResult<(StatusCode, Json<Provider>)> {
    input.validate()?;
    Ok((StatusCode::CREATED, Json(s.store.create_provider(&input).await?)))
}

/// Every provider.
#[utoipa::path(get, path = "/v1/providers", tag = "catalogue", responses((status = 200, body = [Provider])))]
pub async fn list_providers(_c: Caller, State(s): State<AppState>) -> ApiResult<Json<Vec<Provider>>> {
    Ok(Json(s.store.list_providers().await?))
}

/// One provider.
#[utoipa::path(get, path = "/v1/providers/{name}", tag = "catalogue", params(("name" = String, Path)),
    responses((status = 200, body = Provider), (status = 404, body = ErrorBody)))]
pub async fn get_provider(
    _c: Caller,
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Provider>> {
    s.store
        .get_provider(&name)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("provider {name} not found")))
}

/// Sets a provider's lane (`null`: no lane). It takes effect at the next claim, running jobs
/// included.
#[utoipa::path(patch, path = "/v1/providers/{name}", tag = "catalogue", params(("name" = String, Path)), request_body = ProviderUpdate,
    responses((status = 200, body = Provider), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_provider(
    _c: Operator,
    State(s): State<AppState>,
    Path(name): Path<String>,
    ApiJson(update): ApiJson<ProviderUpdate>,
) -> ApiResult<Json<Provider>> {
    update.validate()?;
    let p = s.store.update_provider(&name, &update).await?;
    wake(&s).await;
    Ok(Json(p))
}

/// Deletes a provider no harness or model names; one still named is refused (409) naming them.
#[utoipa::path(delete, path = "/v1/providers/{name}", tag = "catalogue", params(("name" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 403, body = ErrorBody, description = "The caller is a member (`operator_required`)"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "Harnesses or models still name the provider")))]
pub async fn delete_provider(
    _c: Operator,
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    s.store.delete_provider(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Wakes the dispatcher; a failure is logged, and its backstop timer covers it.
pub(crate) async fn wake(s: &AppState) {
    if let Err(e) = belay_client::wake_dispatcher(&s.temporal).await {
        tracing::warn!(error = %e, "could not wake the dispatcher; its timer will");
    }
}
