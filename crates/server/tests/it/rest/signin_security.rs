//! Sign-in protection on the generator-rest surface: throttling of `POST
//! /auth`, sign-ins that take as long for unknown users as for wrong
//! passwords, and user tokens revoked by password, role and deletion changes.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use berth::signin::{SignInSettings, ThrottleLimits};
use serde_json::json;

use super::{assert_empty_401, sign_up};
use crate::backend_test;
use crate::util::{MASTER_KEY, TestApp, TestResponse};

async fn sign_in(app: &TestApp, peer: &str, email: &str, password: &str) -> TestResponse {
    app.post(&format!("/auth?access_token={MASTER_KEY}"))
        .peer(peer)
        .basic(email, password)
        .send()
        .await
}

#[track_caller]
fn assert_throttled(res: &TestResponse) {
    assert_eq!(res.status, StatusCode::TOO_MANY_REQUESTS, "{}", res.text());
    assert!(res.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    assert_eq!(
        res.json(),
        json!({"valid": false, "message": "too many failed sign-in attempts; try again later"})
    );
}

backend_test!(
    async fn post_auth_is_throttled_without_hashing(app) {
        let app = app.with_signin(SignInSettings {
            limits: "account-address=3".parse().unwrap(),
            ..SignInSettings::default()
        });
        sign_up(&app, "a@a.com", "a", "user").await;
        for _ in 0..3 {
            assert_empty_401(&sign_in(&app, "192.0.2.1", "a@a.com", "wrong-1").await);
        }
        // No hash can run while the slots are held, yet the answers come.
        let slots = berth::identity::hash_slots();
        let held = slots
            .acquire_many(u32::try_from(slots.available_permits()).unwrap())
            .await
            .unwrap();
        assert_throttled(&sign_in(&app, "192.0.2.1", "a@a.com", "wrong-2").await);
        assert_throttled(&sign_in(&app, "192.0.2.1", "a@a.com", "123456").await);
        drop(held);
        // The right password from another address still works.
        let res = sign_in(&app, "198.51.100.7", "a@a.com", "123456").await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        // The default numbers: five failures per account and address.
        let defaults = app.with_signin(SignInSettings::default());
        assert_eq!(defaults.state.signin.throttle.limits(), ThrottleLimits::default());
        for _ in 0..5 {
            assert_empty_401(&sign_in(&defaults, "192.0.2.1", "a@a.com", "wrong-pw").await);
        }
        assert_throttled(&sign_in(&defaults, "192.0.2.1", "a@a.com", "wrong-pw").await);
    }
);

backend_test!(
    async fn an_account_under_attack_stays_open_to_its_owner(app) {
        let app = app.with_signin(SignInSettings {
            limits: "account-address=5,account=4".parse().unwrap(),
            ..SignInSettings::default()
        });
        sign_up(&app, "a@a.com", "a", "user").await;
        // A distributed guess: four addresses, one failure each.
        for peer in ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"] {
            assert_empty_401(&sign_in(&app, peer, "a@a.com", "wrong-pw").await);
        }
        // Every address that failed on the account now waits ...
        assert_throttled(&sign_in(&app, "192.0.2.1", "a@a.com", "123456").await);
        assert_throttled(&sign_in(&app, "192.0.2.4", "a@a.com", "guess-pw").await);
        // ... while the owner, from an address that did not fail, signs in.
        let res = sign_in(&app, "198.51.100.7", "a@a.com", "123456").await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        // A typo of the owner's during the attack costs one window, no more.
        assert_empty_401(&sign_in(&app, "198.51.100.8", "a@a.com", "typo-pw").await);
        assert_throttled(&sign_in(&app, "198.51.100.8", "a@a.com", "123456").await);
        app.state.signin.throttle.advance_clock(Duration::from_secs(15 * 60));
        let res = sign_in(&app, "198.51.100.8", "a@a.com", "123456").await;
        assert_eq!(res.status, StatusCode::CREATED);
    }
);

/// The median of `samples`.
fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// One round: 15 sign-ins with a wrong password for a user who exists and 15
/// for one who does not, interleaved (so load on the machine hits both
/// alike), each from its own address (no throttling) with its own password
/// (nothing cached: the credential cache keeps verified passwords only).
/// Returns the two medians.
async fn timing_round(app: &TestApp, round: u32, surface: &str) -> (Duration, Duration) {
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for i in 0..15u32 {
        let mut kinds = [("a@a.com", &mut known), ("nobody@a.com", &mut unknown)];
        // Alternate which kind goes first, so neither always follows the other.
        if i % 2 == 1 {
            kinds.reverse();
        }
        for (email, samples) in kinds {
            let peer = format!("10.{round}.{}.{}", samples.len(), i + 1);
            let password = format!("wrong-{round}-{i}");
            let request = if surface == "harbor" {
                app.get("/api/v2.0/users/current")
            } else {
                app.post(&format!("/auth?access_token={MASTER_KEY}"))
            };
            let started = Instant::now();
            let res = request.peer(&peer).basic(email, &password).send().await;
            samples.push(started.elapsed());
            assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
        }
    }
    (median(known), median(unknown))
}

backend_test!(
    /// The one timing assertion of the suite (the issue asks for it): the
    /// median sign-in time for an unknown user is within 20% of the median for
    /// a known user with a wrong password, on `POST /auth` and on Harbor Basic.
    /// Both pay one password hash. Noise from a loaded machine can only make a
    /// round fail by chance, so a surface passes when one of five rounds is
    /// within bounds; without the dummy hash every round differs by ~20x.
    async fn unknown_users_take_as_long_as_wrong_passwords(app) {
        // Each attempt comes from its own address; up to 90 failures on one
        // account must not mark it as under attack here.
        let app = app.with_signin(SignInSettings {
            limits: "account=1000".parse().unwrap(),
            ..SignInSettings::default()
        });
        sign_up(&app, "a@a.com", "a", "user").await;
        for surface in ["rest", "harbor"] {
            let mut rounds = Vec::new();
            let mut passed = false;
            for round in 0..5 {
                let (known, unknown) = timing_round(&app, round, surface).await;
                let ratio = unknown.as_secs_f64() / known.as_secs_f64();
                rounds.push((known, unknown));
                if (0.8..=1.2).contains(&ratio) {
                    passed = true;
                    break;
                }
            }
            eprintln!("{surface}: medians (known, unknown) per round: {rounds:?}");
            assert!(passed, "{surface}: medians (known, unknown) per round: {rounds:?}");
        }
    }
);

async fn me(app: &TestApp, token: &str) -> StatusCode {
    app.get("/users/me").bearer(token).send().await.status
}

async fn token_of(app: &TestApp, email: &str, password: &str) -> String {
    let res = sign_in(app, "192.0.2.50", email, password).await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    res.json()["token"].as_str().unwrap().to_string()
}

backend_test!(
    async fn a_password_change_revokes_earlier_tokens(app) {
        let a = sign_up(&app, "a@a.com", "a", "user").await;
        let before = token_of(&app, "a@a.com", "123456").await;
        assert_eq!(me(&app, &before).await, StatusCode::OK);
        let res = app
            .put("/users/me/password")
            .basic("a@a.com", "123456")
            .json(&json!({"password": "654321"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(me(&app, &before).await, StatusCode::UNAUTHORIZED);
        assert_eq!(me(&app, &a.token).await, StatusCode::UNAUTHORIZED);
        // A token issued after the change works, even within the same second.
        let after = token_of(&app, "a@a.com", "654321").await;
        assert_eq!(me(&app, &after).await, StatusCode::OK);
        // And a second change in that second still revokes it.
        let res = app
            .put("/users/me/password")
            .basic("a@a.com", "654321")
            .json(&json!({"password": "abcdef"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(me(&app, &after).await, StatusCode::UNAUTHORIZED);
        assert_eq!(me(&app, &token_of(&app, "a@a.com", "abcdef").await).await, StatusCode::OK);
    }
);

backend_test!(
    async fn demotion_and_deletion_revoke_tokens(app) {
        let c = sign_up(&app, "c@c.com", "c", "admin").await;
        let b = sign_up(&app, "b@b.com", "b", "user").await;
        let admin_token = token_of(&app, "c@c.com", "123456").await;
        assert_eq!(app.get("/users").bearer(&admin_token).send().await.status, StatusCode::OK);
        // Demoted through Harbor's API: the admin's tokens stop working.
        let res = app
            .put(&format!("/api/v2.0/users/{}/sysadmin", c.id))
            .admin()
            .json(&json!({"sysadmin_flag": false}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(me(&app, &admin_token).await, StatusCode::UNAUTHORIZED);
        assert_eq!(me(&app, &c.token).await, StatusCode::UNAUTHORIZED);
        // Deleted: gone at once.
        let user_token = token_of(&app, "b@b.com", "123456").await;
        let res = app
            .delete(&format!("/api/v2.0/users/{}", b.id))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(me(&app, &user_token).await, StatusCode::UNAUTHORIZED);
        assert_eq!(
            app.get("/api/v2.0/users/current").bearer(&user_token).send().await.status,
            StatusCode::UNAUTHORIZED
        );
    }
);

backend_test!(
    async fn another_instance_refuses_revoked_tokens_within_the_window(app) {
        sign_up(&app, "a@a.com", "a", "user").await;
        let token = token_of(&app, "a@a.com", "123456").await;
        let other = app.restart();
        assert_eq!(me(&other, &token).await, StatusCode::OK, "cached there now");
        let res = app
            .put("/users/me/password")
            .basic("a@a.com", "123456")
            .json(&json!({"password": "654321"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(me(&app, &token).await, StatusCode::UNAUTHORIZED, "at once here");
        // The other instance reads the user again after its window (2 s).
        other.state.users.advance_clock(other.state.users.times().revalidate);
        assert_eq!(me(&other, &token).await, StatusCode::UNAUTHORIZED);
    }
);
