//! The deployment's Sandbox lease book in the database, where every sandbox worker reads it: the
//! Sandbox adapter's [`Leases`] over the store's `sandbox_leases` functions. It lives here, where
//! the store and the adapter meet, so that the Sandbox adapter never reaches into the store.

use belay_domain::ids::ProjectId;
use belay_sandbox::lease::{Acquired, LeaseFuture, Leases};
use belay_store::Store;
use belay_store::sandbox_leases::LeaseAcquired;

/// The lease book of the deployment whose database `store` is; `holder` names this worker in it.
#[derive(Clone)]
pub struct StoreLeases {
    pub store: Store,
    pub holder: String,
}

impl StoreLeases {
    /// A holder name for this process: host, pid and a random tail.
    pub fn new(store: Store) -> Self {
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        let holder = format!(
            "{}-{}-{}",
            host.trim(),
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Self { store, holder }
    }
}

impl Leases for StoreLeases {
    fn acquire<'a>(&'a self, project_id: &'a str, max: usize, now_ms: i64) -> LeaseFuture<'a, Acquired> {
        Box::pin(async move {
            let answer = self
                .store
                .acquire_sandbox_lease(&ProjectId::from(project_id), &self.holder, max, now_ms)
                .await
                .map_err(|e| e.to_string())?;
            Ok(match answer {
                LeaseAcquired::Held => Acquired::Held,
                LeaseAcquired::Taken => Acquired::Taken,
                LeaseAcquired::Reaping => Acquired::Reaping,
                LeaseAcquired::Full { held, max } => Acquired::Full { held, max },
            })
        })
    }

    fn begin_exec<'a>(
        &'a self,
        project_id: &'a str,
        exec_id: &'a str,
        now_ms: i64,
        expires_ms: i64,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            self.store
                .begin_sandbox_exec(&ProjectId::from(project_id), exec_id, &self.holder, now_ms, expires_ms)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn end_exec<'a>(&'a self, project_id: &'a str, exec_id: &'a str, now_ms: i64) -> LeaseFuture<'a, ()> {
        Box::pin(async move {
            self.store
                .end_sandbox_exec(&ProjectId::from(project_id), exec_id, now_ms)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn take_idle(&self, now_ms: i64, idle_ms: i64) -> LeaseFuture<'_, Vec<String>> {
        Box::pin(async move {
            self.store
                .take_idle_sandboxes(&self.holder, now_ms, idle_ms)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn release<'a>(&'a self, project_id: &'a str) -> LeaseFuture<'a, ()> {
        Box::pin(async move {
            self.store
                .release_sandbox_lease(&ProjectId::from(project_id))
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn projects(&self) -> LeaseFuture<'_, Vec<String>> {
        Box::pin(async move {
            let now = belay_sandbox::lease::wall_ms();
            Ok(self
                .store
                .sandbox_leases(now)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|l| l.project_id)
                .collect())
        })
    }
}
