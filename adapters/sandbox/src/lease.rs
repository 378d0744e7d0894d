//! Where a Sandbox's life is recorded: its lease, its last use and the commands running in it.
//!
//! A deployment's workers share one lease book (the database: `belay_activities::sandbox_leases`), so a
//! worker's reaper removes a Sandbox only when the shared record says it has been idle with
//! nothing running, and SANDBOX_MAX counts every worker's Sandboxes. [`LocalLeases`] keeps the
//! same book in memory, for a process that is the only user of its Sandboxes (tests, benches).
//! The rules themselves are `belay_domain::sandbox_lease`.

use std::collections::HashMap;
use std::sync::Mutex;

use belay_domain::sandbox_lease::{LeaseFacts, LeaseState, admit, reapable};
use futures::future::BoxFuture;

/// What a lease book answers; its errors are text (the store's own error types stay there).
pub type LeaseFuture<'a, T> = BoxFuture<'a, Result<T, String>>;

/// The answer to [`Leases::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The project already held a live lease; its last use is now.
    Held,
    /// A new lease: a slot under SANDBOX_MAX was taken.
    Taken,
    /// Some worker is removing the project's Sandbox.
    Reaping,
    /// SANDBOX_MAX leases are held in the deployment.
    Full { held: usize, max: usize },
}

/// A deployment's lease book.
pub trait Leases: Send + Sync {
    /// The project's lease, or a new one while fewer than `max` are held.
    fn acquire<'a>(&'a self, project_id: &'a str, max: usize, now_ms: i64) -> LeaseFuture<'a, Acquired>;
    /// Marks a command running until `expires_ms`; `false` when there is no live lease.
    fn begin_exec<'a>(
        &'a self,
        project_id: &'a str,
        exec_id: &'a str,
        now_ms: i64,
        expires_ms: i64,
    ) -> LeaseFuture<'a, bool>;
    /// The command has finished; the Sandbox's last use is now.
    fn end_exec<'a>(&'a self, project_id: &'a str, exec_id: &'a str, now_ms: i64) -> LeaseFuture<'a, ()>;
    /// Takes the Sandboxes that may be removed now into removal, and names their projects.
    fn take_idle(&self, now_ms: i64, idle_ms: i64) -> LeaseFuture<'_, Vec<String>>;
    /// The Sandbox is gone: its slot is free.
    fn release<'a>(&'a self, project_id: &'a str) -> LeaseFuture<'a, ()>;
    /// The projects holding a lease.
    fn projects(&self) -> LeaseFuture<'_, Vec<String>>;
}

#[derive(Debug)]
struct Local {
    state: LeaseState,
    last_use_ms: i64,
    state_since_ms: i64,
    /// Exec id → expiry.
    execs: HashMap<String, i64>,
}

/// The lease book of one process, in memory.
#[derive(Debug, Default)]
pub struct LocalLeases {
    leases: Mutex<HashMap<String, Local>>,
}

impl LocalLeases {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Local>) -> T) -> T {
        f(&mut self.leases.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Leases for LocalLeases {
    fn acquire<'a>(&'a self, project_id: &'a str, max: usize, now_ms: i64) -> LeaseFuture<'a, Acquired> {
        let answer = self.with(|leases| {
            if let Some(l) = leases.get_mut(project_id) {
                if l.state == LeaseState::Reaping {
                    return Acquired::Reaping;
                }
                l.last_use_ms = l.last_use_ms.max(now_ms);
                return Acquired::Held;
            }
            match admit(leases.len(), max) {
                Err((held, max)) => Acquired::Full { held, max },
                Ok(()) => {
                    leases.insert(
                        project_id.to_owned(),
                        Local {
                            state: LeaseState::Live,
                            last_use_ms: now_ms,
                            state_since_ms: now_ms,
                            execs: HashMap::new(),
                        },
                    );
                    Acquired::Taken
                }
            }
        });
        Box::pin(async move { Ok(answer) })
    }

    fn begin_exec<'a>(
        &'a self,
        project_id: &'a str,
        exec_id: &'a str,
        now_ms: i64,
        expires_ms: i64,
    ) -> LeaseFuture<'a, bool> {
        let live = self.with(|leases| match leases.get_mut(project_id) {
            Some(l) if l.state == LeaseState::Live => {
                l.last_use_ms = l.last_use_ms.max(now_ms);
                l.execs.insert(exec_id.to_owned(), expires_ms);
                true
            }
            _ => false,
        });
        Box::pin(async move { Ok(live) })
    }

    fn end_exec<'a>(&'a self, project_id: &'a str, exec_id: &'a str, now_ms: i64) -> LeaseFuture<'a, ()> {
        self.with(|leases| {
            if let Some(l) = leases.get_mut(project_id) {
                l.execs.remove(exec_id);
                l.last_use_ms = l.last_use_ms.max(now_ms);
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn take_idle(&self, now_ms: i64, idle_ms: i64) -> LeaseFuture<'_, Vec<String>> {
        let taken = self.with(|leases| {
            let mut taken = Vec::new();
            for (project, l) in leases.iter_mut() {
                let facts = LeaseFacts {
                    state: l.state,
                    last_use_ms: l.last_use_ms,
                    state_since_ms: l.state_since_ms,
                    in_flight: l.execs.values().filter(|e| **e > now_ms).count() as u32,
                };
                if reapable(&facts, now_ms, idle_ms) {
                    l.state = LeaseState::Reaping;
                    l.state_since_ms = now_ms;
                    taken.push(project.clone());
                }
            }
            taken.sort();
            taken
        });
        Box::pin(async move { Ok(taken) })
    }

    fn release<'a>(&'a self, project_id: &'a str) -> LeaseFuture<'a, ()> {
        self.with(|leases| leases.remove(project_id));
        Box::pin(async { Ok(()) })
    }

    fn projects(&self) -> LeaseFuture<'_, Vec<String>> {
        let projects = self.with(|leases| leases.keys().cloned().collect());
        Box::pin(async move { Ok(projects) })
    }
}

/// Milliseconds since the epoch.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_local_book_keeps_the_shared_rules() {
        let book = LocalLeases::default();
        for n in 0..4 {
            assert_eq!(book.acquire(&format!("p{n}"), 4, 0).await.unwrap(), Acquired::Taken);
        }
        assert_eq!(
            book.acquire("p4", 4, 0).await.unwrap(),
            Acquired::Full { held: 4, max: 4 }
        );
        assert_eq!(book.acquire("p0", 4, 10).await.unwrap(), Acquired::Held);
        assert!(book.begin_exec("p0", "x", 10, 100_000).await.unwrap());
        let taken = book.take_idle(50_000, 1_000).await.unwrap();
        assert_eq!(taken, vec!["p1", "p2", "p3"], "p0 is running a command");
        assert!(!book.begin_exec("p1", "y", 50_001, 60_000).await.unwrap());
        assert_eq!(book.acquire("p1", 4, 50_001).await.unwrap(), Acquired::Reaping);
        book.end_exec("p0", "x", 60_000).await.unwrap();
        assert!(book.take_idle(60_500, 1_000).await.unwrap().is_empty());
        assert_eq!(book.take_idle(61_000, 1_000).await.unwrap(), vec!["p0"]);
        book.release("p1").await.unwrap();
        let mut left = book.projects().await.unwrap();
        left.sort();
        assert_eq!(left, vec!["p0", "p2", "p3"]);
    }
}
