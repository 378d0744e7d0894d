//! Transactions the caller owns. Repository functions that are steps of a larger write take a
//! `&mut Tx`, so a caller composes several of them into one transaction that commits or rolls
//! back as a whole (a workspace's admission with its meter reservation; a promotion's generation,
//! tree and policy checks). The `Store` methods of the same names are the one-step convenience:
//! begin, call, commit.
//!
//! Dropping a `Tx` without committing rolls it back: a crash (or an error returned with `?`) in
//! the middle of a composed write leaves none of it behind.

use crate::{Backend, Store, StoreError};
use sqlx::{Any, AnyConnection, Transaction};

/// An open write transaction.
pub struct Tx {
    inner: Transaction<'static, Any>,
    backend: Backend,
}

impl Tx {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub async fn commit(self) -> Result<(), StoreError> {
        self.inner.commit().await?;
        Ok(())
    }

    pub async fn rollback(self) -> Result<(), StoreError> {
        self.inner.rollback().await?;
        Ok(())
    }

    /// The transaction itself, for the repository functions written over sqlx's.
    pub(crate) fn inner(&mut self) -> &mut Transaction<'static, Any> {
        &mut self.inner
    }

    /// The connection statements of this transaction run on.
    pub(crate) fn conn(&mut self) -> &mut AnyConnection {
        &mut self.inner
    }
}

impl Store {
    /// Begins a transaction that reads and then writes. On SQLite its first statement is a write,
    /// so the transaction holds the write lock from the start: a deferred transaction that read
    /// first could not upgrade once another writer committed, and would fail at once instead of
    /// waiting its turn.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        let mut inner = self.pool().begin().await?;
        crate::dialect::hold_write_lock(self.backend(), &mut inner).await?;
        Ok(Tx {
            inner,
            backend: self.backend(),
        })
    }

    /// Begins a transaction that only reads: one consistent view, taking no write lock (so reads
    /// of a large matrix do not queue behind, or hold up, the writers on SQLite).
    pub async fn begin_read(&self) -> Result<Tx, StoreError> {
        Ok(Tx {
            inner: self.pool().begin().await?,
            backend: self.backend(),
        })
    }
}
