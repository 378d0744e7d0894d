//! The schema's migrations, one folder per backend (`sqlite/`, `postgres/`), embedded in the
//! binary. The list is made from the files at build time (see build.rs), so adding a migration is
//! adding its two files, and a migration written for one backend only fails the build. Applying
//! them is the store's (`belay_store::migrate`); this crate only owns the files and their order.

/// One migration: a version (a UTC timestamp), a name, and its SQL for each backend.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

// `MIGRATIONS`, in version order, generated from the files by build.rs.
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    #[test]
    fn the_list_is_in_strictly_increasing_version_order_and_never_empty() {
        assert!(!MIGRATIONS.is_empty());
        assert!(MIGRATIONS.windows(2).all(|w| w[0].version < w[1].version));
        assert!(
            MIGRATIONS
                .iter()
                .all(|m| !m.sqlite.trim().is_empty() && !m.postgres.trim().is_empty())
        );
    }
}
