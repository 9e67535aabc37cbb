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
