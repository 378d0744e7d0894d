//! The OpenAPI document. Its paths come from the same registration as the routes (`operations`
//! in the crate root, one `#[utoipa::path]` per handler); the answers every operation of a kind
//! can give are added here, from the operation's shape, so the document cannot forget them:
//! 401 for every operation behind the bearer token, 400, 413 and 422 for every operation that
//! reads a JSON body, 422 for every operation that reads a query string.

use crate::error::{ApiResult, ErrorBody, ErrorDetail};
use crate::extract::Caller;
use axum::Json;
use std::sync::OnceLock;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

#[derive(OpenApi)]
#[openapi(
    info(title = "belay", description = "Evaluation coverage and source verification on Temporal."),
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

/// The document without paths: what the registration of the operations starts from.
pub(crate) fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The document as JSON (served, and read by tests).
pub fn openapi_document() -> serde_json::Value {
    let mut doc = crate::operations().into_openapi();
    StandardAnswers.modify(&mut doc);
    let mut doc = serde_json::to_value(&doc).expect("the OpenAPI document serializes");
    if let Err(missing) = crate::constraints::apply(&mut doc) {
        panic!("request rules name places the OpenAPI document lacks: {missing:?}");
    }
    doc
}

/// The answers an operation gives because of what it reads, whatever it does.
struct StandardAnswers;

impl Modify for StandardAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components
            .schemas
            .insert(ErrorBody::name().into_owned(), <ErrorBody as PartialSchema>::schema());
        components.schemas.insert(
            ErrorDetail::name().into_owned(),
            <ErrorDetail as PartialSchema>::schema(),
        );
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                add_standard_answers(op);
            }
        }
    }
}

fn add_standard_answers(op: &mut Operation) {
    // An operation's own `security()` with no requirement is public; every other one sits
    // behind the document's bearer requirement.
    let public = op
        .security
        .as_ref()
        .is_some_and(|reqs| reqs.iter().all(|r| *r == Default::default()));
    if !public {
        answer(
            op,
            401,
            "No bearer token or an unknown one (`unauthorized`), a revoked one (`token_revoked`), an expired one (`token_expired`), or one of a disabled account (`account_disabled`).",
        );
        answer(
            op,
            429,
            "Too many failed authentications from this address (`too_many_failures`); `Retry-After` says when to try again.",
        );
    }
    if op.request_body.is_some() {
        answer(op, 400, "The body is not JSON (`malformed_json`).");
        answer(
            op,
            413,
            "The body is larger than the API reads, 2 MiB (`body_too_large`, naming the limit).",
        );
        answer(
            op,
            422,
            "A field is missing, unknown, of the wrong type or breaks a rule (`invalid_field`, naming it).",
        );
    }
    let reads_query = op
        .parameters
        .iter()
        .flatten()
        .any(|p| matches!(p.parameter_in, ParameterIn::Query));
    if reads_query {
        answer(op, 422, "A query parameter breaks a rule (`invalid_field`, naming it).");
    }
}

/// Documents `status` with the error body, unless the operation documents it already.
fn answer(op: &mut Operation, status: u16, description: &str) {
    let key = status.to_string();
    if op.responses.responses.contains_key(&key) {
        return;
    }
    let response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(Ref::from_schema_name(ErrorBody::name()))))
                .build(),
        )
        .build();
    op.responses.responses.insert(key, RefOr::T(response));
}

static DOCUMENT: OnceLock<serde_json::Value> = OnceLock::new();

/// This API's OpenAPI document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "health", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub async fn serve(_c: Caller) -> ApiResult<Json<&'static serde_json::Value>> {
    Ok(Json(DOCUMENT.get_or_init(openapi_document)))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
        let mut ops = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops.push((method.clone(), path.clone(), op));
            }
        }
        ops
    }

    #[test]
    fn every_request_rule_lands_in_the_document() {
        // `openapi_document` panics naming any rule whose place the document lacks.
        let doc = super::openapi_document();
        let harness = &doc["components"]["schemas"]["HarnessInput"]["properties"]["maxParallelism"];
        assert_eq!(
            (harness["minimum"].clone(), harness["maximum"].clone()),
            (1.into(), 1000.into())
        );
    }

    #[test]
    fn every_operation_documents_the_answers_its_extractors_give() {
        let doc = super::openapi_document();
        let ops = operations(&doc);
        assert!(ops.len() >= 53, "{} operations", ops.len());
        for (method, path, op) in ops {
            let answers = op["responses"].as_object().unwrap();
            let public = matches!(path.as_str(), "/v1/healthz" | "/v1/readyz");
            assert_eq!(answers.contains_key("401"), !public, "{method} {path}");
            if op.get("requestBody").is_some() {
                for status in ["400", "413", "422"] {
                    assert!(answers.contains_key(status), "{method} {path} lacks {status}");
                }
            }
            for (status, answer) in answers {
                if status.starts_with('4') {
                    assert_eq!(
                        answer["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }

    #[test]
    fn plans_ladders_the_matrix_and_the_board_document_their_ledger() {
        let doc = super::openapi_document();
        let schemas = &doc["components"]["schemas"];
        let ledger = &schemas["Ledger"]["properties"];
        for field in ["budgetUsd", "spentUsd", "reservedUsd"] {
            assert!(ledger.get(field).is_some(), "Ledger lacks {field}: {ledger}");
        }
        for name in ["CoveragePlan", "Ladder", "Matrix", "LadderProgress"] {
            let text = schemas[name].to_string();
            assert!(text.contains("#/components/schemas/Ledger"), "{name}: {text}");
        }
        for name in ["CoveragePlanInput", "LadderInput"] {
            let props = &schemas[name]["properties"];
            assert!(
                props.get("budget").is_some() && props.get("estimatedRunUsd").is_some(),
                "{name}"
            );
        }
        assert_eq!(schemas["BudgetInput"]["properties"]["usd"]["minimum"], 0);
        assert!(schemas["TopUpAnswer"]["properties"].get("held").is_some());
        assert!(schemas["Skipped"].to_string().contains("budget"));
    }

    #[test]
    fn query_parameters_are_in_the_query_and_optional() {
        let doc = super::openapi_document();
        let params = doc["paths"]["/v1/jobs"]["get"]["parameters"].as_array().unwrap();
        assert!(!params.is_empty());
        for p in params {
            assert_eq!(
                (p["in"].as_str(), p["required"].as_bool()),
                (Some("query"), Some(false)),
                "{p}"
            );
        }
    }
}
