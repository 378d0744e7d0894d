//! Providers: where harnesses and models send their calls. Each may carry a lane (a cap on the
//! jobs that reach it running at once, across harnesses); a harness or a model names the provider
//! it runs on, and a provider still named cannot be deleted.

use crate::Tx;
use crate::{StoreError, now_ms};
use belay_domain::catalogue::{Provider, ProviderInput, ProviderUpdate};
use belay_domain::dispatch::{Lane, LaneKey};
use belay_domain::validation::ValidationError;
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::BTreeMap;

fn provider_row(r: &AnyRow) -> Result<Provider, StoreError> {
    Ok(Provider {
        name: r.try_get("name")?,
        max_parallelism: r.try_get("max_parallelism")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Refuses (422, naming `field`) a provider the catalogue does not hold; `None` names none.
pub(crate) async fn require_provider(tx: &mut Tx, field: &str, name: Option<&str>) -> Result<(), StoreError> {
    let Some(name) = name else { return Ok(()) };
    if get_provider(tx, name).await?.is_none() {
        return Err(ValidationError::new(field, format!("provider {name} does not exist")).into());
    }
    Ok(())
}

pub async fn create_provider(tx: &mut Tx, input: &ProviderInput) -> Result<Provider, StoreError> {
    input.validate()?;
    let res = sqlx::query(
        "insert into providers (name, max_parallelism, created_at, updated_at) values ($1, $2, $3, $3) on conflict do nothing",
    )
    .bind(input.name.as_str())
    .bind(input.max_parallelism)
    .bind(now_ms())
    .execute(tx.conn())
    .await?;
    if res.rows_affected() == 0 {
        return Err(StoreError::Conflict(format!(
            "name: provider {} already exists",
            input.name
        )));
    }
    get_provider(tx, &input.name)
        .await?
        .ok_or_else(|| StoreError::not_found("provider", &input.name))
}

pub async fn get_provider(tx: &mut Tx, name: &str) -> Result<Option<Provider>, StoreError> {
    let row = sqlx::query("select name, max_parallelism, created_at, updated_at from providers where name = $1")
        .bind(name)
        .fetch_optional(tx.conn())
        .await?;
    row.as_ref().map(provider_row).transpose()
}

pub async fn list_providers(tx: &mut Tx) -> Result<Vec<Provider>, StoreError> {
    let rows = sqlx::query("select name, max_parallelism, created_at, updated_at from providers order by name")
        .fetch_all(tx.conn())
        .await?;
    rows.iter().map(provider_row).collect()
}

/// Sets or clears a provider's lane; the next claim reads it.
pub async fn update_provider(tx: &mut Tx, name: &str, update: &ProviderUpdate) -> Result<Provider, StoreError> {
    update.validate()?;
    let res = sqlx::query("update providers set max_parallelism = $2, updated_at = $3 where name = $1")
        .bind(name)
        .bind(update.max_parallelism.flatten())
        .bind(now_ms())
        .execute(tx.conn())
        .await?;
    if res.rows_affected() == 0 {
        return Err(StoreError::not_found("provider", name));
    }
    get_provider(tx, name)
        .await?
        .ok_or_else(|| StoreError::not_found("provider", name))
}

/// The harnesses and the models that name a provider, each in name order.
pub async fn provider_users(tx: &mut Tx, name: &str) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let names = |rows: Vec<AnyRow>, col: &str| -> Result<Vec<String>, StoreError> {
        rows.iter().map(|r| Ok(r.try_get::<String, _>(col)?)).collect()
    };
    let harnesses = sqlx::query("select name from harnesses where provider = $1 order by name")
        .bind(name)
        .fetch_all(tx.conn())
        .await?;
    let models = sqlx::query("select id from models where provider = $1 order by id")
        .bind(name)
        .fetch_all(tx.conn())
        .await?;
    Ok((names(harnesses, "name")?, names(models, "id")?))
}

/// Deletes a provider no harness or model names; one still named is refused (409) with the
/// names of those that use it, and nothing is deleted.
pub async fn delete_provider(tx: &mut Tx, name: &str) -> Result<(), StoreError> {
    if get_provider(tx, name).await?.is_none() {
        return Err(StoreError::not_found("provider", name));
    }
    let (harnesses, models) = provider_users(tx, name).await?;
    if !harnesses.is_empty() || !models.is_empty() {
        return Err(StoreError::Conflict(format!(
            "provider {name} is still used by harnesses [{}] and models [{}]",
            harnesses.join(", "),
            models.join(", ")
        )));
    }
    sqlx::query("delete from providers where name = $1")
        .bind(name)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// What the claim needs of the catalogue's shared lanes: each provider and model lane with a
/// cap, the provider each harness and each model runs on.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedLanes {
    pub caps: BTreeMap<LaneKey, Lane>,
    pub harness_provider: BTreeMap<String, String>,
    pub model_provider: BTreeMap<String, String>,
    /// Harnesses that are not provider-routed and run on a provider with a lane: every one of
    /// their jobs occupies that lane.
    pub bound: BTreeMap<String, LaneKey>,
}

impl SharedLanes {
    /// The provider and model lanes (with a cap) a job occupies besides its harness lane: its
    /// combination's provider, else its harness's, else each model's; and each model's own.
    pub fn of(&self, harness: &str, provider: Option<&str>, models: &[String]) -> Vec<LaneKey> {
        let mut out = Vec::new();
        let mut push = |k: LaneKey| {
            if self.caps.contains_key(&k) && !out.contains(&k) {
                out.push(k);
            }
        };
        match provider.or_else(|| self.harness_provider.get(harness).map(String::as_str)) {
            Some(p) => push(LaneKey::Provider(p.to_string())),
            None => {
                for m in models {
                    if let Some(p) = self.model_provider.get(m) {
                        push(LaneKey::Provider(p.clone()));
                    }
                }
            }
        }
        for m in models {
            push(LaneKey::Model(m.clone()));
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.caps.is_empty()
    }
}

/// Reads the shared lanes' caps and who runs on which provider.
pub(crate) async fn shared_lanes(tx: &mut Tx) -> Result<SharedLanes, StoreError> {
    let mut out = SharedLanes::default();
    let lane = |cap: i64| Lane {
        cap,
        occupied: 0,
        truncated: false,
    };
    for r in sqlx::query("select name, max_parallelism from providers where max_parallelism is not null")
        .fetch_all(tx.conn())
        .await?
    {
        out.caps.insert(
            LaneKey::Provider(r.try_get("name")?),
            lane(r.try_get("max_parallelism")?),
        );
    }
    for r in sqlx::query(
        "select id, provider, max_parallelism from models where provider is not null or max_parallelism is not null",
    )
    .fetch_all(tx.conn())
    .await?
    {
        let id: String = r.try_get("id")?;
        if let Some(cap) = r.try_get::<Option<i64>, _>("max_parallelism")? {
            out.caps.insert(LaneKey::Model(id.clone()), lane(cap));
        }
        if let Some(p) = r.try_get::<Option<String>, _>("provider")? {
            out.model_provider.insert(id, p);
        }
    }
    for r in sqlx::query("select name, provider, provider_routed from harnesses where provider is not null")
        .fetch_all(tx.conn())
        .await?
    {
        let (name, provider): (String, String) = (r.try_get("name")?, r.try_get("provider")?);
        let key = LaneKey::Provider(provider.clone());
        if r.try_get::<i64, _>("provider_routed")? == 0 && out.caps.contains_key(&key) {
            out.bound.insert(name.clone(), key);
        }
        out.harness_provider.insert(name, provider);
    }
    Ok(out)
}

crate::one_step! {
    write create_provider(input: &ProviderInput) -> Provider;
    read get_provider(name: &str) -> Option<Provider>;
    read list_providers() -> Vec<Provider>;
    write update_provider(name: &str, update: &ProviderUpdate) -> Provider;
    read provider_users(name: &str) -> (Vec<String>, Vec<String>);
    write delete_provider(name: &str) -> ();
}
