//! The model client and its meters against the fake Anthropic Messages API over real HTTPS (a
//! test CA made at run time), on a real SQLite store: the acceptance check's second opinion,
//! refusals before any call, an HTTP 529 and a slow answer, a server the client does not trust.

use crate::common::fake_anthropic::{FakeAnthropic, Reply, Seen, acceptance};
use belay_activities::llm::LlmActivities;
use belay_domain::acceptance::{AcceptanceCriterion, AcceptanceInput, CriterionResult, InputPart, PartKind};
use belay_domain::ids::ChangeId;
use belay_llm::{AnthropicClient, LlmConfig};
use belay_store::Backend;
use belay_store::model_meter::ModelLimits;
use belay_store::testing::fresh;
use belay_workflows::selection::{AcceptanceAnswer, AcceptanceRequest};
use rustls_pki_types::pem::PemObject;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn config(url: &str, key: Option<&str>) -> LlmConfig {
    let mut c = LlmConfig::from_lookup(|_| None).unwrap();
    c.base_url = url.into();
    c.api_key = key.map(str::to_owned);
    c.limits = ModelLimits {
        monthly_budget_usd: 10.0,
        daily_call_cap: 100,
        change_budget_usd: 1.0,
    };
    c.timeout = Duration::from_secs(2);
    c
}

fn request() -> AcceptanceRequest {
    AcceptanceRequest {
        change_id: "chg_0123456789abcdef0123456789abcdef".to_string().into(),
        candidate_id: "cand_0123456789abcdef0123456789abcdef".to_string().into(),
        criteria: vec![
            AcceptanceCriterion {
                id: "c1".into(),
                text: "A helper counts the todos".into(),
                kept: false,
            },
            AcceptanceCriterion {
                id: "c2".into(),
                text: "A helper lists the todo titles".into(),
                kept: false,
            },
        ],
        input: AcceptanceInput {
            parts: vec![InputPart {
                path: "src/stats.ts".into(),
                kind: PartKind::File,
                text: "export function countTodos(titles: string[]): number {\n  return titles.length;\n}\n".into(),
                truncated: false,
            }],
            skipped: vec![],
        },
    }
}

async fn activities(
    fake: &FakeAnthropic,
    key: Option<&str>,
    tweak: impl FnOnce(&mut LlmConfig),
) -> (LlmActivities, belay_store::testing::TestDb) {
    let db = fresh(Backend::Sqlite).await;
    let mut c = config(&fake.url, key);
    c.extra_roots = fake.roots();
    tweak(&mut c);
    (
        LlmActivities {
            store: db.store.clone(),
            client: Arc::new(AnthropicClient::new(c).unwrap()),
        },
        db,
    )
}

const MET_C1: &str =
    r#"{"id": "c1", "result": "met", "citation": {"path": "src/stats.ts", "quote": "export function countTodos"}}"#;

#[tokio::test]
async fn criteria_haiku_leaves_unclear_get_one_sonnet_judgement_that_applies_only_to_them() {
    let fake = FakeAnthropic::start(|s: &Seen| {
        let c1: serde_json::Value = serde_json::from_str(MET_C1).unwrap();
        if s.model.contains("haiku") {
            acceptance(json!([c1, {"id": "c2", "result": "unclear"}]))
        } else {
            // Sonnet answers only what it was asked.
            acceptance(json!([{"id": "c2", "result": "not_met", "reason": "no titles helper"}]))
        }
    })
    .await;
    let (llm, _db) = activities(&fake, Some("k"), |_| {}).await;
    let answer = llm.judge_acceptance(&request()).await;
    let AcceptanceAnswer::Judged {
        criteria,
        models,
        cost_usd,
    } = answer
    else {
        panic!("{answer:?}")
    };
    let results: Vec<(String, CriterionResult)> = criteria.iter().map(|c| (c.id.clone(), c.result)).collect();
    assert_eq!(
        results,
        vec![
            ("c1".into(), CriterionResult::Met),
            ("c2".into(), CriterionResult::NotMet)
        ]
    );
    assert_eq!(models, vec!["claude-haiku-4-5", "claude-sonnet-4-5"]);
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].user.contains("- c2:") && !seen[1].user.contains("- c1:"),
        "{}",
        seen[1].user
    );
    // 1000 in / 200 out: Haiku at $1/$5, Sonnet at $3/$15 per million tokens.
    assert!((cost_usd - (0.002 + 0.006)).abs() < 1e-9, "{cost_usd}");
    let spent = llm
        .store
        .change_model_cost(&ChangeId::from(request().change_id.as_str()))
        .await
        .unwrap();
    assert!((spent - cost_usd).abs() < 1e-9);
}

#[tokio::test]
async fn two_tool_calls_are_invalid_and_get_one_sonnet_call_a_met_without_a_valid_citation_is_unclear() {
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.model.contains("haiku") {
            let one = json!({"criteria": []});
            Reply::Tools(vec![("record_acceptance".into(), one.clone()), ("record_acceptance".into(), one)])
        } else {
            acceptance(json!([
                {"id": "c1", "result": "met", "citation": {"path": "src/stats.ts", "quote": "countTodos"}},
                {"id": "c2", "result": "met", "citation": {"path": "src/other.ts", "quote": "export function todoTitles"}}
            ]))
        }
    })
    .await;
    let (llm, _db) = activities(&fake, Some("k"), |_| {}).await;
    let AcceptanceAnswer::Judged { criteria, models, .. } = llm.judge_acceptance(&request()).await else {
        panic!()
    };
    assert_eq!(models.len(), 2);
    assert_eq!(fake.seen().len(), 2);
    // c1's quote (10 characters) occurs in what the model was given; c2 cites a path it was
    // never given, so its `met` counts as unclear.
    assert_eq!(criteria[0].result, CriterionResult::Met);
    assert_eq!(criteria[1].result, CriterionResult::Unclear);
    assert!(criteria[1].citation_rejected);
}

#[tokio::test]
async fn a_call_a_meter_refuses_or_without_a_key_is_never_made() {
    let fake = FakeAnthropic::start(|_: &Seen| acceptance(json!([]))).await;
    let (llm, _db) = activities(&fake, None, |_| {}).await;
    match llm.judge_acceptance(&request()).await {
        AcceptanceAnswer::Refused { reason, .. } => assert!(reason.contains("no Anthropic API key"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let (llm, _db) = activities(&fake, Some("k"), |c| c.limits.daily_call_cap = 0).await;
    match llm.judge_acceptance(&request()).await {
        AcceptanceAnswer::Refused { reason, .. } => assert!(reason.contains("daily model call cap"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let (llm, _db) = activities(&fake, Some("k"), |c| c.limits.change_budget_usd = 0.0001).await;
    match llm.judge_acceptance(&request()).await {
        AcceptanceAnswer::Refused { reason, .. } => assert!(reason.contains("Change budget"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let (llm, _db) = activities(&fake, Some("k"), |c| c.limits.monthly_budget_usd = 0.0001).await;
    match llm.judge_acceptance(&request()).await {
        AcceptanceAnswer::Refused { reason, .. } => assert!(reason.contains("monthly Anthropic budget"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(fake.seen().is_empty(), "a refused call reached the API");
}

#[tokio::test]
async fn an_http_529_and_a_slow_answer_are_model_errors_that_cost_nothing() {
    let fake = FakeAnthropic::start(|s: &Seen| {
        if s.user.contains("slow") {
            Reply::Slow(Duration::from_secs(5), Box::new(acceptance(json!([]))))
        } else {
            Reply::Status(529)
        }
    })
    .await;
    let (llm, _db) = activities(&fake, Some("k"), |_| {}).await;
    match llm.judge_acceptance(&request()).await {
        AcceptanceAnswer::ModelError { reason, cost_usd, .. } => {
            assert!(reason.contains("HTTP 529"), "{reason}");
            assert_eq!(cost_usd, 0.0);
        }
        other => panic!("{other:?}"),
    }
    let mut slow = request();
    slow.criteria[0].text = "A slow helper".into();
    match llm.judge_acceptance(&slow).await {
        AcceptanceAnswer::ModelError { reason, .. } => assert!(reason.contains("could not be reached"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        llm.store
            .change_model_cost(&ChangeId::from(slow.change_id.as_str()))
            .await
            .unwrap(),
        0.0
    );
    assert_eq!(llm.store.model_calls_on(belay_store::now_ms()).await.unwrap(), 2);
}

#[tokio::test]
async fn over_https_a_call_succeeds_with_the_ca_and_without_it_fails_clearly_before_it_is_sent_counting_nothing() {
    let fake = FakeAnthropic::start(|_: &Seen| {
        let c1: serde_json::Value = serde_json::from_str(MET_C1).unwrap();
        acceptance(json!([c1, {"id": "c2", "result": "not_met", "reason": "no titles helper"}]))
    })
    .await;
    assert!(fake.url.starts_with("https://"), "{}", fake.url);
    // Without the CA: the platform's roots do not know the test CA, the handshake fails.
    let (llm, _db) = activities(&fake, Some("test-key"), |c| c.extra_roots.clear()).await;
    match llm.judge_acceptance(&request()).await {
        AcceptanceAnswer::ModelError { reason, cost_usd, .. } => {
            assert!(reason.contains("could not be reached"), "{reason}");
            assert!(reason.contains("certificate"), "the cause is named: {reason}");
            assert!(!reason.contains("test-key"), "{reason}");
            assert_eq!(cost_usd, 0.0);
        }
        other => panic!("{other:?}"),
    }
    assert!(fake.seen().is_empty(), "a request reached the fake without the CA");
    let now = belay_store::now_ms();
    assert_eq!(
        llm.store.model_calls_on(now).await.unwrap(),
        0,
        "an unsent call was counted"
    );
    let month = llm.store.model_cost_in_month(now).await.unwrap();
    assert_eq!(month, 0.0);
    let (used, reserved) = llm
        .store
        .usage_counter(
            belay_store::model_meter::MODEL_COST_CHANGE,
            request().change_id.as_str(),
        )
        .await
        .unwrap();
    assert_eq!((used, reserved), (0, 0), "the unsent call's reservation was released");
    // Trusting the test CA: the same call goes through, over TLS.
    let (llm, _db) = activities(&fake, Some("test-key"), |_| {}).await;
    let answer = llm.judge_acceptance(&request()).await;
    let AcceptanceAnswer::Judged { criteria, .. } = answer else {
        panic!("judged over HTTPS with the CA: {answer:?}")
    };
    assert_eq!(criteria[0].result, CriterionResult::Met);
    assert_eq!(fake.seen().len(), 1);
    assert_eq!(llm.store.model_calls_on(belay_store::now_ms()).await.unwrap(), 1);
    // A CA that did not sign the server is no better than none.
    let other = crate::common::fake_anthropic::test_ca::TestCa::new();
    let pem = std::fs::read(&other.ca).unwrap();
    let der = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
        .map(|c| c.unwrap().as_ref().to_vec())
        .collect::<Vec<_>>();
    let (llm, _db) = activities(&fake, Some("test-key"), |c| c.extra_roots = der).await;
    assert!(matches!(
        llm.judge_acceptance(&request()).await,
        AcceptanceAnswer::ModelError { .. }
    ));
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn the_probe_spends_no_tokens_and_tells_a_wrong_key() {
    let fake = FakeAnthropic::start(|_: &Seen| acceptance(json!([]))).await;
    let mut c = config(&fake.url, Some("test-key"));
    c.extra_roots = fake.roots();
    let ok = AnthropicClient::new(c.clone()).unwrap().probe().await.unwrap();
    assert!(ok.contains("200"), "{ok}");
    c.api_key = Some("wrong".into());
    match AnthropicClient::new(c).unwrap().probe().await {
        Err(belay_llm::CallError::Http { status: 401, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(fake.seen().is_empty(), "the probe sent a message");
}
