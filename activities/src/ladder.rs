//! LadderClimbActivities: the climb's one step on the `belay.db` pool, one store transaction.

use crate::store_error;
use belay_store::Store;
use belay_store::ladders;
use belay_workflows::ladder::{ClimbStep, ClimbStepInput, ClimberLine};
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::{info, instrument};

pub struct LadderClimbActivities {
    pub store: Store,
}

#[activities]
impl LadderClimbActivities {
    #[activity(definition = belay_workflows::ladder::climb_definitions::Step)]
    #[instrument(skip_all, fields(ladder.id = %input.ladder_id), err(Debug))]
    pub async fn step(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ClimbStepInput,
    ) -> Result<ClimbStep, ActivityError> {
        let mut tx = self.store.begin().await.map_err(store_error)?;
        let found = ladders::climb_step(&mut tx, &input.account_id, &input.ladder_id)
            .await
            .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        let Some((cancelled, p)) = found else {
            return Ok(ClimbStep::default());
        };
        if !cancelled.is_empty() {
            info!(ladder.cancelled = cancelled.len(), "early stop");
        }
        Ok(ClimbStep {
            active: true,
            climbers: p
                .board
                .climbers
                .into_iter()
                .map(|c| ClimberLine {
                    climber_key: c.climber_key.0,
                    status: c.status,
                    current_rung: c.current_rung.map(|r| r.0),
                    unlaunchable: c.unlaunchable.map(|u| {
                        serde_json::to_value(&u)
                            .ok()
                            .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_string))
                            .unwrap_or_else(|| "unlaunchable".to_string())
                    }),
                })
                .collect(),
            cancelled: cancelled.len() as u64,
        })
    }
}
