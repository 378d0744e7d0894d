//! The demo catalogue `belay dev --demo` seeds: a case, a script harness that simulates an agent,
//! and a priced model, so a newcomer can launch a job and watch its run complete.

use belay_domain::catalogue::{AdapterSpec, HarnessInput, ListPrice, ModelInput, TestCaseVersionInput, TestType};
use belay_store::{Store, StoreError};

/// A stand-in agent: writes a page as its build and a manifest saying the build loaded.
pub const DEMO_SCRIPT: &str = r#"mkdir -p "$BELAY_OUTPUT_DIR/build"
printf '<h1>%s %s (%s) by %s</h1>\n' "$BELAY_CASE_SLUG" "$BELAY_CASE_VERSION" "$BELAY_CASE_VARIANT" "$BELAY_MODEL" > "$BELAY_OUTPUT_DIR/build/index.html"
printf '{"status":"completed","loaded":true,"artifacts":["build/index.html"]}' > "$BELAY_MANIFEST"
"#;

fn ok_if_exists<T>(r: Result<T, StoreError>) -> Result<(), StoreError> {
    match r {
        Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

pub async fn seed(store: &Store) -> Result<(), StoreError> {
    for (slug, test_type) in [("hello", TestType::Standard), ("jam", TestType::GameJam)] {
        ok_if_exists(
            store
                .ingest_test_case_version(&TestCaseVersionInput {
                    slug: slug.into(),
                    version: "1.0.0".into(),
                    test_type,
                    variants: vec!["default".into()],
                    engines: vec![],
                    title: Some(format!("Demo case {slug}")),
                    review_domains: None,
                })
                .await,
        )?;
    }
    ok_if_exists(
        store
            .create_harness(&HarnessInput {
                provider: None,
                name: "script".into(),
                provider_routed: false,
                max_parallelism: 2,
                adapter: AdapterSpec::Script {
                    script: DEMO_SCRIPT.into(),
                    timeout_seconds: 60,
                    sandbox: false,
                },
            })
            .await,
    )?;
    for id in ["demo-model", "demo-model-mini"] {
        ok_if_exists(
            store
                .create_model(&ModelInput {
                    provider: None,
                    max_parallelism: None,
                    id: id.into(),
                    context_window: Some(200_000),
                    list_price: Some(ListPrice {
                        input_per_mtok_usd: 3.0,
                        output_per_mtok_usd: 15.0,
                    }),
                })
                .await,
        )?;
    }
    Ok(())
}
