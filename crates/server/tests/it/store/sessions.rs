//! The portal sessions repository.

use berth_store::repo::sessions::Session;

use crate::backend_test;

backend_test!(
    async fn portal_sessions_are_found_until_they_expire_or_end(app) {
        let sessions = app.store().sessions();
        let alice = app.create_user("alice", "Alice-pass-1").await;
        sessions.create("hash-live", alice, "csrf-1", 3600).await.unwrap();
        sessions.create("hash-old", alice, "csrf-2", -1).await.unwrap();
        assert_eq!(
            sessions.find("hash-live", 3600).await.unwrap(),
            Some(Session {
                user_id: alice,
                csrf_token: "csrf-1".into()
            })
        );
        assert_eq!(sessions.find("hash-old", 3600).await.unwrap(), None, "expired");
        assert_eq!(sessions.find("unknown", 3600).await.unwrap(), None);
        // A new session clears expired ones.
        sessions.create("hash-next", alice, "csrf-3", 3600).await.unwrap();
        assert!(!sessions.delete("hash-old").await.unwrap(), "already removed");
        assert!(sessions.delete("hash-live").await.unwrap());
        assert_eq!(sessions.find("hash-live", 3600).await.unwrap(), None);
        // A password change ends the user's sessions.
        app.store().users().set_password(alice, "$argon2id$other").await.unwrap();
        assert_eq!(sessions.find("hash-next", 3600).await.unwrap(), None);
        // A session of an unknown user is not stored.
        sessions.create("hash-ghost", 9999, "csrf", 3600).await.unwrap();
        assert_eq!(sessions.find("hash-ghost", 3600).await.unwrap(), None);
    }
);

backend_test!(
    /// A session in use lives on; one unused for its idle time ends: its life
    /// is extended once less than half of the idle time is left.
    async fn portal_sessions_slide_while_used(app) {
        let sessions = app.store().sessions();
        let alice = app.create_user("alice", "Alice-pass-1").await;
        let wait = |ms: u64| tokio::time::sleep(std::time::Duration::from_millis(ms));
        sessions.create("hash", alice, "csrf", 4).await.unwrap();
        wait(2500).await;
        assert!(sessions.find("hash", 4).await.unwrap().is_some(), "1.5 s left: extended to 4 s");
        wait(2500).await;
        assert!(sessions.find("hash", 4).await.unwrap().is_some(), "past its first 4 s, used: live");
        wait(4500).await;
        assert_eq!(sessions.find("hash", 4).await.unwrap(), None, "unused for 4 s: ended");
    }
);
