//! User groups (`/usergroups`) with Harbor's checks, as project members, and
//! LDAP groups checked against the real directory; and what
//! `/users/current/permissions` tells each kind of caller.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, id_from_location, message, project, user};
use crate::harbor::ldap::{DEVELOPERS, configure, s};

const BASE: &str = "/api/v2.0/usergroups";

backend_test!(
    /// Create, read, search, rename and delete; a deleted group's project
    /// memberships go with it.
    async fn groups_are_checked_kept_and_removed_with_their_memberships(app) {
        user(&app, "dev").await;
        let res = app.post(BASE).admin().json(&json!({"group_name": "platform", "group_type": 3})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = id_from_location(&res);
        assert_eq!(res.header("location"), Some(format!("{BASE}/{id}").as_str()));
        let got = app.get(&format!("{BASE}/{id}")).admin().send().await.json();
        assert_eq!(got, json!({"id": id, "group_name": "platform", "group_type": 3}));

        let res = app.post(BASE).admin().json(&json!({"group_name": "platform", "group_type": 3})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(message(&res), "duplicate user group, group name:platform, group type: 3, ldap group DN: ");
        for (body, said) in [
            (json!({"group_type": 3}), "the group name should be provided"),
            (json!({"group_name": "x", "group_type": 7}), "invalid group type 7: 1 (LDAP), 2 (HTTP) or 3 (OIDC)"),
            (json!({"group_name": "x", "group_type": 1}), "the LDAP group DN should be provided"),
        ] {
            let res = app.post(BASE).admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(message(&res), said);
        }

        let listed = app.get(&format!("{BASE}?group_name=PLAT")).admin().send().await;
        assert_eq!(listed.header("x-total-count"), Some("1"), "{}", listed.text());
        let res = app.get(BASE).basic("dev", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "listing is for administrators");
        let found = app.get(&format!("{BASE}/search?groupname=plat")).basic("dev", PASSWORD).send().await;
        assert_eq!(found.status, StatusCode::OK, "anyone signed in searches");
        assert_eq!(found.json(), json!([{"id": id, "group_name": "platform", "group_type": 3}]));
        let res = app.get(&format!("{BASE}/search")).basic("dev", PASSWORD).send().await;
        assert_eq!(message(&res), "need to provide groupname to search user group");

        let res = app.put(&format!("{BASE}/{id}")).admin().json(&json!({"group_name": "platform-team"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(app.get(&format!("{BASE}/{id}")).admin().send().await.json()["group_name"], "platform-team");
        let res = app.put(&format!("{BASE}/999")).admin().json(&json!({"group_name": "x"})).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(message(&res), "the user group with id 999 is not found");
        let res = app.get(&format!("{BASE}/0")).admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        project(&app, None, "team", false).await;
        let res = app.post("/api/v2.0/projects/team/members").admin()
            .json(&json!({"role_id": 2, "member_group": {"id": id}}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.delete(&format!("{BASE}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let members = app.get("/api/v2.0/projects/team/members").admin().send().await.json();
        assert!(members.as_array().unwrap().iter().all(|m| m["entity_type"] != "g"), "{members}");
        let res = app.delete(&format!("{BASE}/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    /// In LDAP mode an LDAP group's DN must be in the directory, and the
    /// list shows LDAP groups, by DN when asked.
    async fn ldap_groups_come_from_the_directory(app) {
        configure(&app, &[("auth_mode", s("ldap_auth"))]).await;
        app.post(BASE).admin().json(&json!({"group_name": "other", "group_type": 3})).send().await;
        let res = app.post(BASE).admin()
            .json(&json!({"group_name": "devs", "group_type": 1, "ldap_group_dn": DEVELOPERS}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.post(BASE).admin()
            .json(&json!({"group_name": "nope", "group_type": 1, "ldap_group_dn": "cn=nope,ou=groups,dc=berth,dc=test"}))
            .send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(message(&res), "LDAP Group DN is not found: DN:cn=nope,ou=groups,dc=berth,dc=test");
        let res = app.post(BASE).admin()
            .json(&json!({"group_name": "again", "group_type": 1, "ldap_group_dn": DEVELOPERS}))
            .send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let listed = app.get(BASE).admin().send().await.json();
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "only LDAP groups in LDAP mode: {listed}");
        assert_eq!(listed[0]["ldap_group_dn"], DEVELOPERS);
        let by_dn = app.get(&format!("{BASE}?ldap_group_dn={}", DEVELOPERS.replace('=', "%3D").replace(',', "%2C"))).admin().send().await;
        assert_eq!(by_dn.header("x-total-count"), Some("1"), "{}", by_dn.text());
    }
);

fn pairs(body: &Value) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["resource"].as_str().unwrap().to_string(),
                p["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

backend_test!(
    /// A guest may pull and list in its project, not push; an administrator
    /// everything; resources are absolute unless `relative=true`.
    async fn current_user_permissions_follow_the_role_model(app) {
        user(&app, "guest").await;
        let id = project(&app, None, "team", false).await;
        let res = app.post("/api/v2.0/projects/team/members").admin()
            .json(&json!({"role_id": 3, "member_user": {"username": "guest"}}))
            .send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let url = format!("/api/v2.0/users/current/permissions?scope=/project/{id}&relative=true");
        let guest = pairs(&app.get(&url).basic("guest", PASSWORD).send().await.json());
        assert!(guest.contains(&("repository".into(), "pull".into())), "{guest:?}");
        assert!(guest.contains(&(".".into(), "read".into())), "the project itself: {guest:?}");
        assert!(!guest.contains(&("repository".into(), "push".into())), "{guest:?}");
        let admin = pairs(&app.get(&url).admin().send().await.json());
        assert!(admin.contains(&("repository".into(), "push".into())) && admin.len() > guest.len());

        let absolute = app
            .get(&format!("/api/v2.0/users/current/permissions?scope=/project/{id}"))
            .basic("guest", PASSWORD)
            .send()
            .await
            .json();
        assert!(pairs(&absolute).contains(&(format!("/project/{id}/repository"), "pull".into())), "{absolute}");

        let system = pairs(&app.get("/api/v2.0/users/current/permissions?scope=/system&relative=true").admin().send().await.json());
        assert!(system.contains(&("registry".into(), "create".into())), "{system:?}");
        let mine = pairs(&app.get("/api/v2.0/users/current/permissions?scope=/system").basic("guest", PASSWORD).send().await.json());
        assert_eq!(mine, vec![("/system/project".into(), "create".into()), ("/system/project".into(), "list".into())]);
        let res = app.get("/api/v2.0/users/current/permissions").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);
