//! The users repository.

use berth_domain::DomainError;
use berth_domain::model::NewUser;
use berth_store::StoreError;

use crate::backend_test;

fn new_user(username: &str, email: &str) -> NewUser {
    NewUser {
        username: username.into(),
        email: Some(email.into()),
        realname: Some("Real Name".into()),
        password_hash: Some(
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".into(),
        ),
        ..NewUser::default()
    }
}

backend_test!(
    async fn create_and_find(app) {
        let users = app.store().users();
        let created = users.create(&new_user("dave", "Dave@Example.com")).await.unwrap();
        assert_eq!(created.id, 2, "the first real user follows admin");
        assert_eq!(created.created_at.len(), 24);
        assert_eq!(users.find_by_id(created.id).await.unwrap().unwrap(), created);
        assert_eq!(users.find_by_login("dave").await.unwrap().unwrap().id, created.id);
        assert_eq!(users.find_by_login("dave@example.com").await.unwrap().unwrap().id, created.id);
        assert_eq!(users.find_by_email("DAVE@EXAMPLE.COM").await.unwrap().unwrap().id, created.id);
        assert!(users.find_by_login("nobody").await.unwrap().is_none());
        assert!(users.find_by_id(999).await.unwrap().is_none());
    }
);

backend_test!(
    async fn usernames_and_emails_are_unique(app) {
        let users = app.store().users();
        users.create(&new_user("erin", "erin@example.com")).await.unwrap();
        for dup in [new_user("erin", "other@example.com"), new_user("other", "ERIN@example.com")] {
            match users.create(&dup).await {
                Err(StoreError::Domain(DomainError::Conflict(message))) => {
                    assert!(message.contains("already exists"), "{message}")
                }
                other => panic!("expected a conflict, got {other:?}"),
            }
        }
    }
);

backend_test!(
    async fn password_changes_bump_the_auth_version(app) {
        let users = app.store().users();
        let user = users.create(&new_user("frank", "frank@example.com")).await.unwrap();
        assert!(users.set_password(user.id, "$argon2id$new").await.unwrap());
        let after = users.find_by_id(user.id).await.unwrap().unwrap();
        assert_eq!(after.auth_version, user.auth_version + 1);
        assert_eq!(after.password_hash.as_deref(), Some("$argon2id$new"));
        assert!(!users.set_password_if_unset(user.id, "$argon2id$other").await.unwrap());
        assert!(!users.set_password(999, "$argon2id$x").await.unwrap());
    }
);

backend_test!(
    /// Every change that bumps `auth_version` moves `tokens_valid_after`
    /// strictly on, to at least now, even several times in one second.
    async fn auth_changes_move_tokens_valid_after(app) {
        let store = app.store();
        let users = store.users();
        let user = users.create(&new_user("gina", "gina@example.com")).await.unwrap();
        assert_eq!(user.tokens_valid_after, 0, "a new user's tokens are all valid");
        let started = berth_domain::time::unix_now();
        let mut last = user.tokens_valid_after;
        let mut moved = |now: i64, what: &str| {
            assert!(now > last, "{what}: {now} after {last}");
            assert!(now >= started, "{what}: {now} is not in the past");
            last = now;
        };
        let valid_after = |id| async move {
            let user = store.users().find_by_id(id).await.unwrap().unwrap();
            user.tokens_valid_after
        };
        assert!(users.set_password(user.id, "$argon2id$a").await.unwrap());
        moved(valid_after(user.id).await, "password");
        assert!(users.set_password(user.id, "$argon2id$b").await.unwrap());
        moved(valid_after(user.id).await, "password again");
        assert!(users.set_sysadmin(user.id, true).await.unwrap());
        moved(valid_after(user.id).await, "administrator flag");
        store.password_resets().create("gina-reset", user.id, 3600).await.unwrap();
        assert!(store.password_resets().redeem("gina-reset", "$argon2id$c").await.unwrap().is_some());
        moved(valid_after(user.id).await, "password reset");
        assert!(users.tombstone(user.id).await.unwrap());
        let tomb = users.find_many_including_deleted(&[user.id]).await.unwrap();
        moved(tomb[0].tokens_valid_after, "deletion");

        let admin = users.find_by_id(1).await.unwrap().unwrap();
        assert!(!users.set_password_if_unset(1, "$argon2id$x").await.unwrap());
        assert_eq!(valid_after(1).await, admin.tokens_valid_after, "nothing changed");
    }
);
