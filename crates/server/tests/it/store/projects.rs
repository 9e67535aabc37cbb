//! The projects repository: lookup, roles and detailed listings.

use berth_domain::model::{CveAllowlist, MemberEntity, NewProject, ProjectRef};
use berth_domain::query::Paging;
use berth_domain::rbac::Role;
use berth_store::repo::projects::{ProjectFilter, Viewer};

use crate::backend_test;

backend_test!(
    async fn library_is_found_by_id_and_name(app) {
        let projects = app.store().projects();
        let by_id = projects.find(&ProjectRef::Id(1)).await.unwrap().unwrap();
        let by_name = projects.find(&ProjectRef::Name("library".into())).await.unwrap().unwrap();
        assert_eq!(by_id, by_name);
        assert_eq!(by_id.name, "library");
        assert!(by_id.public);
        assert_eq!(by_id.owner_id, 1);
        assert!(projects.find(&ProjectRef::Id(99)).await.unwrap().is_none());
        assert!(projects.find(&ProjectRef::Name("Library".into())).await.unwrap().is_none());
    }
);

backend_test!(
    async fn admin_is_project_admin_of_library(app) {
        let roles = app.store().projects().roles_of(1, 1).await.unwrap();
        assert_eq!(roles, vec![Role::ProjectAdmin]);
        assert!(app.store().projects().roles_of(1, 42).await.unwrap().is_empty());
    }
);

/// `team-a` (private, owned by alice, with metadata that needs escaping and an
/// allowlist) where bob is a guest and, through two groups, a maintainer and a
/// limited guest; `team-b` (public, owned by admin). Returns (bob, team-a, team-b).
async fn teams(app: &crate::util::TestApp) -> (i64, i64, i64) {
    let alice = app.create_user("alice", "Passw0rd-1").await;
    let bob = app.create_user("bob", "Passw0rd-1").await;
    let projects = app.store().projects();
    let new = |name: &str, owner_id: i64, metadata: &[(&str, &str)]| NewProject {
        name: name.into(),
        owner_id,
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        storage_limit: -1,
        registry_id: None,
    };
    let team_a = projects
        .create(
            &new(
                "team-a",
                alice,
                &[
                    ("public", "false"),
                    ("proxy_cache_filter_pattern", r"a;b\c;"),
                ],
            ),
            "alice",
        )
        .await
        .unwrap()
        .id;
    let team_b = projects
        .create(&new("team-b", 1, &[("public", "true")]), "admin")
        .await
        .unwrap()
        .id;
    let allowlist = CveAllowlist {
        expires_at: Some(42),
        items: vec!["CVE-1".into()],
    };
    projects
        .update(team_a, &[], Some(&allowlist))
        .await
        .unwrap();
    let members = app.store().members();
    let change = berth_store::repo::members::MemberChange {
        project_name: "team-a",
        by: "admin",
    };
    members
        .create(team_a, MemberEntity::User(bob), Role::Guest.id(), &change)
        .await
        .unwrap();
    for (group, role) in [
        ("maintainers", Role::Maintainer),
        ("limited", Role::LimitedGuest),
    ] {
        let group = app.store().groups().create(group, 2, None).await.unwrap();
        app.store()
            .groups()
            .add_member(bob, group.id)
            .await
            .unwrap();
        members
            .create(team_a, MemberEntity::Group(group.id), role.id(), &change)
            .await
            .unwrap();
    }
    (bob, team_a, team_b)
}

backend_test!(
    async fn listing_carries_details_and_total(app) {
        let (bob, team_a, team_b) = teams(&app).await;
        let projects = app.store().projects();
        let filter = ProjectFilter { name: Some("team".into()), ..ProjectFilter::default() };
        let page = projects.list(Viewer::User(bob), &filter, Some(bob)).await.unwrap();
        assert_eq!(page.total, 2);
        let names: Vec<&str> = page.projects.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["team-a", "team-b"]);
        let details = &page.details;
        assert_eq!(details.role_ids[&team_a], vec![3, 4, 5]);
        assert!(!details.role_ids.contains_key(&team_b));
        assert_eq!(details.owner_names[&team_a], "alice");
        assert_eq!(details.owner_names[&team_b], "admin");
        assert_eq!(
            details.metadata[&team_a],
            vec![
                ("proxy_cache_filter_pattern".to_string(), r"a;b\c;".to_string()),
                ("public".to_string(), "false".to_string()),
            ]
        );
        assert_eq!(details.allowlists[&team_a], CveAllowlist { expires_at: Some(42), items: vec!["CVE-1".into()] });
        assert_eq!(details.allowlists[&team_b], CveAllowlist { expires_at: None, items: vec![] });
        assert!(details.repo_counts.is_empty());

        // Pages past the end still count; others see the public project only.
        let past = ProjectFilter { paging: Paging { page: 3, page_size: 1 }, ..filter.clone() };
        let page = projects.list(Viewer::User(bob), &past, Some(bob)).await.unwrap();
        assert_eq!((page.total, page.projects.len()), (2, 0));
        let page = projects.list(Viewer::Anonymous, &filter, None).await.unwrap();
        assert_eq!(page.total, 1);
        assert_eq!(page.projects[0].id, team_b);
        assert!(page.details.role_ids.is_empty());
        let page = projects.list(Viewer::Admin, &filter, Some(1)).await.unwrap();
        assert_eq!(page.total, 2);
        assert_eq!(page.details.role_ids.get(&team_a), None);
        assert_eq!(page.details.role_ids[&team_b], vec![1]);
    }
);

backend_test!(
    async fn search_matches_names_case_sensitively(app) {
        let (bob, team_a, team_b) = teams(&app).await;
        let projects = app.store().projects();
        let (found, details) = projects.search(Viewer::User(bob), "team-", Some(bob)).await.unwrap();
        let ids: Vec<i64> = found.iter().map(|p| p.id).collect();
        assert_eq!(ids, [team_a, team_b]);
        assert_eq!(details.role_ids[&team_a], vec![3, 4, 5]);
        assert_eq!(details.metadata[&team_b], vec![("public".to_string(), "true".to_string())]);
        for text in ["TEAM", "", "%", "_"] {
            let (found, _) = projects.search(Viewer::Admin, text, Some(1)).await.unwrap();
            assert!(found.is_empty(), "{text:?}");
        }
        let (found, _) = projects.search(Viewer::Anonymous, "team", None).await.unwrap();
        assert_eq!(found.len(), 1);

        let details = projects.details(&[team_a], Some(bob)).await.unwrap();
        assert_eq!(details.role_ids[&team_a], vec![3, 4, 5]);
        assert_eq!(details.owner_names[&team_a], "alice");
        assert!(projects.details(&[], Some(bob)).await.unwrap().owner_names.is_empty());
    }
);

#[test]
fn project_refs_follow_harbors_rule() {
    assert_eq!(ProjectRef::parse("12", false), ProjectRef::Id(12));
    assert_eq!(ProjectRef::parse("12", true), ProjectRef::Name("12".into()));
    assert_eq!(
        ProjectRef::parse("lib", false),
        ProjectRef::Name("lib".into())
    );
}
