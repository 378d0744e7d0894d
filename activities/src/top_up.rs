//! The top-up's steps behind [`StoreActivities`]'s top-up activities (`belay.db`), each one store
//! transaction: the claim (a ladder's or a plan's), the enqueue and the release.

use crate::store::StoreActivities;
use crate::{Plain, fatal, store_error};
use belay_domain::buffer::target_in_force;
use belay_domain::ids::{LadderId, PlanId};
use belay_domain::job::Origin;
use belay_domain::top_up::{Skipped, TopUpAnswer};
use belay_store::coverage::{self, Claim};
use belay_store::ladders;
use belay_store::metrics::{Feed, TopUpEnd, record_top_up_end, record_top_up_skipped};
use belay_workflows::top_up::{ClaimAnswer, ClaimInput, EnqueueInput, Enqueued, ReleaseInput};
use temporalio_sdk::activities::ActivityError;
use tracing::info;

/// A test-only failpoint: with `BELAY_FAILPOINT=topup-after-claim` a claim activity that took
/// the claim commits it and then never answers, as a worker that stalls there would, until the
/// process is killed.
pub const AFTER_CLAIM: &str = "topup-after-claim";

/// Stalls forever when the [`AFTER_CLAIM`] failpoint is set and the claim was taken.
pub(crate) async fn after_claim(claim: Claim) {
    if claim == Claim::Claimed && crate::failpoint(AFTER_CLAIM) {
        tracing::warn!("failpoint {AFTER_CLAIM}: the claim is committed; this worker answers no more");
        std::future::pending::<()>().await;
    }
}

/// Records a claim that found the plan busy or paused, for the metrics (once per top-up).
pub(crate) async fn record_skip(
    tx: &mut belay_store::Tx,
    input: &ClaimInput,
    claim: Claim,
) -> Result<(), ActivityError> {
    let end = match claim {
        Claim::Busy => TopUpEnd::Busy,
        Claim::Paused => TopUpEnd::Paused,
        Claim::Claimed | Claim::Missing => return Ok(()),
    };
    record_top_up_skipped(tx, input.of, &input.plan_id, &input.holder, end)
        .await
        .map_err(store_error)
}

pub(crate) fn claim_answer(claim: Claim) -> ClaimAnswer {
    match claim {
        Claim::Claimed => ClaimAnswer::Claimed,
        Claim::Busy => ClaimAnswer::Busy,
        Claim::Paused => ClaimAnswer::Paused,
        Claim::Missing => ClaimAnswer::Missing,
    }
}

impl StoreActivities {
    /// A ladder's claim: a disabled ladder is not claimed, and its skip is recorded.
    pub(crate) async fn claim_ladder(&self, input: ClaimInput) -> Result<ClaimAnswer, ActivityError> {
        let mut tx = self.store.begin().await.map_err(store_error)?;
        let claim = ladders::claim_top_up(
            &mut tx,
            &input.account_id,
            &LadderId::from(input.plan_id.as_str()),
            &input.holder,
            belay_store::now_ms(),
            self.top_up_lease_ms,
        )
        .await
        .map_err(store_error)?;
        if claim == Claim::Paused {
            ladders::record_skipped(&mut tx, &input.account_id, &LadderId::from(input.plan_id.as_str()))
                .await
                .map_err(store_error)?;
        }
        record_skip(&mut tx, &input, claim).await?;
        tx.commit().await.map_err(store_error)?;
        after_claim(claim).await;
        Ok(claim_answer(claim))
    }

    /// A ladder's enqueue: settle what the gate decided, then walk the current rungs.
    pub(crate) async fn enqueue_ladder(&self, input: EnqueueInput) -> Result<Enqueued, ActivityError> {
        let mut tx = self.store.begin().await.map_err(store_error)?;
        let Some(answer) = ladders::enqueue_top_up(
            &mut tx,
            &input.account_id,
            &LadderId::from(input.plan_id.as_str()),
            &input.topup_id,
        )
        .await
        .map_err(store_error)?
        else {
            return Err(fatal(Plain(format!("ladder {} not found", input.plan_id))));
        };
        tx.commit().await.map_err(store_error)?;
        info!(
            topup.enqueued = answer.top_up.enqueued,
            topup.cells = answer.top_up.launched.len(),
            topup.recorded = answer.recorded,
            topup.cancelled = answer.cancelled.len(),
            "ladder topped up"
        );
        Ok(Enqueued {
            enqueued: answer.top_up.enqueued,
        })
    }
}

impl StoreActivities {
    /// Takes the claim (a paused plan's or disabled ladder's skip recorded), in one transaction.
    pub(crate) async fn claim_step(&self, input: ClaimInput) -> Result<ClaimAnswer, ActivityError> {
        if input.of == Feed::Ladder {
            return self.claim_ladder(input).await;
        }
        let mut tx = self.store.begin().await.map_err(store_error)?;
        let claim = coverage::claim_top_up(
            &mut tx,
            &input.account_id,
            &PlanId::from(input.plan_id.as_str()),
            &input.holder,
            belay_store::now_ms(),
            self.top_up_lease_ms,
        )
        .await
        .map_err(store_error)?;
        if claim == Claim::Paused {
            let setting = coverage::buffer_setting(&mut tx, &input.account_id)
                .await
                .map_err(store_error)?;
            let plan = coverage::get_plan(&mut tx, &input.account_id, &PlanId::from(input.plan_id.as_str()))
                .await
                .map_err(store_error)?;
            let target = target_in_force(setting, plan.and_then(|p| p.buffer_target));
            coverage::record_skipped(
                &mut tx,
                &input.account_id,
                &PlanId::from(input.plan_id.as_str()),
                &TopUpAnswer::skipped(target, Skipped::Paused),
            )
            .await
            .map_err(store_error)?;
        }
        record_skip(&mut tx, &input, claim).await?;
        tx.commit().await.map_err(store_error)?;
        after_claim(claim).await;
        Ok(claim_answer(claim))
    }

    /// Walks and enqueues, recording the answer under the top-up id, in one transaction.
    pub(crate) async fn enqueue_step(&self, input: EnqueueInput) -> Result<Enqueued, ActivityError> {
        if input.of == Feed::Ladder {
            return self.enqueue_ladder(input).await;
        }
        let mut tx = self.store.begin().await.map_err(store_error)?;
        let Some(plan) = coverage::resolve_plan(&mut tx, &input.account_id, &PlanId::from(input.plan_id.as_str()))
            .await
            .map_err(store_error)?
        else {
            return Err(fatal(Plain(format!("coverage plan {} not found", input.plan_id))));
        };
        let origin = Origin::Plan(input.plan_id.clone());
        let answer = coverage::enqueue_top_up(
            &mut tx,
            &input.account_id,
            &origin,
            &plan.cells,
            plan.plan.runs_per_cell,
            plan.target,
            &input.topup_id,
        )
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        info!(
            topup.enqueued = answer.enqueued,
            topup.cells = answer.launched.len(),
            "topped up"
        );
        Ok(Enqueued {
            enqueued: answer.enqueued,
        })
    }

    /// Records the top-up's end and releases the claim if this holder has it, in one transaction.
    pub(crate) async fn release_step(&self, input: ReleaseInput) -> Result<bool, ActivityError> {
        let mut tx = self.store.begin().await.map_err(store_error)?;
        record_top_up_end(&mut tx, input.of, &input.plan_id, &input.holder)
            .await
            .map_err(store_error)?;
        let released = match input.of {
            Feed::Plan => coverage::release_top_up(&mut tx, &PlanId::from(input.plan_id.as_str()), &input.holder).await,
            Feed::Ladder => {
                ladders::release_top_up(&mut tx, &LadderId::from(input.plan_id.as_str()), &input.holder).await
            }
        }
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        Ok(released)
    }
}
