//! The registry repository: the one-query manifest lookup of a manifest GET.

use berth_domain::model::NewProject;
use berth_domain::oci::{Digest, Reference};

use crate::backend_test;
use crate::registry::push_image;

backend_test!(
    async fn manifest_lookup_reads_project_repository_and_manifest_at_once(app) {
        let (manifest, digest) = push_image(&app, "library/look", "v1", &[b"layer"]).await;
        let registry = app.store().registry();
        let tag = Reference::Tag("v1".into());
        let by_digest = Reference::Digest(Digest::parse(&digest).unwrap());

        let found = registry.manifest_lookup("library", "library/look", &tag).await.unwrap().unwrap();
        assert_eq!(found.project.name, "library");
        assert!(found.project.public);
        let stored = found.manifest.unwrap();
        assert_eq!(Some(stored.repository_id), found.repository_id);
        assert_eq!((stored.digest.as_str(), stored.body.as_slice()), (digest.as_str(), manifest.as_slice()));
        assert_eq!(stored.media_type, "application/vnd.oci.image.manifest.v1+json");
        assert!(stored.tag_id.is_some());

        let again = registry.manifest_lookup("library", "library/look", &by_digest).await.unwrap().unwrap();
        let again = again.manifest.unwrap();
        assert_eq!((again.artifact_id, again.tag_id), (stored.artifact_id, None));
        assert_eq!(again.body, manifest);

        // A reference that does not resolve: the repository is still known.
        let missing = registry
            .manifest_lookup("library", "library/look", &Reference::Tag("v2".into()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(missing.repository_id, Some(stored.repository_id));
        assert!(missing.manifest.is_none());
        let other_digest = Reference::Digest(Digest::parse(&crate::registry::digest_of(b"x")).unwrap());
        let missing = registry.manifest_lookup("library", "library/look", &other_digest).await.unwrap().unwrap();
        assert!(missing.repository_id.is_some() && missing.manifest.is_none());

        // No such repository; a repository of another project; no such project.
        let none = registry.manifest_lookup("library", "library/none", &tag).await.unwrap().unwrap();
        assert!(none.repository_id.is_none() && none.manifest.is_none());
        let other = app.store().projects().create(&NewProject {
            name: "other".into(),
            owner_id: 1,
            metadata: vec![("public".into(), "false".into())],
            storage_limit: -1,
            registry_id: None,
        }, "admin").await.unwrap();
        let elsewhere = registry.manifest_lookup("other", "library/look", &tag).await.unwrap().unwrap();
        assert_eq!((elsewhere.project.id, elsewhere.project.public), (other.id, false));
        assert!(elsewhere.repository_id.is_none() && elsewhere.manifest.is_none());
        assert!(registry.manifest_lookup("nope", "nope/look", &tag).await.unwrap().is_none());
    }
);
