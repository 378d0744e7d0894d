//! `belay bench auth`: what tracking tokens' last use costs authentication. Two APIs in this
//! process over one database, one writing each token's last use (at most once a minute per
//! token) and one not, answer the same `GET /v1/account` requests, spread over a set of fresh
//! tokens so that the first round of the tracking API pays each token's write; rounds alternate
//! which API goes first. The ratio is the tracking API's time over the other's (target ≤ 1.1×).

use belay_store::Store;
use std::path::Path;
use std::time::{Duration, Instant};

pub async fn auth(postgres_url: Option<String>, requests: usize, tokens: usize, rounds: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bin = crate::temporal::find_or_install(&dir.path().join("tools")).await?;
    let port = super::support::free_port()?;
    let server = crate::temporal::DevServer::start(&bin, dir.path(), port, super::support::free_port()?).await?;
    let address = format!("127.0.0.1:{port}");
    let mut result = backend("sqlite", None, dir.path(), &address, requests, tokens, rounds).await;
    if result.is_ok() {
        result = match &postgres_url {
            Some(url) => backend("postgres", Some(url), dir.path(), &address, requests, tokens, rounds).await,
            None => {
                println!("postgres: skipped (no --postgres-url)");
                Ok(())
            }
        };
    }
    server.stop().await;
    result
}

async fn serve(store: &Store, client: &temporalio_client::Client, dir: &Path, track: bool) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let state = belay_api::AppState {
        store: store.clone(),
        temporal: client.clone(),
        git: None,
        objects: crate::objects::dir_store(&dir.join(if track { "objects-t" } else { "objects-u" }))?,
        auth: belay_api::auth::AuthGuard::default().with_last_used_tracking(track),
        artifacts: None,
        temporal_ui: None,
    };
    tokio::spawn(belay_api::serve(listener, state, std::future::pending()));
    Ok(url)
}

/// `requests` GETs of `/v1/account` at 4 at a time, token by token in turn; the wall time.
async fn round(http: &reqwest::Client, url: &str, tokens: &[String], requests: usize) -> anyhow::Result<Duration> {
    use futures::StreamExt;
    let start = Instant::now();
    let mut answers = futures::stream::iter(0..requests)
        .map(|i| {
            let req = http
                .get(format!("{url}/v1/account"))
                .bearer_auth(&tokens[i % tokens.len()]);
            async move { req.send().await.map(|r| r.status().as_u16()) }
        })
        .buffer_unordered(4);
    while let Some(status) = answers.next().await {
        let status = status?;
        anyhow::ensure!(status == 200, "GET /v1/account answered {status}");
    }
    Ok(start.elapsed())
}

#[allow(clippy::too_many_arguments)]
async fn backend(
    label: &str,
    postgres: Option<&str>,
    dir: &Path,
    address: &str,
    requests: usize,
    tokens: usize,
    rounds: usize,
) -> anyhow::Result<()> {
    let dir = dir.join(label);
    std::fs::create_dir_all(&dir)?;
    let store = super::support::fresh_store(&dir, postgres, "auth").await?;
    let client = belay_client::connect(address, "default", "belay-bench").await?;
    let (account, warm) = store.create_account("bench").await?;
    let mut secrets = Vec::new();
    for i in 0..tokens.max(1) {
        secrets.push(store.create_named_token(&account.id, &format!("t{i}"), None).await?.1);
    }
    let tracked = serve(&store, &client, &dir, true).await?;
    let untracked = serve(&store, &client, &dir, false).await?;
    let http = reqwest::Client::new();
    // Warm both (connections, statement caches) with a token outside the measured set.
    for url in [&tracked, &untracked] {
        round(&http, url, std::slice::from_ref(&warm), 200).await?;
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for r in 0..rounds.max(1) {
        if r % 2 == 0 {
            with.push(round(&http, &tracked, &secrets, requests).await?);
            without.push(round(&http, &untracked, &secrets, requests).await?);
        } else {
            without.push(round(&http, &untracked, &secrets, requests).await?);
            with.push(round(&http, &tracked, &secrets, requests).await?);
        }
    }
    let written = store
        .list_tokens(&account.id)
        .await?
        .iter()
        .filter(|t| t.last_used_at.is_some())
        .count();
    let total = |d: &[Duration]| d.iter().sum::<Duration>();
    let (tw, tu) = (total(&with), total(&without));
    let n = (requests * with.len()) as f64;
    println!(
        "{label}: GET /v1/account × {requests} × {} rounds over {} tokens, 4 at a time",
        with.len(),
        secrets.len()
    );
    println!(
        "  with last-used tracking:    {:>8.1} µs/request ({:.0} requests/s); last use written for {written} token(s)",
        tw.as_secs_f64() * 1e6 / n,
        n / tw.as_secs_f64()
    );
    println!(
        "  without last-used tracking: {:>8.1} µs/request ({:.0} requests/s)",
        tu.as_secs_f64() * 1e6 / n,
        n / tu.as_secs_f64()
    );
    println!("  ratio: {:.3}× (target ≤ 1.1×)", tw.as_secs_f64() / tu.as_secs_f64());
    store.close().await;
    Ok(())
}
