//! The two migration folders describe one schema: after every migration, SQLite and PostgreSQL
//! hold the same tables, the same columns with the same type as each backend maps it and the same
//! nullability, the same primary keys, and the same indexes (columns, order, uniqueness).
//!
//! A migration written for one backend and forgotten, or written differently, for the other fails
//! here with the table and column named, before any query meets the difference.

use belay_store::Backend;
use belay_store::testing::fresh;
use sqlx::{AnyPool, Row};
use std::collections::{BTreeMap, BTreeSet};

/// A column as both backends can agree on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Column {
    name: String,
    /// `integer`, `real`, `text` or `blob`: what each backend's declared type stores.
    class: String,
    not_null: bool,
}

/// An index that is not the primary key: its columns in order and whether it is unique.
type Index = (Vec<String>, bool);

#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    columns: Vec<Column>,
    primary_key: Vec<String>,
    indexes: BTreeSet<Index>,
}

type Schema = BTreeMap<String, Table>;

/// The differences the backends keep on purpose, each measured and recorded: indexes one
/// backend's planner reads from and the other's reads faster without (decisions 0033 and 0035,
/// and the comments in the migrations that make them). Listed exactly: one that disappears must
/// leave this list too.
const DELIBERATE: &[&str] = &[
    r#"reviews: index (["account_id", "cell_key"], false) only on SQLite"#,
    r#"runs: index (["cell_key", "test_type", "loaded", "id"], false) only on SQLite"#,
    r#"runs: index (["cell_key"], false) only on PostgreSQL"#,
];

/// The class of a declared type, by SQLite's affinity rules on one side and PostgreSQL's
/// `data_type` on the other. A type neither maps is returned as it is, so it shows in the diff.
fn class(declared: &str) -> String {
    let t = declared.to_ascii_lowercase();
    let class = match t.as_str() {
        "bigint" | "integer" | "smallint" | "int" | "boolean" => "integer",
        "double precision" | "real" | "numeric" => "real",
        "text" | "character varying" | "varchar" | "jsonb" | "json" => "text",
        "bytea" | "blob" => "blob",
        _ => return t,
    };
    class.to_string()
}

async fn pool(url: &str) -> AnyPool {
    sqlx::any::install_default_drivers();
    AnyPool::connect(url).await.expect("connect for introspection")
}

async fn sqlite_schema(url: &str) -> Schema {
    let db = pool(url).await;
    let tables: Vec<String> = sqlx::query(
        "select name from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\' order by name",
    )
    .fetch_all(&db)
    .await
    .unwrap()
    .iter()
    .map(|r| r.get::<String, _>(0))
    .collect();
    let mut schema = Schema::new();
    for name in tables {
        let mut table = Table::default();
        let mut pk: Vec<(i64, String)> = Vec::new();
        for r in sqlx::query("select name, type, \"notnull\", pk from pragma_table_info($1) order by cid")
            .bind(&name)
            .fetch_all(&db)
            .await
            .unwrap()
        {
            let column: String = r.get(0);
            let pk_pos: i64 = r.get(3);
            if pk_pos > 0 {
                pk.push((pk_pos, column.clone()));
            }
            table.columns.push(Column {
                class: class(&r.get::<String, _>(1)),
                // A primary-key column is never null on PostgreSQL; SQLite lets a non-integer one
                // be, a quirk no belay row relies on.
                not_null: r.get::<i64, _>(2) != 0 || pk_pos > 0,
                name: column,
            });
        }
        pk.sort();
        table.primary_key = pk.into_iter().map(|(_, c)| c).collect();
        for r in sqlx::query("select name, \"unique\", origin from pragma_index_list($1)")
            .bind(&name)
            .fetch_all(&db)
            .await
            .unwrap()
        {
            if r.get::<String, _>(2) == "pk" {
                continue;
            }
            let index: String = r.get(0);
            let columns: Vec<String> = sqlx::query("select name from pragma_index_info($1) order by seqno")
                .bind(&index)
                .fetch_all(&db)
                .await
                .unwrap()
                .iter()
                .map(|c| c.get::<String, _>(0))
                .collect();
            table.indexes.insert((columns, r.get::<i64, _>(1) != 0));
        }
        schema.insert(name, table);
    }
    db.close().await;
    schema
}

async fn postgres_schema(url: &str) -> Schema {
    let db = pool(url).await;
    let mut schema = Schema::new();
    for r in sqlx::query(
        "select table_name::text, column_name::text, data_type::text, (is_nullable = 'NO')::int4
         from information_schema.columns where table_schema = 'public'
         order by table_name, ordinal_position",
    )
    .fetch_all(&db)
    .await
    .unwrap()
    {
        let table: String = r.get(0);
        schema.entry(table).or_default().columns.push(Column {
            name: r.get(1),
            class: class(&r.get::<String, _>(2)),
            not_null: r.get::<i32, _>(3) != 0,
        });
    }
    // Every index with its columns in key order; the primary key's apart.
    for r in sqlx::query(
        "select t.relname::text, i.indisprimary::int4, i.indisunique::int4,
                array_to_string(array(
                    select a.attname from unnest(i.indkey) with ordinality k(attnum, n)
                    join pg_attribute a on a.attrelid = t.oid and a.attnum = k.attnum
                    order by k.n), ',')
         from pg_index i
         join pg_class t on t.oid = i.indrelid
         join pg_namespace s on s.oid = t.relnamespace
         where s.nspname = 'public'",
    )
    .fetch_all(&db)
    .await
    .unwrap()
    {
        let table: String = r.get(0);
        let columns: Vec<String> = r.get::<String, _>(3).split(',').map(str::to_string).collect();
        let entry = schema.entry(table).or_default();
        if r.get::<i32, _>(1) != 0 {
            entry.primary_key = columns;
        } else {
            entry.indexes.insert((columns, r.get::<i32, _>(2) != 0));
        }
    }
    db.close().await;
    schema
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_migration_folders_make_the_same_schema() {
    let sqlite = fresh(Backend::Sqlite).await;
    let postgres = fresh(Backend::Postgres).await;
    let lite = sqlite_schema(&sqlite.url).await;
    let pg = postgres_schema(&postgres.url).await;
    assert!(lite.len() > 20, "the SQLite schema was read: {:?}", lite.keys());

    let mut differences = Vec::new();
    let names: BTreeSet<&String> = lite.keys().chain(pg.keys()).collect();
    for name in names {
        match (lite.get(name), pg.get(name)) {
            (Some(_), None) => differences.push(format!("{name}: only on SQLite")),
            (None, Some(_)) => differences.push(format!("{name}: only on PostgreSQL")),
            (Some(l), Some(p)) => {
                let lc: BTreeSet<&Column> = l.columns.iter().collect();
                let pc: BTreeSet<&Column> = p.columns.iter().collect();
                for c in lc.difference(&pc) {
                    differences.push(format!("{name}.{}: SQLite has {c:?}", c.name));
                }
                for c in pc.difference(&lc) {
                    differences.push(format!("{name}.{}: PostgreSQL has {c:?}", c.name));
                }
                if l.primary_key != p.primary_key {
                    differences.push(format!(
                        "{name}: primary key {:?} on SQLite, {:?} on PostgreSQL",
                        l.primary_key, p.primary_key
                    ));
                }
                for i in l.indexes.difference(&p.indexes) {
                    differences.push(format!("{name}: index {i:?} only on SQLite"));
                }
                for i in p.indexes.difference(&l.indexes) {
                    differences.push(format!("{name}: index {i:?} only on PostgreSQL"));
                }
            }
            (None, None) => unreachable!(),
        }
    }
    let unexpected: Vec<&String> = differences
        .iter()
        .filter(|d| !DELIBERATE.contains(&d.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the migration folders disagree:\n{}",
        unexpected.iter().map(|d| d.as_str()).collect::<Vec<_>>().join("\n")
    );
    let gone: Vec<&&str> = DELIBERATE
        .iter()
        .filter(|d| !differences.iter().any(|x| x == *d))
        .collect();
    assert!(
        gone.is_empty(),
        "deliberate differences no longer there (take them off the list): {gone:?}"
    );
}

#[test]
fn declared_types_map_to_one_class_per_storage() {
    assert_eq!(class("INTEGER"), "integer");
    assert_eq!(class("bigint"), "integer");
    assert_eq!(class("double precision"), "real");
    assert_eq!(class("text"), "text");
    assert_eq!(class("bytea"), "blob");
    // An unknown type is kept as declared, so the difference names it.
    assert_eq!(class("timestamptz"), "timestamptz");
}
