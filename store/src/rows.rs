//! Reading rows into domain types: JSON text columns, 0/1 booleans and the job and run shapes.

use crate::StoreError;
use belay_domain::attempt::FailureClass;
use belay_domain::catalogue::TestType;
use belay_domain::job::{CasePin, Combination, Job, JobStatus, JobTimestamps, Origin};
use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::BTreeMap;

pub(crate) fn json<T: DeserializeOwned>(text: &str, column: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable value")
}

/// The one way an enum becomes text in a column: its serialized name (`snake_case`, as the API
/// shows it), so a column reads the same as the JSON a client sees.
pub(crate) fn enum_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The enum a column's text names, or [`StoreError::Corrupt`] naming `what`.
pub(crate) fn enum_from<T: serde::de::DeserializeOwned>(s: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| StoreError::Corrupt(format!("unknown {what} {s:?}")))
}

pub(crate) fn status(text: &str) -> Result<JobStatus, StoreError> {
    enum_from(text, "job status")
}

pub(crate) fn test_type(text: &str) -> Result<TestType, StoreError> {
    enum_from(text, "test type")
}

/// The columns [`job`] reads, in a form every `select` of jobs shares.
pub(crate) const JOB_COLUMNS: &str = "queue_seq, id, status, case_slug, case_version, case_variant, engine, \
     combo_kind, harness, model, provider, gg_config_id, gg_config_name, gg_bindings, cell_key, test_type, \
     user_id, origin, attempt, retry_of, error, created_at, queued_at, pending_at, dispatched_at, starting_at, \
     running_at, completed_at, failed_at, canceled_at, retry_withheld, held_by, failure_class";

pub(crate) fn combination(row: &AnyRow) -> Result<Combination, StoreError> {
    let kind: String = row.try_get("combo_kind")?;
    Ok(match kind.as_str() {
        "harness" => Combination::Harness {
            harness: row.try_get("harness")?,
            model: row.try_get::<Option<String>, _>("model")?.unwrap_or_default(),
            provider: row.try_get("provider")?,
        },
        "gg" => {
            let bindings: Option<String> = row.try_get("gg_bindings")?;
            Combination::Gg {
                gg_config_id: row.try_get::<Option<String>, _>("gg_config_id")?.unwrap_or_default(),
                bindings: match bindings {
                    Some(b) => json::<BTreeMap<String, String>>(&b, "gg_bindings")?,
                    None => BTreeMap::new(),
                },
            }
        }
        other => return Err(StoreError::Corrupt(format!("unknown combination kind {other:?}"))),
    })
}

pub(crate) fn pin(row: &AnyRow) -> Result<CasePin, StoreError> {
    Ok(CasePin {
        slug: row.try_get("case_slug")?,
        version: row.try_get("case_version")?,
        variant: row.try_get("case_variant")?,
        engine: row.try_get("engine")?,
    })
}

pub(crate) fn job(row: &AnyRow) -> Result<Job, StoreError> {
    let origin: Option<String> = row.try_get("origin")?;
    let tt: Option<String> = row.try_get("test_type")?;
    Ok(Job {
        id: row.try_get::<String, _>("id")?.into(),
        queue_seq: row.try_get("queue_seq")?,
        status: status(&row.try_get::<String, _>("status")?)?,
        case: pin(row)?,
        combination: combination(row)?,
        gg_config_name: row.try_get("gg_config_name")?,
        cell_key: row.try_get("cell_key")?,
        test_type: tt.as_deref().map(test_type).transpose()?,
        user_id: row.try_get::<Option<String>, _>("user_id")?.map(Into::into),
        origin: origin
            .as_deref()
            .map(Origin::parse)
            .transpose()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        attempt: row.try_get("attempt")?,
        retry_of: row.try_get::<Option<String>, _>("retry_of")?.map(Into::into),
        error: row.try_get("error")?,
        retry_withheld: row.try_get::<i64, _>("retry_withheld")? != 0,
        held_by: row.try_get("held_by")?,
        failure_class: row
            .try_get::<Option<String>, _>("failure_class")?
            .as_deref()
            .map(|c| FailureClass::parse(c).ok_or_else(|| StoreError::Corrupt(format!("failure class {c}"))))
            .transpose()?,
        created_at: row.try_get("created_at")?,
        timestamps: JobTimestamps {
            queued_at: row.try_get("queued_at")?,
            pending_at: row.try_get("pending_at")?,
            dispatched_at: row.try_get("dispatched_at")?,
            starting_at: row.try_get("starting_at")?,
            running_at: row.try_get("running_at")?,
            completed_at: row.try_get("completed_at")?,
            failed_at: row.try_get("failed_at")?,
            canceled_at: row.try_get("canceled_at")?,
        },
    })
}

/// The `<status>_at` column a transition into `s` stamps.
pub(crate) fn timestamp_column(s: JobStatus) -> &'static str {
    match s {
        JobStatus::Queued => "queued_at",
        JobStatus::Pending => "pending_at",
        JobStatus::Dispatched => "dispatched_at",
        JobStatus::Starting => "starting_at",
        JobStatus::Running => "running_at",
        JobStatus::Completed => "completed_at",
        JobStatus::Failed => "failed_at",
        JobStatus::Canceled => "canceled_at",
    }
}

/// `'a', 'b'` for an `in (…)` list of statuses (fixed strings, never user input).
pub(crate) fn status_list(statuses: &[JobStatus]) -> String {
    statuses
        .iter()
        .map(|s| format!("'{}'", enum_text(s)))
        .collect::<Vec<_>>()
        .join(", ")
}
