//! Shared set-up for the Harbor API tests: users, projects and members.

use axum::http::StatusCode;
use serde_json::json;

use crate::util::TestApp;

/// The password of every user the fixtures create.
pub const PASSWORD: &str = "Passw0rd-1";

/// Creates a local user with [`PASSWORD`]; returns its id.
pub async fn user(app: &TestApp, username: &str) -> i64 {
    app.create_user(username, PASSWORD).await
}

/// Creates a project through the API as `owner` (admin when `None`); returns its id.
pub async fn project(app: &TestApp, owner: Option<&str>, name: &str, public: bool) -> i64 {
    let body = json!({"project_name": name, "metadata": {"public": public.to_string()}});
    let request = app.post("/api/v2.0/projects").json(&body);
    let request = match owner {
        Some(login) => request.basic(login, PASSWORD),
        None => request.admin(),
    };
    let res = request.send().await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// Sets configuration items (`PUT /configurations`) as the administrator.
pub async fn configure(app: &TestApp, items: serde_json::Value) {
    let res = app
        .put("/api/v2.0/configurations")
        .admin()
        .json(&items)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
}

/// The id at the end of a response's `Location` header.
pub fn id_from_location(res: &crate::util::TestResponse) -> i64 {
    let location = res.header("location").expect("a Location header");
    location.rsplit('/').next().unwrap().parse().unwrap()
}

/// Adds `user_id` to `project_id` with `role` (as admin); returns the member id.
pub async fn member(app: &TestApp, project_id: i64, user_id: i64, role: i64) -> i64 {
    let res = app
        .post(&format!("/api/v2.0/projects/{project_id}/members"))
        .admin()
        .json(&json!({"role_id": role, "member_user": {"user_id": user_id}}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// A private project `p` with one user per role, plus a non-member `outsider`.
/// Returns the project id.
pub async fn project_with_every_role(app: &TestApp) -> i64 {
    let id = project(app, None, "p", false).await;
    for (name, role) in [
        ("pa", 1),
        ("dev", 2),
        ("guest", 3),
        ("maint", 4),
        ("limited", 5),
    ] {
        let uid = user(app, name).await;
        member(app, id, uid, role).await;
    }
    user(app, "outsider").await;
    id
}

/// The callers of a role matrix: `(label, login)`; `None` = anonymous, `admin` = sysadmin.
pub const CALLERS: [(&str, Option<&str>); 8] = [
    ("anonymous", None),
    ("outsider", Some("outsider")),
    ("limited", Some("limited")),
    ("guest", Some("guest")),
    ("dev", Some("dev")),
    ("maint", Some("maint")),
    ("pa", Some("pa")),
    ("admin", Some("admin")),
];

/// Sends `request` as the caller `login`.
pub fn as_caller<'a>(
    request: crate::util::RequestBuilder<'a>,
    login: Option<&str>,
) -> crate::util::RequestBuilder<'a> {
    match login {
        None => request,
        Some("admin") => request.admin(),
        Some(login) => request.basic(login, PASSWORD),
    }
}

/// The Harbor error body's message.
pub fn message(res: &crate::util::TestResponse) -> String {
    res.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The Harbor error body's code.
pub fn code(res: &crate::util::TestResponse) -> String {
    res.json()["errors"][0]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
