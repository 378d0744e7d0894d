//! The verification checks run the spec's own commands in the Sandbox: Bun and tsc must be in the
//! image (scripts/build-sandbox-image.sh), working offline on a read-only root, against the sample
//! app the integration tests compose Candidates from (`cli/tests/fixtures/sample-app`).

use belay_sandbox::{SandboxConfig, SandboxUser, Sandboxes, WORKSPACE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn image() -> String {
    let image = belay_testkit::sandbox_image(belay_sandbox::DEFAULT_IMAGE);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-sandbox-image.sh");
    if image == belay_sandbox::DEFAULT_IMAGE {
        // Builds the image when missing, and rebuilds one that predates Bun.
        let built = Command::new("bash")
            .arg(&script)
            .output()
            .expect("running build-sandbox-image.sh");
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    }
    image
}

fn sample_app() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cli/tests/fixtures/sample-app")
}

fn files(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read(&path).unwrap()));
        }
    }
}

/// Removes the containers and the network it made, also when the test fails.
struct Fixture {
    sandboxes: Sandboxes,
    label: String,
    network: String,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Ok(out) = Command::new("docker")
            .args(["ps", "-aq", "--filter", &self.label])
            .output()
        {
            let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            if !ids.is_empty() {
                let _ = Command::new("docker").args(["rm", "-f", "-v"]).args(&ids).output();
            }
        }
        let _ = Command::new("docker").args(["network", "rm", &self.network]).output();
    }
}

async fn fixture() -> Fixture {
    let tag = format!("tc{}", std::process::id());
    let config = SandboxConfig {
        image: image(),
        network: format!("belay-test-sbx-{tag}"),
        label_prefix: format!("belay.test.{tag}"),
        extra_labels: BTreeMap::from([("belay.test".to_owned(), "1".to_owned())]),
        ..SandboxConfig::default()
    };
    let label = format!("label=belay.test.{tag}.sandbox=1");
    let network = config.network.clone();
    let sandboxes = Sandboxes::connect(config)
        .await
        .expect("the Docker Engine must be reachable");
    Fixture {
        sandboxes,
        label,
        network,
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_commands_run_offline_in_a_sandbox_against_the_sample_app() {
    let f = fixture().await;
    let project = format!("proj_toolchain{}", std::process::id());
    f.sandboxes.ensure(&project).await.unwrap();
    let dir = format!("{WORKSPACE}/cand-toolchain");
    f.sandboxes.fresh_dir(&project, &dir, SandboxUser::Root).await.unwrap();
    let root = sample_app();
    let mut all = Vec::new();
    files(&root, &root, &mut all);
    for (path, bytes) in &all {
        f.sandboxes
            .write_file(&project, &dir, SandboxUser::Root, path, bytes)
            .await
            .unwrap()
            .unwrap();
    }
    let run = async |cmd: &str| {
        f.sandboxes
            .exec(&project, &dir, &sh(cmd), SandboxUser::Root, Duration::from_secs(120))
            .await
            .unwrap()
    };

    let version = run("bun --version").await;
    assert!(version.success(), "{version:?}");
    assert!(version.stdout.trim().starts_with("1."), "{version:?}");
    for cmd in ["bun install", "bun run build", "bun run typecheck"] {
        let out = run(cmd).await;
        assert!(out.success(), "{cmd}: {out:?}");
    }
    let test = run("bun test").await;
    assert!(test.success() && test.stderr.contains(" 6 pass"), "{test:?}");
    let security = run("bun test --test-name-pattern authorization").await;
    assert!(
        security.success() && security.stderr.contains(" 2 pass"),
        "{security:?}"
    );
    let contract = run("bun run --silent contract").await;
    assert!(contract.success(), "{contract:?}");
    let routes: serde_json::Value = serde_json::from_str(contract.stdout.trim()).unwrap();
    assert!(routes.as_array().unwrap().iter().any(|r| r["path"] == "/api/health"));
    let bench = run("bun run --silent bench").await;
    let p95: serde_json::Value = serde_json::from_str(bench.stdout.trim()).unwrap();
    assert!(p95["p95Ms"].as_f64().unwrap() > 0.0, "{bench:?}");
    let dev = run(
        "PORT=3210 bun run dev >/tmp/dev.log 2>&1 & for i in $(seq 50); do \
         bun -e 'const r = await fetch(\"http://127.0.0.1:3210/api/health\"); console.log(r.status)' 2>/dev/null && exit 0; \
         sleep 0.1; done; cat /tmp/dev.log; exit 1",
    )
    .await;
    assert!(dev.success() && dev.stdout.trim().ends_with("200"), "{dev:?}");

    // The commands can fail: a type error fails the typecheck, a broken test fails `bun test`.
    f.sandboxes
        .write_file(
            &project,
            &dir,
            SandboxUser::Root,
            "src/broken.ts",
            b"export const n: number = \"not a number\";\n",
        )
        .await
        .unwrap()
        .unwrap();
    let typecheck = run("bun run typecheck").await;
    assert!(
        !typecheck.success() && typecheck.stdout.contains("TS2322"),
        "{typecheck:?}"
    );
    f.sandboxes
        .write_file(
            &project,
            &dir,
            SandboxUser::Root,
            "test/broken.test.ts",
            b"import { expect, test } from \"bun:test\";\ntest(\"broken\", () => { expect(1).toBe(2); });\n",
        )
        .await
        .unwrap()
        .unwrap();
    let test = run("bun test").await;
    assert!(!test.success() && test.stderr.contains(" 1 fail"), "{test:?}");
    f.sandboxes.remove(&project).await.unwrap();
}
