//! The OIDC repository: users of the provider with their sealed secrets,
//! onboarding (taken names, the same person twice at once), the
//! compare-and-set of refresh-token checks, and sign-ins under way.

use berth_store::repo::oidc::{NewOidcUser, OidcLogin};

use crate::backend_test;

fn person(username: &str, subiss: &str) -> NewOidcUser {
    NewOidcUser {
        username: username.into(),
        email: Some(format!("{username}@example.test")),
        realname: format!("{username} Person"),
        subiss: subiss.into(),
        secret: "Cli-Secret-1".into(),
        refresh_token: "refresh-1".into(),
        token_expires_at: 100,
    }
}

backend_test!(
    async fn onboarding_links_a_user_and_keeps_secrets_sealed(app) {
        let oidc = app.store().oidc();
        let id = oidc.onboard(&person("alice", "sub-1https://idp")).await.unwrap();
        let user = app.store().users().find_by_id(id).await.unwrap().unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.email.as_deref(), Some("alice@example.test"));
        assert!(user.password_hash.is_none(), "no password: the CLI secret stands in");
        let link = oidc.find(id).await.unwrap().unwrap();
        assert_eq!((link.secret.as_str(), link.refresh_token.as_str()), ("Cli-Secret-1", "refresh-1"));
        assert_eq!(oidc.user_id_by_subiss("sub-1https://idp").await.unwrap(), Some(id));
        // Sealed at rest: neither secret is in the row as it is.
        let rows: Vec<(String, String)> = sqlx_rows(&app, id).await;
        assert_eq!(rows.len(), 1);
        assert!(rows.iter().all(|(s, t)| !s.contains("Cli-Secret-1") && !t.contains("refresh-1")), "{rows:?}");

        // A taken username, or the same account again: Harbor's conflict, nothing created.
        for new in [person("alice", "sub-2https://idp"), person("alice2", "sub-1https://idp"), person("admin", "sub-3https://idp")] {
            let err = oidc.onboard(&new).await.unwrap_err();
            assert!(err.to_string().contains("same username or email has been onboarded"), "{err}");
        }
        assert!(app.store().users().find_by_username("alice2").await.unwrap().is_none());
        // Another user's e-mail address is dropped, not refused.
        let bob = oidc
            .onboard(&NewOidcUser { email: Some("ALICE@example.test".into()), ..person("bob", "sub-4https://idp") })
            .await
            .unwrap();
        assert_eq!(app.store().users().find_by_id(bob).await.unwrap().unwrap().email, None);

        // A new CLI secret; a sign-in refreshes the profile and keeps a token the provider did not renew.
        assert!(oidc.set_secret(id, "Other-Secret-2").await.unwrap());
        assert!(!oidc.set_secret(9999, "Other-Secret-2").await.unwrap());
        oidc.signed_in(id, Some("alice@new.test"), "Alice New", "", 200).await.unwrap();
        let link = oidc.find(id).await.unwrap().unwrap();
        assert_eq!((link.secret.as_str(), link.refresh_token.as_str(), link.token_expires_at), ("Other-Secret-2", "refresh-1", 200));
        let user = app.store().users().find_by_id(id).await.unwrap().unwrap();
        assert_eq!((user.email.as_deref(), user.realname.as_deref()), (Some("alice@new.test"), Some("Alice New")));

        // A deleted user loses the link; the account can onboard anew.
        assert!(app.store().users().tombstone(id).await.unwrap());
        assert_eq!(oidc.user_id_by_subiss("sub-1https://idp").await.unwrap(), None);
        assert!(oidc.find(id).await.unwrap().is_none());
        let again = oidc.onboard(&person("alice", "sub-1https://idp")).await.unwrap();
        assert_ne!(again, id);
    }
);

async fn sqlx_rows(app: &crate::util::TestApp, user_id: i64) -> Vec<(String, String)> {
    app.fetch_text_pairs(&format!(
        "SELECT secret, refresh_token FROM oidc_users WHERE user_id = {user_id}"
    ))
    .await
}

backend_test!(
    /// The same account signing in twice at once: one user, the other
    /// onboarding refused (the service then links it).
    async fn concurrent_onboarding_of_one_account_makes_one_user(app) {
        let attempts = (0..6).map(|i| {
            let store = app.store().clone();
            tokio::spawn(async move {
                store.oidc().onboard(&person(&format!("racer{i}"), "sub-racehttps://idp")).await
            })
        });
        let results = futures_util::future::join_all(attempts).await;
        let created: Vec<i64> = results.into_iter().filter_map(|r| r.unwrap().ok()).collect();
        assert_eq!(created.len(), 1, "{created:?}");
        assert_eq!(app.store().oidc().user_id_by_subiss("sub-racehttps://idp").await.unwrap(), Some(created[0]));
        assert_eq!(app.store().users().count_besides_admin().await.unwrap(), 1);
    }
);

backend_test!(
    /// Instances checking the same token at once: one claims the check (the
    /// others go on with the last answer); its answer is recorded; a refusal
    /// drops the token; every claim moves `checked_ms` on, even within a millisecond.
    async fn token_checks_are_claimed_by_one_instance(app) {
        let oidc = app.store().oidc();
        let id = oidc.onboard(&person("carol", "sub-chttps://idp")).await.unwrap();
        let read = oidc.find(id).await.unwrap().unwrap();
        let claims = (0..6).map(|_| {
            let store = app.store().clone();
            let seen = read.checked_ms;
            tokio::spawn(async move { store.oidc().claim_check(id, seen).await })
        });
        let won = futures_util::future::join_all(claims)
            .await
            .into_iter()
            .filter(|r| *r.as_ref().unwrap().as_ref().unwrap())
            .count();
        assert_eq!(won, 1);
        let claimed = oidc.find(id).await.unwrap().unwrap();
        assert!(claimed.checked_ms > read.checked_ms);
        assert!(!oidc.claim_check(id, read.checked_ms).await.unwrap(), "a stale read");
        oidc.record_check(id, Some(("refresh-new", 60))).await.unwrap();
        let link = oidc.find(id).await.unwrap().unwrap();
        assert_eq!((link.refresh_token.as_str(), link.token_expires_at), ("refresh-new", 60));
        // A provider that keeps the refresh token (no new one) keeps ours.
        assert!(oidc.claim_check(id, link.checked_ms).await.unwrap(), "at once again: moved on by a millisecond");
        oidc.record_check(id, Some(("", 70))).await.unwrap();
        let link = oidc.find(id).await.unwrap().unwrap();
        assert_eq!((link.refresh_token.as_str(), link.token_expires_at), ("refresh-new", 70));
        oidc.record_check(id, None).await.unwrap();
        let link = oidc.find(id).await.unwrap().unwrap();
        assert_eq!((link.refresh_token.as_str(), link.token_expires_at), ("", 0), "refused: dropped");
    }
);

backend_test!(
    async fn sign_ins_under_way_are_taken_once(app) {
        let oidc = app.store().oidc();
        let login = OidcLogin {
            state: "state-1".into(),
            nonce: "nonce-1".into(),
            verifier: "verifier-1".into(),
            redirect: "/harbor/projects".into(),
            pending: String::new(),
        };
        oidc.begin_login("hash-1", &login).await.unwrap();
        assert_eq!(oidc.login("hash-1").await.unwrap(), Some(login.clone()));
        assert_eq!(oidc.login("hash-2").await.unwrap(), None);
        oidc.set_pending("hash-1", r#"{"subiss":"x"}"#).await.unwrap();
        let pending = oidc.login("hash-1").await.unwrap().unwrap();
        assert_eq!(pending.pending, r#"{"subiss":"x"}"#);
        assert_eq!(pending.state, "", "a callback can no longer use it");
        let takes = (0..4).map(|_| {
            let store = app.store().clone();
            tokio::spawn(async move { store.oidc().end_login("hash-1").await })
        });
        let taken = futures_util::future::join_all(takes)
            .await
            .into_iter()
            .filter(|r| *r.as_ref().unwrap().as_ref().unwrap())
            .count();
        assert_eq!(taken, 1);
        assert_eq!(oidc.login("hash-1").await.unwrap(), None);
    }
);

backend_test!(
    async fn sign_ins_under_way_are_kept_to_the_newest(app) {
        let oidc = app.store().oidc();
        let login = |n: usize| OidcLogin {
            state: format!("state-{n}"),
            nonce: "nonce".into(),
            verifier: "verifier".into(),
            redirect: "/harbor/projects".into(),
            pending: String::new(),
        };
        oidc.begin_login("old", &login(0)).await.unwrap();
        app.execute_sql("UPDATE oidc_logins SET created_at = created_at - 60 WHERE id_hash = 'old'").await;
        for n in 1..=3 {
            oidc.begin_login(&format!("new-{n}"), &login(n)).await.unwrap();
        }
        oidc.keep_newest_logins(3).await.unwrap();
        assert_eq!(oidc.login("old").await.unwrap(), None, "the oldest goes");
        for n in 1..=3 {
            assert_eq!(oidc.login(&format!("new-{n}")).await.unwrap(), Some(login(n)));
        }
        oidc.keep_newest_logins(0).await.unwrap();
        assert_eq!(oidc.login("new-1").await.unwrap(), None);
    }
);
