//! The web portal (`/harbor/`): sessions, CSRF, pages.

mod admin;
mod pages;
mod sessions;

use axum::http::StatusCode;

use crate::util::{ADMIN_PASSWORD, TestApp, TestResponse};

/// Signs in through the portal form; returns the `sid` cookie (`sid=...`).
pub async fn sign_in(app: &TestApp, login: &str, password: &str) -> String {
    let res = sign_in_as(app, "192.0.2.1", login, password).await;
    assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
    cookie_of(&res)
}

/// Signs `admin` in; returns the cookie.
pub async fn sign_in_admin(app: &TestApp) -> String {
    sign_in(app, "admin", ADMIN_PASSWORD).await
}

/// Posts the sign-in form from `peer`.
pub async fn sign_in_as(app: &TestApp, peer: &str, login: &str, password: &str) -> TestResponse {
    app.post("/harbor/sign-in")
        .peer(peer)
        .form(&[("principal", login), ("password", password)])
        .send()
        .await
}

/// The `sid=...` pair of a response's `Set-Cookie`.
pub fn cookie_of(res: &TestResponse) -> String {
    let set = res.header("set-cookie").expect("Set-Cookie");
    set.split(';').next().unwrap().to_string()
}

/// The CSRF token in a page's forms.
pub fn csrf_of(page: &str) -> String {
    let marker = r#"name="csrf_token" value=""#;
    let at = page.find(marker).expect("a CSRF field") + marker.len();
    page[at..].split('"').next().unwrap().to_string()
}

/// The CSRF token of the session `cookie` names, read from the projects page.
pub async fn csrf_for(app: &TestApp, cookie: &str) -> String {
    let page = app
        .get("/harbor/projects")
        .header("cookie", cookie)
        .send()
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    csrf_of(&page.text())
}

/// Posts `fields` (after the CSRF token, when given) to `path` as `cookie`.
pub async fn post_form(
    app: &TestApp,
    cookie: &str,
    path: &str,
    csrf: Option<&str>,
    fields: &[(&str, &str)],
) -> TestResponse {
    let mut all: Vec<(&str, &str)> = csrf.map(|c| ("csrf_token", c)).into_iter().collect();
    all.extend_from_slice(fields);
    app.post(path)
        .header("cookie", cookie)
        .form(&all)
        .send()
        .await
}
