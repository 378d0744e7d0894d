//! compose.yaml registers exactly the search attributes belay's workflows set: a workflow
//! started with an attribute the cluster does not know is refused, so a missing name would stop
//! every top-up or run in a compose deployment.

use std::collections::BTreeSet;

#[test]
fn compose_registers_every_search_attribute() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../compose.yaml");
    let text = std::fs::read_to_string(&path).expect("compose.yaml");
    let service = text
        .split("\n  temporal-search-attributes:\n")
        .nth(1)
        .expect("compose.yaml has a temporal-search-attributes service");
    let line = service
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("for name in "))
        .expect("the service loops over the attribute names");
    let registered: BTreeSet<&str> = line
        .trim_start_matches("for name in ")
        .trim_end_matches("; do")
        .split_whitespace()
        .collect();
    let set: BTreeSet<&str> = belay_workflows::search::ALL.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        registered, set,
        "compose.yaml's attribute list differs from search::ALL"
    );
    assert!(
        belay_workflows::search::ALL.iter().all(|(_, kind)| *kind == "Keyword"),
        "the service creates every attribute as a Keyword"
    );
    // Every belay service (the shared x-belay block and the sandbox pool, which restates its
    // dependencies) waits for the registration to complete.
    let waits = text
        .matches("temporal-search-attributes:\n        condition: service_completed_successfully")
        .count()
        + text
            .matches("temporal-search-attributes:\n      condition: service_completed_successfully")
            .count();
    assert!(waits >= 2, "belay services wait for the registration ({waits} found)");
}
