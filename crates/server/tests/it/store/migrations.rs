//! The schema: both dialects in step, install-time data as Harbor's.

use crate::backend_test;

#[test]
fn both_dialects_have_the_same_migration_versions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/migrations");
    let list = |dialect: &str| {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dialect))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let sqlite = list("sqlite");
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, list("postgres"));
}

backend_test!(
    async fn install_time_data_is_harbors(app) {
        let admin = app.store().users().find_by_id(1).await.unwrap().unwrap();
        assert_eq!(admin.username, "admin");
        assert!(admin.sysadmin);
        assert!(admin.password_hash.is_some());
        // Migrating again is a no-op.
        app.store().migrate().await.unwrap();
    }
);
