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
            sessions.find("hash-live").await.unwrap(),
            Some(Session {
                user_id: alice,
                csrf_token: "csrf-1".into()
            })
        );
        assert_eq!(sessions.find("hash-old").await.unwrap(), None, "expired");
        assert_eq!(sessions.find("unknown").await.unwrap(), None);
        // A new session clears expired ones.
        sessions.create("hash-next", alice, "csrf-3", 3600).await.unwrap();
        assert!(!sessions.delete("hash-old").await.unwrap(), "already removed");
        assert!(sessions.delete("hash-live").await.unwrap());
        assert_eq!(sessions.find("hash-live").await.unwrap(), None);
        // A password change ends the user's sessions.
        app.store().users().set_password(alice, "$argon2id$other").await.unwrap();
        assert_eq!(sessions.find("hash-next").await.unwrap(), None);
        // A session of an unknown user is not stored.
        sessions.create("hash-ghost", 9999, "csrf", 3600).await.unwrap();
        assert_eq!(sessions.find("hash-ghost").await.unwrap(), None);
    }
);
