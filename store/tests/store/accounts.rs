//! Accounts and their tokens in the store, on SQLite and on PostgreSQL: named and expiring
//! tokens, revocation by the owner or anyone, the last enabled operator, last use written at
//! most once a minute, and the actor every event appended within a request records.

use belay_domain::access::Role;
use belay_domain::api_token::{LAST_USED_EVERY_MS, TokenState};
use belay_domain::ids::AccountId;
use belay_store::accounts::{AccountChange, Authentication};
use belay_store::events::{Actor, ActorSlot, EventFilter, with_actor_slot};
use belay_store::on_both;
use belay_store::{Store, StoreError, now_ms};
use std::sync::Arc;

fn state(a: &Authentication) -> Option<TokenState> {
    match a {
        Authentication::Valid { .. } => Some(TokenState::Valid),
        Authentication::Refused(s) => Some(*s),
        Authentication::Unknown => None,
    }
}

on_both!(tokens_are_named_listed_expire_and_are_revoked, |s: Store| async move {
    let (alice, first) = s.create_account("alice").await.unwrap();
    let (bob, _) = s.create_account("bob").await.unwrap();
    let (ci, secret) = s.create_named_token(&alice.id, "ci", Some(3600)).await.unwrap();
    assert_eq!(ci.name, "ci");
    assert!(secret.starts_with(ci.prefix.as_deref().unwrap()));
    assert!(ci.expires_at.unwrap() > ci.created_at);
    for (name, life, field) in [
        ("", None, "name"),
        ("x", Some(0), "expiresInSeconds"),
        ("x", Some(366 * 86_400), "expiresInSeconds"),
    ] {
        match s.create_named_token(&alice.id, name, life).await {
            Err(StoreError::Invalid(v)) => assert_eq!(v.field, field),
            other => panic!("{other:?}"),
        }
    }
    let listed = s.list_tokens(&alice.id).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["first", "ci"]
    );

    let now = now_ms();
    assert_eq!(
        state(&s.authenticate_token(&secret, now, false).await.unwrap()),
        Some(TokenState::Valid)
    );
    let later = ci.expires_at.unwrap();
    assert_eq!(
        state(&s.authenticate_token(&secret, later, false).await.unwrap()),
        Some(TokenState::Expired)
    );
    assert_eq!(
        state(&s.authenticate_token("bly_nothing", now, false).await.unwrap()),
        None
    );

    // Bob cannot find Alice's token; Alice revokes it; revoking again changes nothing.
    assert!(matches!(
        s.revoke_token(&ci.id, Some(&bob.id)).await,
        Err(StoreError::NotFound { .. })
    ));
    let revoked = s.revoke_token(&ci.id, Some(&alice.id)).await.unwrap();
    let again = s.revoke_token(&ci.id, None).await.unwrap();
    assert_eq!(revoked.revoked_at, again.revoked_at);
    assert_eq!(
        state(&s.authenticate_token(&secret, now, false).await.unwrap()),
        Some(TokenState::Revoked)
    );
    assert_eq!(
        state(&s.authenticate_token(&first, now, false).await.unwrap()),
        Some(TokenState::Valid)
    );
});

on_both!(last_use_is_written_at_most_once_a_minute, |s: Store| async move {
    let (alice, token) = s.create_account("alice").await.unwrap();
    let t0 = now_ms();
    let last = |s: Store, id: String| async move {
        s.list_tokens(&AccountId::from(id.as_str())).await.unwrap()[0].last_used_at
    };
    s.authenticate_token(&token, t0, false).await.unwrap();
    assert_eq!(last(s.clone(), alice.id.to_string()).await, None);
    s.authenticate_token(&token, t0, true).await.unwrap();
    assert_eq!(last(s.clone(), alice.id.to_string()).await, Some(t0));
    s.authenticate_token(&token, t0 + LAST_USED_EVERY_MS - 1, true)
        .await
        .unwrap();
    assert_eq!(last(s.clone(), alice.id.to_string()).await, Some(t0));
    s.authenticate_token(&token, t0 + LAST_USED_EVERY_MS, true)
        .await
        .unwrap();
    assert_eq!(
        last(s.clone(), alice.id.to_string()).await,
        Some(t0 + LAST_USED_EVERY_MS)
    );
});

on_both!(the_last_enabled_operator_stays_one, |s: Store| async move {
    let (root, _) = s.create_account_with_role("root", Role::Operator).await.unwrap();
    let (bob, bobs) = s.create_account("bob").await.unwrap();
    for change in [
        AccountChange {
            role: Some(Role::Member),
            disabled: None,
        },
        AccountChange {
            role: None,
            disabled: Some(true),
        },
    ] {
        assert!(matches!(
            s.update_account(&root.id, &change).await,
            Err(StoreError::Conflict(_))
        ));
    }
    assert_eq!(s.get_account(&root.id).await.unwrap().role, Role::Operator);
    let disabled = s
        .update_account(
            &bob.id,
            &AccountChange {
                role: None,
                disabled: Some(true),
            },
        )
        .await
        .unwrap();
    assert!(disabled.disabled_at.is_some());
    assert_eq!(
        state(&s.authenticate_token(&bobs, now_ms(), false).await.unwrap()),
        Some(TokenState::AccountDisabled)
    );
    // A disabled operator is no operator: promoting bob while disabled does not free root.
    s.update_account(
        &bob.id,
        &AccountChange {
            role: Some(Role::Operator),
            disabled: None,
        },
    )
    .await
    .unwrap();
    assert!(
        s.update_account(
            &root.id,
            &AccountChange {
                role: Some(Role::Member),
                disabled: None
            }
        )
        .await
        .is_err()
    );
    s.update_account(
        &bob.id,
        &AccountChange {
            role: None,
            disabled: Some(false),
        },
    )
    .await
    .unwrap();
    s.update_account(
        &root.id,
        &AccountChange {
            role: Some(Role::Member),
            disabled: None,
        },
    )
    .await
    .unwrap();
    // Two operators demoting each other at once leave one.
    s.update_account(
        &root.id,
        &AccountChange {
            role: Some(Role::Operator),
            disabled: None,
        },
    )
    .await
    .unwrap();
    let demote = AccountChange {
        role: Some(Role::Member),
        disabled: None,
    };
    let (a, b) = tokio::join!(s.update_account(&root.id, &demote), s.update_account(&bob.id, &demote));
    assert_eq!(a.is_ok() as u8 + b.is_ok() as u8, 1, "{a:?} {b:?}");
    let operators = s
        .list_accounts()
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.role == Role::Operator)
        .count();
    assert_eq!(operators, 1);
});

on_both!(events_within_a_request_name_its_actor, |s: Store| async move {
    let (alice, _) = s.create_account("alice").await.unwrap();
    let (bob, _) = s.create_account("bob").await.unwrap();
    let slot = Arc::new(ActorSlot::default());
    slot.set(Actor {
        account_id: alice.id.to_string(),
        account_name: "alice".into(),
        token_name: "ci".into(),
    });
    with_actor_slot(slot.clone(), s.create_named_token(&alice.id, "laptop", None))
        .await
        .unwrap();
    assert_eq!(slot.appended(), 1);
    let by = |actor: &'static str| EventFilter {
        after_id: 0,
        entity: None,
        actor: Some(actor),
        limit: 100,
    };
    let alices = s
        .events_seen_by(
            &alice.id,
            false,
            &EventFilter {
                actor: Some(&alice.id),
                ..by("")
            },
        )
        .await
        .unwrap();
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0].kind, "account.token_created");
    assert_eq!(alices[0].actor.as_ref().unwrap().token_name, "ci");
    // Bob, a member, does not see Alice's account's events; an operator does.
    assert!(
        s.events_seen_by(
            &bob.id,
            false,
            &EventFilter {
                actor: Some(&alice.id),
                ..by("")
            }
        )
        .await
        .unwrap()
        .is_empty()
    );
    assert_eq!(
        s.events_seen_by(
            &bob.id,
            true,
            &EventFilter {
                actor: Some(&alice.id),
                ..by("")
            }
        )
        .await
        .unwrap()
        .len(),
        1
    );
    // Outside a request no actor is recorded.
    s.create_named_token(&alice.id, "cli", None).await.unwrap();
    let all = s.events(0, Some(&alice.id), 100).await.unwrap();
    assert!(all.last().unwrap().actor.is_none());
});
