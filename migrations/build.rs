//! Lists the migrations from `sqlite/` and `postgres/` at build time, so
//! the list is never kept by hand: every `<version>_<name>.sql` file becomes one entry, in version
//! order, and a migration present for one backend only fails the build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn list(dir: &Path) -> BTreeMap<(i64, String), PathBuf> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let Some(stem) = file.strip_suffix(".sql") else {
            continue;
        };
        let (version, name) = stem
            .split_once('_')
            .unwrap_or_else(|| panic!("{file}: a migration is named <utc-timestamp>_<verb_noun>.sql"));
        let version: i64 = version
            .parse()
            .unwrap_or_else(|_| panic!("{file}: the part before the first _ is the version, a UTC timestamp"));
        out.insert((version, name.to_owned()), path);
    }
    out
}

fn main() {
    // Cargo runs a build script in its package's directory, which holds the two folders: a build
    // script binary built for one checkout never lists another checkout's migrations.
    let root = std::env::current_dir().expect("the package directory");
    let sqlite = list(&root.join("sqlite"));
    let postgres = list(&root.join("postgres"));
    if let Some(key) = sqlite.keys().find(|k| !postgres.contains_key(*k)) {
        panic!("migration {}_{} exists for sqlite but not for postgres", key.0, key.1);
    }
    if let Some(key) = postgres.keys().find(|k| !sqlite.contains_key(*k)) {
        panic!("migration {}_{} exists for postgres but not for sqlite", key.0, key.1);
    }
    let mut code = String::from("/// Every migration, in version order.\npub const MIGRATIONS: &[Migration] = &[\n");
    for ((version, name), sqlite_path) in &sqlite {
        let postgres_path = &postgres[&(*version, name.clone())];
        code.push_str(&format!(
            "    Migration {{ version: {version}, name: {name:?}, sqlite: include_str!({:?}), postgres: include_str!({:?}) }},\n",
            sqlite_path.canonicalize().expect("a migration path"),
            postgres_path.canonicalize().expect("a migration path"),
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("migrations.rs");
    std::fs::write(out, code).expect("writing the migration list");
    println!("cargo:rerun-if-changed=sqlite");
    println!("cargo:rerun-if-changed=postgres");
}
