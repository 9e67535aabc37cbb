//! The upstream registry repository: secrets sealed per registry, partial
//! updates of the secret, deletes refused while a project uses a registry.

use berth_domain::DomainError;
use berth_domain::model::NewProject;
use berth_domain::model::registry::{RegistrySettings, SecretChange};
use berth_domain::query::{Paging, parse_query};
use berth_store::StoreError;

use crate::backend_test;

fn settings(name: &str, access_key: &str) -> RegistrySettings {
    RegistrySettings {
        name: name.into(),
        url: "http://127.0.0.1:5000".into(),
        kind: "docker-registry".into(),
        credential_type: if access_key.is_empty() { "" } else { "basic" }.into(),
        access_key: access_key.into(),
        status: "healthy".into(),
        ..RegistrySettings::default()
    }
}

const ALL: Paging = Paging {
    page: 1,
    page_size: 0,
};

backend_test!(
    async fn secrets_are_sealed_for_their_registry_and_replaced_as_asked(app) {
        let registries = app.store().registries();
        let a = registries.create(&settings("a", "user-a"), "secret-a", "admin").await.unwrap();
        let b = registries.create(&settings("b", "user-b"), "secret-b", "admin").await.unwrap();
        assert!(a.has_secret && b.has_secret);
        assert_eq!(a.settings.access_key, "user-a");
        assert_eq!(registries.access_secret(a.id).await.unwrap().as_deref(), Some("secret-a"));
        // A secret without an access key is not kept.
        let c = registries.create(&settings("c", ""), "ignored", "admin").await.unwrap();
        assert!(!c.has_secret);
        assert_eq!(registries.access_secret(c.id).await.unwrap(), None);
        assert_eq!(registries.access_secret(999).await.unwrap(), None);

        // A sealed secret copied to another registry's row does not open there.
        app.execute_sql(&format!(
            "UPDATE registries SET access_secret = (SELECT access_secret FROM registries WHERE id = {}) WHERE id = {}",
            a.id, b.id
        ))
        .await;
        let err = registries.access_secret(b.id).await.unwrap_err();
        assert!(matches!(err, StoreError::Secret { .. }), "{err}");

        // Updates keep, replace or clear the secret.
        let mut renamed = settings("b2", "user-b");
        renamed.description = "second".into();
        assert!(registries.update(b.id, &renamed, &SecretChange::Set("new-b".into()), "admin").await.unwrap());
        assert_eq!(registries.access_secret(b.id).await.unwrap().as_deref(), Some("new-b"));
        assert!(registries.update(b.id, &renamed, &SecretChange::Keep, "admin").await.unwrap());
        assert_eq!(registries.access_secret(b.id).await.unwrap().as_deref(), Some("new-b"));
        let stored = registries.get(b.id).await.unwrap().unwrap();
        assert_eq!((stored.settings.name.as_str(), stored.settings.description.as_str()), ("b2", "second"));
        assert!(registries.update(b.id, &settings("b2", ""), &SecretChange::Keep, "admin").await.unwrap());
        assert_eq!(registries.access_secret(b.id).await.unwrap(), None);
        assert!(registries.update(a.id, &settings("a", "user-a"), &SecretChange::Clear, "admin").await.unwrap());
        assert!(!registries.get(a.id).await.unwrap().unwrap().has_secret);
        assert!(!registries.update(999, &settings("z", ""), &SecretChange::Keep, "admin").await.unwrap());
        let taken = registries.update(a.id, &settings("b2", ""), &SecretChange::Keep, "admin").await.unwrap_err();
        assert!(matches!(taken, StoreError::Domain(DomainError::Conflict(_))), "{taken}");
        let taken = registries.create(&settings("c", ""), "", "admin").await.unwrap_err();
        assert!(matches!(taken, StoreError::Domain(DomainError::Conflict(_))), "{taken}");

        // Listing with q, the fuzzy name, and paging.
        let (total, all) = registries.list(&parse_query("").unwrap(), None, &[], ALL).await.unwrap();
        assert_eq!(total, 3);
        assert_eq!(all.iter().map(|r| r.settings.name.as_str()).collect::<Vec<_>>(), ["a", "b2", "c"]);
        let (total, found) = registries.list(&parse_query("name=~B").unwrap(), None, &[], ALL).await.unwrap();
        assert_eq!((total, found[0].id), (1, b.id));
        let (total, _) = registries.list(&parse_query("").unwrap(), Some("C"), &[], ALL).await.unwrap();
        assert_eq!(total, 1);
        let page = Paging { page: 2, page_size: 2 };
        let (total, found) = registries.list(&parse_query("").unwrap(), None, &[], page).await.unwrap();
        assert_eq!((total, found.len()), (3, 1));
    }
);

backend_test!(
    async fn a_registry_in_use_is_not_deleted(app) {
        let registries = app.store().registries();
        let used = registries.create(&settings("used", ""), "", "admin").await.unwrap();
        let project = app.store().projects().create(&NewProject {
            name: "cache".into(),
            owner_id: 1,
            metadata: vec![("public".into(), "false".into())],
            storage_limit: -1,
            registry_id: Some(used.id),
        }, "admin")
        .await
        .unwrap();
        assert_eq!(project.registry_id, Some(used.id));
        let err = registries.delete(used.id, "admin").await.unwrap_err();
        assert!(matches!(err, StoreError::Domain(DomainError::Precondition(_))), "{err}");
        assert!(registries.get(used.id).await.unwrap().is_some());

        // A project cannot name a registry that is not there.
        let err = app.store().projects().create(&NewProject {
            name: "orphan".into(),
            owner_id: 1,
            metadata: Vec::new(),
            storage_limit: -1,
            registry_id: Some(999),
        }, "admin")
        .await
        .unwrap_err();
        assert!(matches!(err, StoreError::Domain(DomainError::Invalid { .. })), "{err}");

        assert!(app.store().projects().delete(project.id, "admin").await.unwrap());
        assert!(registries.delete(used.id, "admin").await.unwrap());
        assert!(!registries.delete(used.id, "admin").await.unwrap());
    }
);
