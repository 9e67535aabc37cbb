//! listProjectMembers, createProjectMember, getProjectMember, updateProjectMember,
//! deleteProjectMember.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::{
    CALLERS, PASSWORD, as_caller, member, message, project, project_with_every_role, user,
};
use crate::backend_test;

backend_test!(
    async fn members_crud_by_user_id_and_username(app) {
        let alice = user(&app, "alice").await;
        let bob = user(&app, "bob").await;
        let id = project(&app, None, "team", false).await;
        let res = app.post("/api/v2.0/projects/team/members").admin()
            .json(&json!({"role_id": 2, "member_user": {"user_id": alice}})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let location = res.header("location").unwrap().to_string();
        assert!(location.starts_with("/api/v2.0/projects/team/members/"), "{location}");
        let mid: i64 = location.rsplit('/').next().unwrap().parse().unwrap();
        let res = app.post(&format!("/api/v2.0/projects/{id:03}/members")).admin()
            .json(&json!({"role_id": 3, "member_user": {"username": "bob"}})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert!(res.header("location").unwrap().starts_with(&format!("/api/v2.0/projects/{id}/members/")));

        let member = app.get(&format!("/api/v2.0/projects/team/members/{mid}")).admin().send().await.json();
        assert_eq!(member, json!({"id": mid, "project_id": id, "entity_name": "alice", "role_name": "developer",
            "role_id": 2, "entity_id": alice, "entity_type": "u"}));
        let list = app.get("/api/v2.0/projects/team/members").basic("alice", PASSWORD).send().await;
        assert_eq!(list.header("x-total-count"), Some("3"));
        let names: Vec<_> = list.json().as_array().unwrap().iter().map(|m| m["entity_name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ["admin", "alice", "bob"]);
        let filtered = app.get("/api/v2.0/projects/team/members?entityname=bob").admin().send().await;
        assert_eq!(filtered.json().as_array().unwrap().len(), 1);
        assert_eq!(filtered.json()[0]["entity_id"], bob);
        assert_eq!(filtered.header("x-total-count"), Some("3"), "Harbor counts every member");
        let paged = app.get("/api/v2.0/projects/team/members?page=2&page_size=2").admin().send().await;
        assert_eq!(paged.json().as_array().unwrap().len(), 1);
        assert_eq!(paged.header("link"), Some("</api/v2.0/projects/team/members?page=1&page_size=2>; rel=\"prev\""));

        let res = app.put(&format!("/api/v2.0/projects/team/members/{mid}")).admin().json(&json!({"role_id": 4})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let member = app.get(&format!("/api/v2.0/projects/team/members/{mid}")).admin().send().await.json();
        assert_eq!((member["role_id"].clone(), member["role_name"].clone()), (json!(4), json!("maintainer")));
        let project = app.get("/api/v2.0/projects/team").basic("alice", PASSWORD).send().await.json();
        assert_eq!(project["current_user_role_ids"], json!([4]));

        let res = app.delete(&format!("/api/v2.0/projects/team/members/{mid}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("/api/v2.0/projects/team/members/{mid}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(message(&res), format!("the project member is not found, project id {id}, member id {mid}"));
        assert_eq!(app.get("/api/v2.0/projects/team").basic("alice", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        // Harbor: deleting or updating a missing member is a no-op 200.
        assert_eq!(app.delete(&format!("/api/v2.0/projects/team/members/{mid}")).admin().send().await.status, StatusCode::OK);
        assert_eq!(app.put("/api/v2.0/projects/team/members/9999").admin().json(&json!({"role_id": 2})).send().await.status, StatusCode::OK);
    }
);

backend_test!(
    async fn member_operations_follow_the_role_matrix(app) {
        let id = project_with_every_role(&app).await;
        let target = user(&app, "target").await;
        for (label, login) in CALLERS {
            let list = as_caller(app.get(&format!("/api/v2.0/projects/{id}/members")), login).send().await;
            let expected = match label {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "outsider" | "limited" => StatusCode::FORBIDDEN,
                _ => StatusCode::OK,
            };
            assert_eq!(list.status, expected, "list as {label}");
            let create = as_caller(app.post(&format!("/api/v2.0/projects/{id}/members")), login)
                .json(&json!({"role_id": 3, "member_user": {"user_id": target}}))
                .send()
                .await;
            let expected = match label {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "pa" => StatusCode::CREATED,
                "admin" => StatusCode::CONFLICT,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(create.status, expected, "create as {label}: {}", create.text());
        }
        let list = app.get(&format!("/api/v2.0/projects/{id}/members?entityname=target")).admin().send().await.json();
        let mid = list[0]["id"].as_i64().unwrap();
        for (label, login) in CALLERS {
            let update = as_caller(app.put(&format!("/api/v2.0/projects/{id}/members/{mid}")), login)
                .json(&json!({"role_id": 2})).send().await;
            let get = as_caller(app.get(&format!("/api/v2.0/projects/{id}/members/{mid}")), login).send().await;
            let (write, read) = match label {
                "anonymous" => (StatusCode::UNAUTHORIZED, StatusCode::UNAUTHORIZED),
                "outsider" | "limited" => (StatusCode::FORBIDDEN, StatusCode::FORBIDDEN),
                "pa" | "admin" => (StatusCode::OK, StatusCode::OK),
                _ => (StatusCode::FORBIDDEN, StatusCode::OK),
            };
            assert_eq!(update.status, write, "update as {label}");
            assert_eq!(get.status, read, "get as {label}");
        }
        let del = app.delete(&format!("/api/v2.0/projects/{id}/members/{mid}")).basic("maint", PASSWORD).send().await;
        assert_eq!(del.status, StatusCode::FORBIDDEN);
        let del = app.delete(&format!("/api/v2.0/projects/{id}/members/{mid}")).basic("pa", PASSWORD).send().await;
        assert_eq!(del.status, StatusCode::OK);
    }
);

backend_test!(
    async fn member_errors_are_harbor_4xx_and_change_nothing(app) {
        let alice = user(&app, "alice").await;
        let id = project(&app, None, "team", false).await;
        let cases = [
            (json!({"role_id": 2, "member_user": {"user_id": 999}}), StatusCode::BAD_REQUEST, "User 999 not found"),
            (json!({"role_id": 2, "member_user": {"username": "nobody"}}), StatusCode::NOT_FOUND, "user nobody is not found"),
            (json!({"role_id": 2, "member_group": {"id": 77}}), StatusCode::BAD_REQUEST, "Group 77 not found"),
            (json!({"role_id": 2, "member_group": {"ldap_group_dn": "cn=devs,dc=example,dc=com"}}), StatusCode::NOT_FOUND, "is not found"),
            (json!({"role_id": 2}), StatusCode::BAD_REQUEST, "at least one of member_user or member_group must be provided"),
            (json!({"role_id": 9, "member_user": {"user_id": alice}}), StatusCode::BAD_REQUEST, "role is not in"),
            (json!({"member_user": {"user_id": alice}}), StatusCode::BAD_REQUEST, "role is not in"),
            (json!({"role_id": "2", "member_user": {"user_id": alice}}), StatusCode::BAD_REQUEST, "parsing the request body failed"),
            (json!({"role_id": 1, "member_user": {"user_id": 1}}), StatusCode::CONFLICT, "The project member specified already exist"),
        ];
        for (body, status, expected) in cases {
            let res = app.post("/api/v2.0/projects/team/members").admin().json(&body).send().await;
            assert_eq!(res.status, status, "{body}");
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        let count = app.get("/api/v2.0/projects/team/members").admin().send().await;
        assert_eq!(count.header("x-total-count"), Some("1"));

        let mid = member(&app, id, alice, 2).await;
        let res = app.post("/api/v2.0/projects/team/members").admin()
            .json(&json!({"role_id": 3, "member_user": {"username": "alice"}})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        for (method, uri, body, expected) in [
            ("GET", "/api/v2.0/projects/team/members/0", None, "the member id can not be empty!"),
            ("PUT", "/api/v2.0/projects/team/members/0", Some(json!({"role_id": 2})), "member id can not be empty"),
            ("DELETE", "/api/v2.0/projects/team/members/0", None, "the project member id is required."),
            ("GET", "/api/v2.0/projects/team/members/abc", None, "mid in path must be of type int64"),
            ("PUT", &format!("/api/v2.0/projects/team/members/{mid}"), Some(json!({})), "role can not be empty"),
            ("PUT", &format!("/api/v2.0/projects/team/members/{mid}"), Some(json!({"role_id": 7})), "role is not in"),
            ("GET", "/api/v2.0/projects/team/members?page_size=500", None, "page_size in query should be less than or equal to 100"),
        ] {
            let request = app.request(method.parse().unwrap(), uri).admin();
            let request = match body { Some(b) => request.json(&b), None => request };
            let res = request.send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{method} {uri}");
            assert!(message(&res).contains(expected), "{method} {uri}: {}", message(&res));
        }
        let member = app.get(&format!("/api/v2.0/projects/team/members/{mid}")).admin().send().await.json();
        assert_eq!(member["role_id"], 2);
        let other = project(&app, None, "other", false).await;
        let res = app.get(&format!("/api/v2.0/projects/{other}/members/{mid}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "a member id of another project");
    }
);

backend_test!(
    async fn group_members_grant_their_users_access(app) {
        let alice = user(&app, "alice").await;
        let id = project(&app, None, "team", false).await;
        let group = app.store().groups().create("devs", 1, Some("cn=devs,dc=example,dc=com")).await.unwrap();
        app.store().groups().add_member(alice, group.id).await.unwrap();
        assert_eq!(app.get("/api/v2.0/projects/team").basic("alice", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        let res = app.post("/api/v2.0/projects/team/members").admin()
            .json(&json!({"role_id": 2, "member_group": {"id": group.id}})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.post("/api/v2.0/projects/team/members").admin()
            .json(&json!({"role_id": 3, "member_group": {"ldap_group_dn": "cn=devs,dc=example,dc=com"}})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let members = app.get("/api/v2.0/projects/team/members?entityname=devs").admin().send().await.json();
        assert_eq!(members[0]["entity_type"], "g");
        assert_eq!(members[0]["entity_id"], group.id);
        let project = app.get("/api/v2.0/projects/team").basic("alice", PASSWORD).send().await;
        assert_eq!(project.status, StatusCode::OK);
        assert_eq!(project.json()["current_user_role_ids"], json!([2]));
        let listed = app.get("/api/v2.0/projects?public=false").basic("alice", PASSWORD).send().await;
        assert_eq!(listed.json()[0]["project_id"], id);
        // Counted as listed: the project through the group, and the public library.
        assert_eq!(listed.header("x-total-count"), Some("1"));
        let listed = app.get("/api/v2.0/projects").basic("alice", PASSWORD).send().await;
        assert_eq!(listed.header("x-total-count"), Some("2"), "{}", listed.text());
        assert_eq!(listed.json().as_array().map(Vec::len), Some(2));
    }
);
