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
        .find(|l| l.starts_with("for spec in "))
        .expect("the service loops over the attributes as NAME:TYPE");
    let registered: BTreeSet<(&str, &str)> = line
        .trim_start_matches("for spec in ")
        .trim_end_matches("; do")
        .split_whitespace()
        .map(|spec| spec.split_once(':').expect("NAME:TYPE"))
        .collect();
    let set: BTreeSet<(&str, &str)> = belay_workflows::search::ALL.into_iter().collect();
    assert_eq!(
        registered, set,
        "compose.yaml's attributes (names and types) differ from search::ALL"
    );
    assert!(
        service.contains(r#"--name "$$name" --type "$$type""#),
        "the service creates each attribute with its own type"
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

/// The block of service `name` in compose.yaml's text: its line and every line after it up to
/// the next service or top-level key.
fn service<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text
        .find(&format!("\n  {name}:\n"))
        .unwrap_or_else(|| panic!("compose.yaml has no service {name}"))
        + 1;
    let rest = &text[start..];
    let mut end = rest.len();
    let mut offset = rest.find('\n').map_or(rest.len(), |i| i + 1);
    for line in rest[offset..].split_inclusive('\n') {
        let next_service = line.starts_with("  ") && !line[2..].starts_with([' ', '#', '\n']);
        let top_level = !line.starts_with([' ', '\n', '#']);
        if next_service || top_level {
            end = offset;
            break;
        }
        offset += line.len();
    }
    &rest[..end]
}

/// Pools on hosts of their own: only the API (both listeners) and the git pool mount the bare
/// repositories; every pool reaches objects through BELAY_OBJECT_STORE, whose S3 variables the
/// shared environment passes on; the harness pool reaches the Docker Engine through the socket
/// proxy, as the sandbox pool does, for adapters marked `sandbox`.
#[test]
fn compose_keeps_repositories_with_the_api_and_the_git_pool_and_objects_behind_a_url() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../compose.yaml");
    let text = std::fs::read_to_string(&path).expect("compose.yaml");
    for name in ["belay-api", "belay-git", "belay-worker-git"] {
        assert!(service(&text, name).contains("- belay-git:/data/git"), "{name}");
    }
    for name in [
        "belay-worker-workflows",
        "belay-worker-db",
        "belay-worker-harness",
        "belay-worker-sandbox",
        "belay-worker-llm",
        "belay-worker-browser",
    ] {
        assert!(!service(&text, name).contains("- belay-git:"), "{name}");
    }
    assert_eq!(text.matches("- belay-git:").count(), 3);
    for var in [
        "BELAY_OBJECT_STORE",
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_CA_BUNDLE",
    ] {
        assert!(
            text.contains(&format!("    {var}: ${{{var}:-")),
            "the shared environment passes {var} on"
        );
    }
    let harness = service(&text, "belay-worker-harness");
    assert!(
        harness.contains("DOCKER_HOST: tcp://docker-socket-proxy:2375"),
        "{harness}"
    );
    assert!(harness.contains("- docker-api"), "{harness}");
}

/// The llm pool gets the key under the one name belay reads (from `.env`'s ANTHROPIC_API_KEY),
/// and every service gets the TLS settings: a managed database's URL, Temporal's TLS, mTLS and
/// API key, the extra CA bundle.
#[test]
fn compose_passes_the_model_key_under_belays_name_and_the_tls_settings() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../compose.yaml");
    let text = std::fs::read_to_string(&path).expect("compose.yaml");
    let llm = service(&text, "belay-worker-llm");
    assert!(
        llm.contains("      BELAY_ANTHROPIC_API_KEY: ${ANTHROPIC_API_KEY:-}"),
        "{llm}"
    );
    let bare_key = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .any(|l| l.trim_start().starts_with("ANTHROPIC_API_KEY"));
    assert!(
        !bare_key,
        "a service is given ANTHROPIC_API_KEY, which belay never reads"
    );
    for var in [
        "DATABASE_URL",
        "BELAY_TEMPORAL_ADDRESS",
        "BELAY_TEMPORAL_NAMESPACE",
        "BELAY_TEMPORAL_TLS",
        "BELAY_TEMPORAL_CA_FILE",
        "BELAY_TEMPORAL_CERT_FILE",
        "BELAY_TEMPORAL_KEY_FILE",
        "BELAY_TEMPORAL_SERVER_NAME",
        "BELAY_TEMPORAL_API_KEY",
        "BELAY_CA_FILE",
    ] {
        assert!(
            text.contains(&format!("    {var}: ${{{var}:-")),
            "the shared environment passes {var} on"
        );
    }
}

/// The API plays run builds from an artifact origin of its own (decision 0051): its listener,
/// its URL as browsers reach it, the console's origin and the signing secret are set on the API
/// service, whose port is published beside the API's; the git-only twin serves no builds.
#[test]
fn compose_serves_run_builds_from_an_origin_of_their_own() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../compose.yaml");
    let text = std::fs::read_to_string(&path).expect("compose.yaml");
    let api = service(&text, "belay-api");
    for line in [
        "BELAY_API_ARTIFACT_LISTEN: 0.0.0.0:8090",
        "BELAY_API_ARTIFACT_URL: ${BELAY_API_ARTIFACT_URL:-http://localhost:8090}",
        "BELAY_CONSOLE_ORIGIN: ${BELAY_CONSOLE_ORIGIN:-http://localhost:8080}",
        "BELAY_ARTIFACT_SECRET: ${BELAY_ARTIFACT_SECRET:?",
        "- \"8090:8090\"",
    ] {
        assert!(api.contains(line), "belay-api lacks {line}:\n{api}");
    }
    assert!(
        !service(&text, "belay-git").contains("ARTIFACT"),
        "the git-only twin serves no builds"
    );
}
