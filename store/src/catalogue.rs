//! The catalogue: test cases and versions, harnesses, models, and each account's gg
//! configurations (only the owner reads or changes one).

use crate::Tx;
use crate::rows::{enum_text, json, test_type, to_json};
use crate::{StoreError, events, new_id_body, now_ms};
use belay_domain::catalogue::{
    AdapterSpec, GgConfig, GgConfigFacts, GgConfigInput, GgConfigUpdate, Harness, HarnessInput, HarnessUpdate,
    ListPrice, Model, ModelCatalogue, ModelFacts, ModelInput, ModelUpdate, TestCase, TestCaseVersion,
    TestCaseVersionInput, TestCaseVersionUpdate, latest_version,
};
use belay_domain::ids::{AccountId, GgConfigId};
use sqlx::Row;
use sqlx::any::AnyRow;

const VERSION_COLUMNS: &str = "v.slug, v.version, v.test_type, v.variants, v.engines, v.title, v.review_domains, v.ingested_at, v.updated_at, \
     (select count(*) from runs r where r.case_slug = v.slug and r.case_version = v.version) as run_count";

fn version_row(r: &AnyRow) -> Result<TestCaseVersion, StoreError> {
    Ok(TestCaseVersion {
        slug: r.try_get("slug")?,
        version: r.try_get("version")?,
        test_type: test_type(&r.try_get::<String, _>("test_type")?)?,
        variants: json(&r.try_get::<String, _>("variants")?, "variants")?,
        engines: json(&r.try_get::<String, _>("engines")?, "engines")?,
        title: r.try_get("title")?,
        review_domains: r
            .try_get::<Option<String>, _>("review_domains")?
            .as_deref()
            .map(|t| json(t, "review_domains"))
            .transpose()?,
        ingested_at: r.try_get("ingested_at")?,
        updated_at: r.try_get("updated_at")?,
        frozen: r.try_get::<i64, _>("run_count")? > 0,
    })
}

fn harness_row(r: &AnyRow) -> Result<Harness, StoreError> {
    Ok(Harness {
        name: r.try_get("name")?,
        provider_routed: r.try_get::<i64, _>("provider_routed")? != 0,
        max_parallelism: r.try_get("max_parallelism")?,
        adapter: json::<AdapterSpec>(&r.try_get::<String, _>("adapter")?, "adapter")?,
        provider: r.try_get("provider")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn model_row(r: &AnyRow) -> Result<Model, StoreError> {
    let input: Option<f64> = r.try_get("input_per_mtok_usd")?;
    let output: Option<f64> = r.try_get("output_per_mtok_usd")?;
    Ok(Model {
        id: r.try_get("id")?,
        context_window: r.try_get("context_window")?,
        list_price: match (input, output) {
            (Some(i), Some(o)) => Some(ListPrice {
                input_per_mtok_usd: i,
                output_per_mtok_usd: o,
            }),
            _ => None,
        },
        provider: r.try_get("provider")?,
        max_parallelism: r.try_get("max_parallelism")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn gg_row(r: &AnyRow) -> Result<GgConfig, StoreError> {
    Ok(GgConfig {
        id: r.try_get::<String, _>("id")?.into(),
        name: r.try_get("name")?,
        launch_slots: json(&r.try_get::<String, _>("launch_slots")?, "launch_slots")?,
        capabilities: json(&r.try_get::<String, _>("capabilities")?, "capabilities")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// Ingests one version of a test case (the case is created with its first version).
pub async fn ingest_test_case_version(
    tx: &mut Tx,
    input: &TestCaseVersionInput,
) -> Result<TestCaseVersion, StoreError> {
    input.validate()?;
    let now = now_ms();
    sqlx::query("insert into test_cases (slug, created_at) values ($1, $2) on conflict (slug) do nothing")
        .bind(input.slug.as_str())
        .bind(now)
        .execute(tx.conn())
        .await?;
    let inserted = sqlx::query(
        r#"insert into test_case_versions (slug, version, test_type, variants, engines, title, ingested_at, updated_at, review_domains)
           values ($1, $2, $3, $4, $5, $6, $7, $7, $8) on conflict (slug, version) do nothing"#,
    )
    .bind(input.slug.as_str())
    .bind(input.version.as_str())
    .bind(enum_text(&input.test_type))
    .bind(to_json(&input.variants))
    .bind(to_json(&input.engines))
    .bind(&input.title)
    .bind(now)
    .bind(input.review_domains.as_ref().map(to_json))
    .execute(tx.conn())
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::Conflict(format!(
            "version: {}@{} is already ingested; edit it with PUT /v1/test-cases/{}/versions/{}",
            input.slug, input.version, input.slug, input.version
        )));
    }
    events::append(
        tx.conn(),
        &format!("case:{}@{}", input.slug, input.version),
        "test_case.ingested",
        &serde_json::to_value(input).unwrap_or_default(),
    )
    .await?;
    get_test_case_version(tx, &input.slug, &input.version)
        .await?
        .ok_or_else(|| StoreError::not_found("test case version", format!("{}@{}", input.slug, input.version)))
}

/// Edits a version, unless it has runs (then it is frozen and the answer is a conflict).
pub async fn update_test_case_version(
    tx: &mut Tx,
    slug: &str,
    version: &str,
    update: &TestCaseVersionUpdate,
) -> Result<TestCaseVersion, StoreError> {
    update.validate()?;
    let changed = sqlx::query(
        r#"update test_case_versions set test_type = $3, variants = $4, engines = $5, title = $6, updated_at = $7,
               review_domains = $8
           where slug = $1 and version = $2
             and not exists (select 1 from runs r where r.case_slug = $1 and r.case_version = $2)"#,
    )
    .bind(slug)
    .bind(version)
    .bind(enum_text(&update.test_type))
    .bind(to_json(&update.variants))
    .bind(to_json(&update.engines))
    .bind(&update.title)
    .bind(now_ms())
    .bind(update.review_domains.as_ref().map(to_json))
    .execute(tx.conn())
    .await?;
    let current = get_test_case_version(tx, slug, version).await?;
    match (changed.rows_affected(), current) {
        (_, None) => Err(StoreError::not_found("test case version", format!("{slug}@{version}"))),
        (0, Some(_)) => Err(StoreError::Conflict(format!(
            "version: {slug}@{version} has runs, so it is frozen; ingest a new version instead"
        ))),
        (_, Some(v)) => Ok(v),
    }
}

pub async fn get_test_case_version(
    tx: &mut Tx,
    slug: &str,
    version: &str,
) -> Result<Option<TestCaseVersion>, StoreError> {
    let sql = format!("select {VERSION_COLUMNS} from test_case_versions v where v.slug = $1 and v.version = $2");
    let row = sqlx::query(&sql)
        .bind(slug)
        .bind(version)
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(version_row).transpose()
}

pub async fn get_test_case(tx: &mut Tx, slug: &str) -> Result<Option<TestCase>, StoreError> {
    let sql = format!(
        "select {VERSION_COLUMNS} from test_case_versions v where v.slug = $1 order by v.ingested_at, v.version"
    );
    let rows = sqlx::query(&sql).bind(slug).fetch_all(tx.conn()).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let versions = rows.iter().map(version_row).collect::<Result<Vec<_>, _>>()?;
    Ok(Some(assemble(slug.to_string(), versions)))
}

pub async fn list_test_cases(tx: &mut Tx) -> Result<Vec<TestCase>, StoreError> {
    let sql = format!("select {VERSION_COLUMNS} from test_case_versions v order by v.slug, v.ingested_at, v.version");
    let rows = sqlx::query(&sql).fetch_all(tx.conn()).await?;
    let mut cases: Vec<TestCase> = Vec::new();
    let mut current: Vec<TestCaseVersion> = Vec::new();
    for v in rows.iter().map(version_row) {
        let v = v?;
        if current.first().is_some_and(|c| c.slug != v.slug) {
            cases.push(assemble(current[0].slug.clone(), std::mem::take(&mut current)));
        }
        current.push(v);
    }
    if let Some(first) = current.first() {
        cases.push(assemble(first.slug.clone(), current));
    }
    Ok(cases)
}

pub async fn create_harness(tx: &mut Tx, input: &HarnessInput) -> Result<Harness, StoreError> {
    input.validate()?;
    crate::providers::require_provider(tx, "provider", input.provider.as_deref()).await?;
    let now = now_ms();
    let res = sqlx::query(
        r#"insert into harnesses (name, provider_routed, max_parallelism, adapter, provider, created_at, updated_at)
           values ($1, $2, $3, $4, $6, $5, $5)"#,
    )
    .bind(input.name.as_str())
    .bind(input.provider_routed as i64)
    .bind(input.max_parallelism)
    .bind(to_json(&input.adapter))
    .bind(now)
    .bind(input.provider.as_deref())
    .execute(tx.conn())
    .await;
    match res {
        Err(e) if is_unique_violation(&e) => {
            return Err(StoreError::Conflict(format!(
                "name: harness {} already exists",
                input.name
            )));
        }
        r => r?,
    };
    get_harness(tx, &input.name)
        .await?
        .ok_or_else(|| StoreError::not_found("harness", &input.name))
}

pub async fn update_harness(tx: &mut Tx, name: &str, update: &HarnessUpdate) -> Result<Harness, StoreError> {
    update.validate()?;
    let current = sqlx::query(
        "select name, provider_routed, max_parallelism, adapter, provider, created_at, updated_at from harnesses where name = $1",
    )
    .bind(name)
    .fetch_optional(tx.conn())
    .await?
    .ok_or_else(|| StoreError::not_found("harness", name))?;
    let current = harness_row(&current)?;
    if let Some(p) = &update.provider {
        crate::providers::require_provider(tx, "provider", p.as_deref()).await?;
    }
    let provider = update.provider.clone().unwrap_or(current.provider);
    sqlx::query("update harnesses set provider_routed = $2, max_parallelism = $3, adapter = $4, updated_at = $5, provider = $6 where name = $1")
        .bind(name)
        .bind(update.provider_routed.unwrap_or(current.provider_routed) as i64)
        .bind(update.max_parallelism.unwrap_or(current.max_parallelism))
        .bind(to_json(update.adapter.as_ref().unwrap_or(&current.adapter)))
        .bind(now_ms())
        .bind(provider)
        .execute(tx.conn())
        .await?;
    get_harness(tx, name)
        .await?
        .ok_or_else(|| StoreError::not_found("harness", name))
}

pub async fn get_harness(tx: &mut Tx, name: &str) -> Result<Option<Harness>, StoreError> {
    let row = sqlx::query(
        "select name, provider_routed, max_parallelism, adapter, provider, created_at, updated_at from harnesses where name = $1",
    )
    .bind(name)
    .fetch_optional(tx.conn())
    .await?;
    row.as_ref().map(harness_row).transpose()
}

pub async fn list_harnesses(tx: &mut Tx) -> Result<Vec<Harness>, StoreError> {
    let rows = sqlx::query(
        "select name, provider_routed, max_parallelism, adapter, provider, created_at, updated_at from harnesses order by name",
    )
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(harness_row).collect()
}

pub async fn create_model(tx: &mut Tx, input: &ModelInput) -> Result<Model, StoreError> {
    input.validate()?;
    crate::providers::require_provider(tx, "provider", input.provider.as_deref()).await?;
    let now = now_ms();
    let res = sqlx::query(
        r#"insert into models (id, context_window, input_per_mtok_usd, output_per_mtok_usd, provider, max_parallelism,
               created_at, updated_at)
           values ($1, $2, $3, $4, $6, $7, $5, $5)"#,
    )
    .bind(input.id.as_str())
    .bind(input.context_window)
    .bind(input.list_price.map(|p| p.input_per_mtok_usd))
    .bind(input.list_price.map(|p| p.output_per_mtok_usd))
    .bind(now)
    .bind(input.provider.as_deref())
    .bind(input.max_parallelism)
    .execute(tx.conn())
    .await;
    match res {
        Err(e) if is_unique_violation(&e) => {
            return Err(StoreError::Conflict(format!("id: model {} already exists", input.id)));
        }
        r => r?,
    };
    get_model(tx, &input.id)
        .await?
        .ok_or_else(|| StoreError::not_found("model", &input.id))
}

/// Replaces a model's facts: an absent or null value becomes unknown.
pub async fn update_model(tx: &mut Tx, id: &str, update: &ModelUpdate) -> Result<Model, StoreError> {
    update.validate()?;
    crate::providers::require_provider(tx, "provider", update.provider.as_deref()).await?;
    let res = sqlx::query(
        "update models set context_window = $2, input_per_mtok_usd = $3, output_per_mtok_usd = $4, updated_at = $5, \
         provider = $6, max_parallelism = $7 where id = $1",
    )
    .bind(id)
    .bind(update.context_window)
    .bind(update.list_price.map(|p| p.input_per_mtok_usd))
    .bind(update.list_price.map(|p| p.output_per_mtok_usd))
    .bind(now_ms())
    .bind(update.provider.as_deref())
    .bind(update.max_parallelism)
    .execute(tx.conn())
    .await?;
    if res.rows_affected() == 0 {
        return Err(StoreError::not_found("model", id));
    }
    get_model(tx, id)
        .await?
        .ok_or_else(|| StoreError::not_found("model", id))
}

pub async fn get_model(tx: &mut Tx, id: &str) -> Result<Option<Model>, StoreError> {
    let row = sqlx::query("select id, context_window, input_per_mtok_usd, output_per_mtok_usd, provider, max_parallelism, created_at, updated_at from models where id = $1")
        .bind(id)
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(model_row).transpose()
}

pub async fn list_models(tx: &mut Tx) -> Result<Vec<Model>, StoreError> {
    let rows = sqlx::query("select id, context_window, input_per_mtok_usd, output_per_mtok_usd, provider, max_parallelism, created_at, updated_at from models order by id")
        .fetch_all(tx.conn())
        .await?;
    rows.iter().map(model_row).collect()
}

/// What the catalogue knows of each of `ids` (unknown models are left out).
pub async fn model_facts(tx: &mut Tx, ids: &[&str]) -> Result<ModelCatalogue, StoreError> {
    let mut out = ModelCatalogue::new();
    for id in ids {
        if let Some(m) = get_model(tx, id).await? {
            out.insert(
                m.id.clone(),
                ModelFacts {
                    context_window: m.context_window,
                    list_price: m.list_price,
                },
            );
        }
    }
    Ok(out)
}

pub async fn create_gg_config(
    tx: &mut Tx,
    account_id: &AccountId,
    input: &GgConfigInput,
) -> Result<GgConfig, StoreError> {
    input.validate()?;
    let id = GgConfigId::from_body(&new_id_body());
    let now = now_ms();
    sqlx::query(
        r#"insert into gg_configs (id, account_id, name, launch_slots, capabilities, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, $6)"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(input.name.as_str())
    .bind(to_json(&input.launch_slots))
    .bind(input.capabilities.to_string())
    .bind(now)
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        &id,
        "gg_config.created",
        &serde_json::json!({ "name": input.name, "accountId": account_id }),
    )
    .await?;
    get_gg_config(tx, account_id, &id)
        .await?
        .ok_or_else(|| StoreError::not_found("gg configuration", id))
}

/// The configuration, if `account_id` owns it and it is not deleted.
pub async fn get_gg_config(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &GgConfigId,
) -> Result<Option<GgConfig>, StoreError> {
    let row = sqlx::query(
        r#"select id, name, launch_slots, capabilities, created_at, updated_at from gg_configs
           where id = $1 and account_id = $2 and deleted_at is null"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .fetch_optional(tx.conn())
    .await?;
    row.as_ref().map(gg_row).transpose()
}

pub async fn gg_config_facts(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &GgConfigId,
) -> Result<Option<GgConfigFacts>, StoreError> {
    Ok(get_gg_config(tx, account_id, id).await?.map(|c| GgConfigFacts {
        name: c.name,
        launch_slots: c.launch_slots,
        capabilities: c.capabilities,
    }))
}

pub async fn list_gg_configs(tx: &mut Tx, account_id: &AccountId) -> Result<Vec<GgConfig>, StoreError> {
    let rows = sqlx::query(
        r#"select id, name, launch_slots, capabilities, created_at, updated_at from gg_configs
           where account_id = $1 and deleted_at is null order by created_at, id"#,
    )
    .bind(account_id.as_str())
    .fetch_all(tx.conn())
    .await?;
    rows.iter().map(gg_row).collect()
}

/// Deletes a configuration the account owns. It keeps its id (the row stays, marked deleted),
/// so cells naming it stay countable and report `gg_config_deleted`. False when the account
/// owns no live configuration with that id.
pub async fn delete_gg_config(tx: &mut Tx, account_id: &AccountId, id: &GgConfigId) -> Result<bool, StoreError> {
    let done =
        sqlx::query("update gg_configs set deleted_at = $3 where id = $1 and account_id = $2 and deleted_at is null")
            .bind(id.as_str())
            .bind(account_id.as_str())
            .bind(now_ms())
            .execute(tx.conn())
            .await?;
    if done.rows_affected() == 1 {
        events::append(
            tx.conn(),
            id,
            "gg_config.deleted",
            &serde_json::json!({ "accountId": account_id }),
        )
        .await?;
    }
    Ok(done.rows_affected() == 1)
}

/// Renames or reshapes a configuration the account owns; any other id is not found.
pub async fn update_gg_config(
    tx: &mut Tx,
    account_id: &AccountId,
    id: &GgConfigId,
    update: &GgConfigUpdate,
) -> Result<GgConfig, StoreError> {
    update.validate()?;
    let current = get_gg_config(tx, account_id, id)
        .await?
        .ok_or_else(|| StoreError::not_found("gg configuration", id.as_str()))?;
    sqlx::query(
        r#"update gg_configs set name = $3, launch_slots = $4, capabilities = $5, updated_at = $6
           where id = $1 and account_id = $2 and deleted_at is null"#,
    )
    .bind(id.as_str())
    .bind(account_id.as_str())
    .bind(update.name.as_ref().unwrap_or(&current.name))
    .bind(to_json(update.launch_slots.as_ref().unwrap_or(&current.launch_slots)))
    .bind(
        update
            .capabilities
            .as_ref()
            .unwrap_or(&current.capabilities)
            .to_string(),
    )
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    events::append(
        tx.conn(),
        id,
        "gg_config.updated",
        &serde_json::to_value(update).unwrap_or_default(),
    )
    .await?;
    get_gg_config(tx, account_id, id)
        .await?
        .ok_or_else(|| StoreError::not_found("gg configuration", id.as_str()))
}

fn assemble(slug: String, versions: Vec<TestCaseVersion>) -> TestCase {
    let latest = latest_version(versions.iter().map(|v| v.version.as_str())).map(str::to_string);
    TestCase {
        slug,
        latest_version: latest,
        versions,
    }
}

crate::one_step! {
    write ingest_test_case_version(input: &TestCaseVersionInput) -> TestCaseVersion;
    write update_test_case_version(slug: &str, version: &str, update: &TestCaseVersionUpdate) -> TestCaseVersion;
    read get_test_case_version(slug: &str, version: &str) -> Option<TestCaseVersion>;
    read get_test_case(slug: &str) -> Option<TestCase>;
    read list_test_cases() -> Vec<TestCase>;
    write create_harness(input: &HarnessInput) -> Harness;
    write update_harness(name: &str, update: &HarnessUpdate) -> Harness;
    read get_harness(name: &str) -> Option<Harness>;
    read list_harnesses() -> Vec<Harness>;
    write create_model(input: &ModelInput) -> Model;
    write update_model(id: &str, update: &ModelUpdate) -> Model;
    read get_model(id: &str) -> Option<Model>;
    read list_models() -> Vec<Model>;
    read model_facts(ids: &[&str]) -> ModelCatalogue;
    write create_gg_config(account_id: &AccountId, input: &GgConfigInput) -> GgConfig;
    read get_gg_config(account_id: &AccountId, id: &GgConfigId) -> Option<GgConfig>;
    read gg_config_facts(account_id: &AccountId, id: &GgConfigId) -> Option<GgConfigFacts>;
    read list_gg_configs(account_id: &AccountId) -> Vec<GgConfig>;
    write delete_gg_config(account_id: &AccountId, id: &GgConfigId) -> bool;
    write update_gg_config(account_id: &AccountId, id: &GgConfigId, update: &GgConfigUpdate) -> GgConfig;
}
