//! The console's signed-in state in a real Chromium against real `belay` processes: the header
//! names the account and its role, Sign out forgets the token, and a token that expires while a
//! page is open leads to a sign-in page that says so.

use crate::common::Belay;
use crate::console::Console;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_header_names_the_account_and_role_sign_out_forgets_the_token_and_expiry_says_so() {
    let b = Belay::start().await;
    let (s, created) = b.post("/v1/accounts", json!({"name": "Rita Reviewer"})).await;
    assert_eq!(s, 201, "{created}");
    let first = created["token"].as_str().unwrap().to_owned();
    let c = Console::open(&b.url).await;

    // The operator who set belay up, then signed out.
    c.sign_in(&b.token).await;
    c.until("the header's account", "!!document.querySelector('#who-role')")
        .await;
    assert_eq!(c.text("#who-role").await, "operator");
    c.click("#sign-out").await;
    c.ready("/sign-in").await;
    assert_eq!(c.eval::<String>("document.querySelector('#who').textContent").await, "");
    assert!(c.eval::<bool>("document.querySelector('#nav').hidden").await);
    assert!(c.text("#signed-out").await.contains("You signed out"));
    assert!(c.eval::<bool>("sessionStorage.getItem('belay.token') === null").await);
    // Nothing is remembered: a page asks for a sign-in again.
    c.visit("/sign-in").await;
    c.page.goto(format!("{}/plans", c.base)).await.unwrap();
    c.ready("/sign-in").await;

    // A member with a token that expires in 3 s.
    let (s, short) = b
        .request(
            "POST",
            "/v1/account/tokens",
            Some(&first),
            Some(r#"{"name":"browser","expiresInSeconds":3}"#),
        )
        .await;
    assert_eq!(s, 201, "{short}");
    c.sign_in(short["secret"].as_str().unwrap()).await;
    c.until("the header's account", "!!document.querySelector('#who-role')")
        .await;
    assert_eq!(c.text("#who-name").await, "Rita Reviewer");
    assert_eq!(c.text("#who-role").await, "member");
    assert!(!c.eval::<bool>("document.querySelector('#nav').hidden").await);
    c.screenshot("header-signed-in-member").await;

    tokio::time::sleep(Duration::from_secs(4)).await;
    c.click("a[href='/ladders']").await;
    c.until(
        "the sign-in page saying the token expired",
        "location.pathname === '/sign-in' && document.querySelector('#signed-out') \
         && document.querySelector('#signed-out').dataset.code === 'token_expired'",
    )
    .await;
    assert!(c.text("#signed-out").await.contains("expired"));
    assert_eq!(c.eval::<String>("document.querySelector('#who').textContent").await, "");
    c.screenshot("sign-in-token-expired").await;
    {
        // The refused calls are the API's 401s, nothing else.
        let mut j = c.journal.lock().unwrap();
        assert!(
            j.bad_answers.iter().all(|a| a.starts_with("401 ")),
            "{:?}",
            j.bad_answers
        );
        j.bad_answers.clear();
        j.errors.retain(|e| !e.starts_with("log: Failed to load resource"));
    }
    c.assert_clean("signing in and out");
    c.close().await;
}
