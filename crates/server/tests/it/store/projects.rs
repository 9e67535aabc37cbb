//! The projects repository: lookup and roles.

use berth_domain::model::ProjectRef;
use berth_domain::rbac::Role;

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

#[test]
fn project_refs_follow_harbors_rule() {
    assert_eq!(ProjectRef::parse("12", false), ProjectRef::Id(12));
    assert_eq!(ProjectRef::parse("12", true), ProjectRef::Name("12".into()));
    assert_eq!(
        ProjectRef::parse("lib", false),
        ProjectRef::Name("lib".into())
    );
}
