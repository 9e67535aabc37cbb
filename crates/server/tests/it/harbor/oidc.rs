//! Single sign-on (`auth_mode=oidc_auth`) against a real OpenID provider (the
//! certified `oidc-provider` package, `scripts/oidc-fixture`), with `berth
//! serve` on a socket of its own: the authorization code flow through
//! `/c/oidc/login` and `/c/oidc/callback`, onboarding, groups, the admin
//! group, CLI secrets on the API and with skopeo, ID tokens as bearer tokens,
//! and every refusal: state, browser, nonce, audience, expiry, issuer, keys.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::registry::clients::{build_layout, layout_ref, require, run, skopeo};
use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, Backend, CookieJar, MASTER_KEY, OidcProvider, ServedBerth,
    database_url, location, manual_client,
};

/// A served Berth in `oidc_auth` mode, with its client at the provider.
struct Sso {
    server: ServedBerth,
    provider: OidcProvider,
    client_id: String,
    http: reqwest::Client,
    database: String,
    dir: tempfile::TempDir,
}

/// `berth serve` on `database` with its data in `dir`, known to clients as
/// `external` (its own address when `None`), with `env` added.
async fn serve(
    dir: &std::path::Path,
    database: &str,
    external: Option<&str>,
    env: &[(&str, &str)],
) -> ServedBerth {
    ServedBerth::start(|port| {
        let mut command = Command::new(BERTH_BIN);
        let own = format!("http://127.0.0.1:{port}");
        command
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env("DATABASE_URL", database)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("MASTER_KEY", MASTER_KEY)
            .env("EXTERNAL_URL", external.unwrap_or(&own))
            .env_remove("BLOB_STORE");
        for (name, value) in env {
            command.env(name, value);
        }
        command
    })
    .await
}

/// A served Berth on `backend` (`env` added), registered at the provider and
/// configured for it with `config` over the defaults of these tests.
async fn sso(backend: Backend, config: Value, env: &[(&str, &str)]) -> Sso {
    let dir = tempfile::tempdir().unwrap();
    let database = database_url(backend, dir.path()).await;
    let server = serve(dir.path(), &database, None, env).await;
    let provider = OidcProvider::from_env();
    let client = provider.register(&server.url("/c/oidc/callback")).await;
    let sso = Sso {
        server,
        client_id: client.id.clone(),
        provider,
        http: manual_client(),
        database,
        dir,
    };
    let mut settings = json!({
        "auth_mode": "oidc_auth",
        "oidc_name": "Test IdP",
        "oidc_endpoint": sso.provider.url,
        "oidc_client_id": client.id,
        "oidc_client_secret": client.secret,
        "oidc_scope": "openid,profile,email,groups,offline_access",
        "oidc_verify_cert": true,
        "oidc_auto_onboard": true,
        "oidc_user_claim": "preferred_username",
        "oidc_groups_claim": "groups",
        "oidc_admin_group": "berth-admins",
    });
    if let (Some(settings), Some(config)) = (settings.as_object_mut(), config.as_object()) {
        settings.extend(config.clone());
    }
    let res = sso
        .admin(Method::PUT, "/api/v2.0/configurations", Some(settings))
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    sso
}

/// A fresh account name, so that tests sharing the provider do not meet.
fn account(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &berth_auth::secret::random_alphanumeric(8).to_lowercase()
    )
}

impl Sso {
    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> reqwest::Response {
        let mut request = self
            .http
            .request(method, self.url(path))
            .basic_auth("admin", Some(ADMIN_PASSWORD));
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    /// Creates private project `name` with `member` (a `member_user` or
    /// `member_group` object) as its developer.
    async fn private_project(&self, name: &str, mut member: Value) {
        let project = json!({"project_name": name, "metadata": {"public": "false"}});
        let res = self
            .admin(Method::POST, "/api/v2.0/projects", Some(project))
            .await;
        assert_eq!(res.status(), 201);
        member["role_id"] = json!(2);
        let path = format!("/api/v2.0/projects/{name}/members");
        let res = self.admin(Method::POST, &path, Some(member)).await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    }

    /// A GET with Basic credentials.
    async fn get_basic(&self, path: &str, login: &str, password: &str) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .basic_auth(login, Some(password))
            .send()
            .await
            .unwrap()
    }

    /// A GET with the cookies of `jar`.
    async fn get_with(&self, path: &str, jar: &CookieJar) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap()
    }

    /// Starts a sign-in in a browser whose cookies are `jar`: the provider's
    /// authorization URL.
    async fn begin(&self, jar: &mut CookieJar) -> String {
        let res = self.get_with("/c/oidc/login", jar).await;
        assert_eq!(res.status(), StatusCode::FOUND);
        jar.take(&res);
        assert!(jar.get("oidc_login").is_some(), "the sign-in cookie");
        let to = location(&res);
        assert!(to.starts_with(&self.provider.url), "{to}");
        to
    }

    /// The callback, as the browser of `jar` follows it.
    async fn callback(&self, jar: &mut CookieJar, url: &str) -> reqwest::Response {
        let res = self
            .http
            .get(url)
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        jar.take(&res);
        res
    }

    /// The whole sign-in of `account` in a new browser: its cookies and the
    /// callback's answer.
    async fn sign_in(&self, account: &str) -> (CookieJar, reqwest::Response) {
        let mut jar = CookieJar::default();
        let authorize = self.begin(&mut jar).await;
        let back = self.provider.authorize(&authorize, account).await;
        assert!(back.starts_with(&self.url("/c/oidc/callback")), "{back}");
        let res = self.callback(&mut jar, &back).await;
        (jar, res)
    }

    /// [`Sso::sign_in`] that must end signed in; the browser's cookies.
    async fn signed_in(&self, account: &str) -> CookieJar {
        let (jar, res) = self.sign_in(account).await;
        assert_eq!(
            res.status(),
            StatusCode::SEE_OTHER,
            "{}",
            res.text().await.unwrap()
        );
        assert_eq!(location(&res), self.url("/harbor/projects"));
        assert!(jar.get("sid").is_some(), "a session");
        assert!(
            jar.get("oidc_login").is_none(),
            "the sign-in cookie is cleared"
        );
        jar
    }

    /// `users/current` of the browser of `jar`.
    async fn current(&self, jar: &CookieJar) -> Value {
        let res = self.get_with("/api/v2.0/users/current", jar).await;
        assert_eq!(res.status(), 200);
        res.json().await.unwrap()
    }
}

async fn put_person(provider: &OidcProvider, id: &str, groups: &[&str]) {
    provider
        .put_account(
            id,
            json!({
                "preferred_username": id,
                "name": format!("{id} Person"),
                "email": format!("{id}@example.test"),
                "email_verified": true,
                "groups": groups,
            }),
        )
        .await;
}

macro_rules! both_backends {
    ($name:ident, $run:ident) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $run(Backend::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $run(Backend::Postgres).await;
            }
        }
    };
}

/// First sign-in onboards the user (profile from the claims, a CLI secret,
/// the filtered groups, the admin group's administrator flag); the next
/// sign-in links to the same user and refreshes what changed. Groups are
/// project members by name; the local admin keeps its password.
async fn sign_in_onboards_and_maps_groups(backend: Backend) {
    let sso = sso(backend, json!({"oidc_group_filter": "^(dev-|berth-)"}), &[]).await;
    let alice = account("alice");
    let developers = format!("dev-{alice}");
    put_person(
        &sso.provider,
        &alice,
        &[&developers, "berth-admins", "other"],
    )
    .await;

    // The sign-in page offers the provider.
    let page = sso
        .http
        .get(sso.url("/harbor/sign-in"))
        .send()
        .await
        .unwrap();
    let html = page.text().await.unwrap();
    assert!(
        html.contains(r#"id="log_in_oidc""#) && html.contains("Test IdP"),
        "{html}"
    );

    // A project whose members include the provider's group, before anyone of it signed in.
    sso.private_project(
        "team",
        json!({"member_group": {"group_name": developers, "group_type": 3}}),
    )
    .await;

    let jar = sso.signed_in(&alice).await;
    let me = sso.current(&jar).await;
    assert_eq!(me["username"], alice.as_str());
    assert_eq!(me["email"], format!("{alice}@example.test"));
    assert_eq!(me["realname"], format!("{alice} Person"));
    assert_eq!(
        me["sysadmin_flag"], true,
        "berth-admins makes administrators"
    );
    let meta = &me["oidc_user_meta"];
    assert_eq!(meta["user_id"], me["user_id"]);
    let issuer = sso.provider.url.clone();
    assert_eq!(meta["subiss"], format!("{alice}{issuer}"));
    let secret = meta["secret"].as_str().unwrap().to_string();
    assert!(secret.len() >= 8);

    // The filter kept the two groups it matches, as OIDC groups (type 3).
    let res = sso
        .admin(Method::GET, "/api/v2.0/usergroups?page_size=100", None)
        .await;
    let groups: Value = res.json().await.unwrap();
    let names: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["group_type"] == 3)
        .map(|g| g["group_name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&developers.as_str()) && names.contains(&"berth-admins"),
        "{names:?}"
    );
    assert!(!names.contains(&"other"), "{names:?}");

    // The CLI secret is a password for the API; the group gives the project.
    let res = sso
        .get_basic("/api/v2.0/users/current", &alice, &secret)
        .await;
    assert_eq!(res.status(), 200);
    let res = sso
        .get_basic("/api/v2.0/users/current", &alice, "Wrong-Secret-1")
        .await;
    assert_eq!(res.status(), 401);
    // The generator-rest surface: no local sign-up; sign-in by e-mail with the CLI secret.
    let res = sso
        .http
        .post(sso.url("/users"))
        .json(
            &json!({"access_token": MASTER_KEY, "email": "new@example.test", "password": "123456"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = sso
        .http
        .post(sso.url("/auth"))
        .basic_auth(format!("{alice}@example.test"), Some(&secret))
        .form(&[("access_token", MASTER_KEY)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let token: Value = res.json().await.unwrap();
    let res = sso
        .http
        .get(sso.url("/api/v2.0/users/current"))
        .bearer_auth(token["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["username"], alice.as_str());
    // No longer an administrator (the admin group is gone), still a developer of team.
    put_person(&sso.provider, &alice, &[&developers]).await;
    let jar = sso.signed_in(&alice).await;
    let again = sso.current(&jar).await;
    assert_eq!(
        again["user_id"], me["user_id"],
        "the same user, linked by sub and iss"
    );
    assert_eq!(again["sysadmin_flag"], false);
    assert_eq!(
        again["oidc_user_meta"]["secret"],
        secret.as_str(),
        "the secret stays"
    );
    let res = sso
        .get_basic("/api/v2.0/projects/team", &alice, &secret)
        .await;
    assert_eq!(res.status(), 200, "a member through the group");
    let perms = sso
        .get_basic(
            "/api/v2.0/users/current/permissions?scope=/project/team&relative=true",
            &alice,
            &secret,
        )
        .await;
    let perms: Value = perms.json().await.unwrap();
    assert!(
        perms
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["resource"] == "repository" && p["action"] == "push"),
        "{perms}"
    );
    // Out of the group: out of the project.
    put_person(&sso.provider, &alice, &[]).await;
    sso.signed_in(&alice).await;
    let res = sso
        .get_basic("/api/v2.0/projects/team", &alice, &secret)
        .await;
    assert!(
        matches!(res.status().as_u16(), 403 | 404),
        "{}",
        res.status()
    );

    // The local administrator keeps its password, on the API and in the portal.
    let res = sso
        .get_basic("/api/v2.0/users/current", "admin", ADMIN_PASSWORD)
        .await;
    assert_eq!(res.status(), 200);
    let res = sso
        .http
        .post(sso.url("/harbor/sign-in"))
        .form(&[("principal", "admin"), ("password", ADMIN_PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    // A provider's user has no password to sign in with there.
    let res = sso
        .http
        .post(sso.url("/harbor/sign-in"))
        .form(&[("principal", alice.as_str()), ("password", "Anything-1")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}
both_backends!(
    sign_in_onboards_and_maps_groups_,
    sign_in_onboards_and_maps_groups
);

/// The callback is refused for a state that is not this browser's sign-in's,
/// from a browser that did not begin it, twice, or with an error from the
/// provider; nothing is signed in.
async fn callbacks_that_are_not_this_browsers_are_refused(backend: Backend) {
    let sso = sso(backend, json!({}), &[]).await;
    let bob = account("bob");
    put_person(&sso.provider, &bob, &[]).await;

    // A wrong state.
    let mut jar = CookieJar::default();
    let authorize = sso.begin(&mut jar).await;
    let back = sso.provider.authorize(&authorize, &bob).await;
    let forged = reqwest::Url::parse_with_params(
        &sso.url("/c/oidc/callback"),
        reqwest::Url::parse(&back)
            .unwrap()
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "state" {
                    "x".repeat(32)
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            }),
    )
    .unwrap();
    let res = sso.callback(&mut jar, forged.as_str()).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("state"));
    // The sign-in was spent by the refusal: the right state no longer works either.
    let res = sso.callback(&mut jar, &back).await;
    assert_eq!(res.status(), 400);
    assert!(jar.get("sid").is_none());

    // Another browser (no sign-in cookie, or another one's) cannot use the callback.
    let mut victim = CookieJar::default();
    let authorize = sso.begin(&mut victim).await;
    let back = sso.provider.authorize(&authorize, &bob).await;
    let mut other = CookieJar::default();
    let res = sso.callback(&mut other, &back).await;
    assert_eq!(res.status(), 400);
    sso.begin(&mut other).await;
    let res = sso.callback(&mut other, &back).await;
    assert_eq!(res.status(), 400);
    assert!(other.get("sid").is_none());
    // The browser that began it signs in, once; a replay is refused.
    let res = sso.callback(&mut victim, &back).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let mut replay = victim.clone();
    replay.remove("sid");
    let res = sso.callback(&mut replay, &back).await;
    assert_eq!(res.status(), 400);

    // The provider's refusal is shown, not signed in.
    let mut jar = CookieJar::default();
    let authorize = sso.begin(&mut jar).await;
    let state = reqwest::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let denied = format!(
        "{}?error=access_denied&error_description=no&state={state}",
        sso.url("/c/oidc/callback")
    );
    let res = sso.callback(&mut jar, &denied).await;
    assert_eq!(res.status(), 403);
    assert!(jar.get("sid").is_none());
}
both_backends!(
    callbacks_that_are_not_this_browsers_are_refused_,
    callbacks_that_are_not_this_browsers_are_refused
);

/// With `oidc_auto_onboard` off, a new user chooses a username (the claim's
/// suggestion filled in); a taken or invalid one is refused with the form again.
async fn a_new_user_chooses_a_username(backend: Backend) {
    let sso = sso(backend, json!({"oidc_auto_onboard": false}), &[]).await;
    let carol = account("carol");
    put_person(&sso.provider, &carol, &[]).await;
    let (mut jar, res) = sso.sign_in(&carol).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), sso.url("/c/oidc/onboard"));
    assert!(jar.get("sid").is_none(), "not signed in yet");
    let page = sso.get_with("/c/oidc/onboard", &jar).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(&format!(r#"value="{carol}""#)), "{html}");

    let choose = |name: &'static str, jar: &CookieJar| {
        let request = sso
            .http
            .post(sso.url("/c/oidc/onboard"))
            .header("cookie", jar.header())
            .form(&[("username", name)]);
        async move { request.send().await.unwrap() }
    };
    let res = choose("admin", &jar).await;
    assert_eq!(res.status(), StatusCode::CONFLICT);
    assert!(res.text().await.unwrap().contains("same username"));
    let res = choose("bad$name", &jar).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    // Another browser cannot finish it.
    let res = choose("thief", &CookieJar::default()).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let res = choose("carol-the-first", &jar).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    jar.take(&res);
    let me = sso.current(&jar).await;
    assert_eq!(me["username"], "carol-the-first");
    // The next sign-in goes straight in, as the same user; the first
    // browser's session lives on (nothing about the user changed).
    let other = sso.signed_in(&carol).await;
    assert_eq!(sso.current(&other).await["username"], "carol-the-first");
    assert_eq!(sso.current(&jar).await["username"], "carol-the-first");
}
both_backends!(
    a_new_user_chooses_a_username_,
    a_new_user_chooses_a_username
);

/// An ID token of the provider works as a bearer token on the API when its
/// signature, issuer, audience and expiry hold and its subject has signed in;
/// a key the provider rotated in is fetched.
async fn id_tokens_are_bearer_tokens(backend: Backend) {
    let sso = sso(backend, json!({}), &[]).await;
    let dave = account("dave");
    put_person(&sso.provider, &dave, &[]).await;
    sso.signed_in(&dave).await;
    let bearer = |token: String| {
        let request = sso
            .http
            .get(sso.url("/api/v2.0/users/current"))
            .bearer_auth(token);
        async move { request.send().await.unwrap() }
    };
    let p = &sso.provider;
    let good = p.id_token(&dave, &sso.client_id, 300, json!({})).await;
    let res = bearer(good).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["username"], dave.as_str());

    for (what, token) in [
        (
            "another audience",
            p.id_token(&dave, "someone-else", 300, json!({})).await,
        ),
        (
            "expired",
            p.id_token(&dave, &sso.client_id, -300, json!({})).await,
        ),
        (
            "another issuer",
            p.id_token(
                &dave,
                &sso.client_id,
                300,
                json!({"iss": "https://evil.test"}),
            )
            .await,
        ),
        (
            "not valid for an hour yet",
            p.id_token(
                &dave,
                &sso.client_id,
                7200,
                json!({"claims": {"nbf": unix_now() + 3600}}),
            )
            .await,
        ),
        (
            "a subject that never signed in",
            p.id_token("nobody", &sso.client_id, 300, json!({})).await,
        ),
        ("not a token", "abc.def.ghi".to_string()),
    ] {
        let res = bearer(token).await;
        assert_eq!(res.status(), 401, "{what}");
    }
    // A clock a little ahead at the provider is allowed for (60 s).
    let soon = p
        .id_token(
            &dave,
            &sso.client_id,
            300,
            json!({"claims": {"nbf": unix_now() + 30}}),
        )
        .await;
    assert_eq!(bearer(soon).await.status(), 200);
    // A tampered payload breaks the signature.
    let good = p.id_token(&dave, &sso.client_id, 300, json!({})).await;
    let mut parts: Vec<String> = good.split('.').map(String::from).collect();
    parts[1] = parts[1].chars().rev().collect();
    let res = bearer(parts.join(".")).await;
    assert_eq!(res.status(), 401, "tampered");

    // The provider rotates its key: tokens signed with the new one are
    // accepted (keys fetched again), and the old key is gone.
    let old = p.id_token(&dave, &sso.client_id, 300, json!({})).await;
    p.rotate().await;
    // Berth fetches the keys again for an unknown key at most once a second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let new = p.id_token(&dave, &sso.client_id, 300, json!({})).await;
    assert_eq!(
        bearer(new).await.status(),
        200,
        "a rotated key is picked up"
    );
    // A sign-in through the browser is verified with the new key too.
    sso.signed_in(&dave).await;
    // The key set fetched again no longer has the old key.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(bearer(old).await.status(), 401, "the retired key");
}
both_backends!(id_tokens_are_bearer_tokens_, id_tokens_are_bearer_tokens);

/// The ID token of the code flow must carry this sign-in's nonce: checked
/// against the provider's real keys through the library the callback uses.
#[tokio::test]
async fn an_id_token_with_another_nonce_is_refused() {
    let provider = OidcProvider::from_env();
    let settings = berth::oidc::OidcSettings {
        name: String::new(),
        endpoint: provider.url.clone(),
        client_id: "berth-nonce-test".into(),
        client_secret: String::new(),
        scopes: vec!["openid".into()],
        verify_cert: true,
        auto_onboard: true,
        user_claim: String::new(),
        groups_claim: String::new(),
        group_filter: String::new(),
        admin_group: String::new(),
        extra_parameters: Vec::new(),
        logout: false,
    };
    let client = berth::oidc::OidcClient::new().unwrap();
    let token = provider
        .id_token(
            "erin",
            "berth-nonce-test",
            300,
            json!({"claims": {"nonce": "the-real-one"}}),
        )
        .await;
    let verified = client
        .verify_id_token(&settings, &token, Some("the-real-one"))
        .await
        .unwrap();
    assert_eq!(verified.subject, "erin");
    assert_eq!(verified.issuer, provider.url);
    let refused = client
        .verify_id_token(&settings, &token, Some("another-one"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("nonce"), "{refused}");
    let no_nonce = provider
        .id_token("erin", "berth-nonce-test", 300, json!({}))
        .await;
    assert!(
        client
            .verify_id_token(&settings, &no_nonce, Some("the-real-one"))
            .await
            .is_err()
    );
}

/// The CLI secret is the password of docker-style clients: skopeo pushes and
/// pulls with it, a new secret replaces it, and it stops working once the
/// provider no longer accepts the user's refresh token.
async fn cli_secrets_push_and_pull_until_the_provider_revokes(backend: Backend) {
    require("skopeo");
    let sso = sso(backend, json!({}), &[("BERTH_OIDC_TOKEN_CHECK", "0s")]).await;
    let erin = account("erin");
    put_person(&sso.provider, &erin, &[]).await;
    let jar = sso.signed_in(&erin).await;
    let me = sso.current(&jar).await;
    let user_id = me["user_id"].as_i64().unwrap();
    let secret = me["oidc_user_meta"]["secret"].as_str().unwrap().to_string();
    sso.private_project("builds", json!({"member_user": {"username": erin}}))
        .await;

    let work = tempfile::tempdir().unwrap();
    let layout = build_layout(work.path());
    let remote = format!("docker://{}/builds/app:v3", sso.server.host());
    let creds = format!("{erin}:{secret}");
    run(skopeo()
        .args(["copy", "--dest-tls-verify=false", "--dest-creds", &creds])
        .arg(format!("oci:{}:v3", layout.dir.display()))
        .arg(&remote));
    let out = work.path().join("pulled");
    run(skopeo()
        .args(["copy", "--src-tls-verify=false", "--src-creds", &creds])
        .arg(&remote)
        .arg(format!("oci:{}:v3", out.display())));
    assert_eq!(layout_ref(&out, "v3"), layout.v3);

    // A new secret: Harbor's rule, only the user or an administrator, under oidc_auth.
    let set = |who: (&str, &str), body: Value| {
        let request = sso
            .http
            .put(sso.url(&format!("/api/v2.0/users/{user_id}/cli_secret")))
            .basic_auth(who.0, Some(who.1))
            .json(&body);
        async move { request.send().await.unwrap() }
    };
    let res = set((&erin, &secret), json!({"secret": "weak"})).await;
    assert_eq!(res.status(), 400);
    let res = set((&erin, &secret), json!({"secret": "Fresh-Secret-2"})).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let res = sso
        .get_basic("/api/v2.0/users/current", &erin, &secret)
        .await;
    assert_eq!(res.status(), 401, "the old secret is refused at once");
    let res = sso
        .get_basic("/api/v2.0/users/current", &erin, "Fresh-Secret-2")
        .await;
    assert_eq!(res.status(), 200);
    let res = set(
        ("admin", ADMIN_PASSWORD),
        json!({"secret": "Admin-Chosen-3"}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let creds = format!("{erin}:Admin-Chosen-3");
    run(skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(&remote));

    // The provider forgets the user: its refresh token no longer works, nor
    // the secret, once the sign-in cached for the last request (2 s) is
    // checked again (BERTH_OIDC_TOKEN_CHECK=0s: every check asks the provider).
    sso.provider.delete_account(&erin).await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let res = sso
        .get_basic("/api/v2.0/users/current", &erin, "Admin-Chosen-3")
        .await;
    assert_eq!(res.status(), 401);
    let output = skopeo()
        .args(["inspect", "--raw", "--tls-verify=false", "--creds", &creds])
        .arg(&remote)
        .output()
        .unwrap();
    assert!(!output.status.success(), "skopeo must be refused");
    // Back at the provider and signed in again: the secret works again.
    put_person(&sso.provider, &erin, &[]).await;
    sso.signed_in(&erin).await;
    let res = sso
        .get_basic("/api/v2.0/users/current", &erin, "Admin-Chosen-3")
        .await;
    assert_eq!(res.status(), 200);
    // The provider revokes the user's refresh tokens (the account stays): refused again.
    assert!(sso.provider.revoke_refresh_tokens(&erin).await >= 1);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let res = sso
        .get_basic("/api/v2.0/users/current", &erin, "Admin-Chosen-3")
        .await;
    assert_eq!(res.status(), 401, "a revoked refresh token");
}
both_backends!(
    cli_secrets_push_and_pull_until_the_provider_revokes_,
    cli_secrets_push_and_pull_until_the_provider_revokes
);

/// The settings: the ping reads the discovery document (administrators
/// only), endpoints must be https (or loopback), filters must compile;
/// `cli_secret` is refused outside `oidc_auth`; signing out ends the
/// provider's session too when `oidc_logout` is on.
async fn settings_ping_and_sign_out(backend: Backend) {
    let sso = sso(backend, json!({"oidc_logout": true}), &[]).await;
    let ping = |body: Value| sso.admin(Method::POST, "/api/v2.0/system/oidc/ping", Some(body));
    let res = ping(json!({"url": sso.provider.url, "verify_cert": true})).await;
    assert_eq!(res.status(), 200);
    let closed = crate::util::RefusedPort::new();
    let res = ping(json!({"url": format!("http://127.0.0.1:{}", closed.port())})).await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["errors"][0]["message"], "failed to verify connection");
    let res = ping(json!({"url": "http://idp.example.com"})).await;
    assert_eq!(res.status(), 400);

    for (item, value) in [
        ("oidc_endpoint", json!("http://idp.example.com")),
        ("oidc_group_filter", json!("(unclosed")),
        ("oidc_extra_redirect_parms", json!("[1]")),
    ] {
        let res = sso
            .admin(
                Method::PUT,
                "/api/v2.0/configurations",
                Some(json!({ item: value })),
            )
            .await;
        assert_eq!(res.status(), 400, "{item}");
    }
    let res = sso
        .admin(
            Method::PUT,
            "/api/v2.0/configurations",
            Some(json!({"oidc_extra_redirect_parms": "{\"prompt\":\"consent\",\"ui_locales\":\"en\"}"})),
        )
        .await;
    assert_eq!(res.status(), 200);
    let mut jar = CookieJar::default();
    let authorize = sso.begin(&mut jar).await;
    assert!(authorize.contains("ui_locales=en"), "{authorize}");
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "{authorize}"
    );

    let frank = account("frank");
    put_person(&sso.provider, &frank, &[]).await;
    let jar = sso.signed_in(&frank).await;
    let me = sso.current(&jar).await;
    let frank_secret = me["oidc_user_meta"]["secret"].as_str().unwrap().to_string();
    // Only administrators ping.
    let res = sso
        .http
        .post(sso.url("/api/v2.0/system/oidc/ping"))
        .basic_auth(&frank, Some(&frank_secret))
        .json(&json!({"url": sso.provider.url}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    // Someone else's secret is not frank's to set.
    let res = sso
        .http
        .put(sso.url("/api/v2.0/users/1/cli_secret"))
        .basic_auth(&frank, Some(&frank_secret))
        .json(&json!({"secret": "Other-Secret-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    // The profile page shows the CLI secret and makes a new one.
    let page = sso.get_with("/harbor/profile", &jar).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains(&format!(r#"data-copy="{frank_secret}""#)),
        "{html}"
    );
    let csrf = html
        .split(r#"name="csrf_token" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let res = sso
        .http
        .post(sso.url("/harbor/profile/cli-secret"))
        .header("cookie", jar.header())
        .form(&[("csrf_token", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = sso
        .http
        .post(sso.url("/harbor/profile/cli-secret"))
        .header("cookie", jar.header())
        .form(&[("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let renewed = sso.current(&jar).await["oidc_user_meta"]["secret"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(renewed, frank_secret);
    let res = sso
        .get_basic("/api/v2.0/users/current", &frank, &frank_secret)
        .await;
    assert_eq!(res.status(), 401, "the old secret");
    let res = sso
        .get_basic("/api/v2.0/users/current", &frank, &renewed)
        .await;
    assert_eq!(res.status(), 200);
    // The local admin's profile has no CLI secret.
    let res = sso
        .http
        .get(sso.url("/harbor/profile"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::SEE_OTHER,
        "the portal signs in with a session only"
    );

    // Signing out: the session ends, then the provider's.
    let res = sso
        .http
        .post(sso.url("/harbor/sign-out"))
        .header("cookie", jar.header())
        .form(&[("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let to = location(&res);
    assert!(
        to.starts_with(&format!("{}/session/end", sso.provider.url)),
        "{to}"
    );
    assert!(to.contains(&sso.client_id), "{to}");
    assert_eq!(
        sso.get_with("/api/v2.0/users/current", &jar).await.status(),
        401
    );

    // Back to db_auth is refused once users exist; cli_secret then needs oidc_auth.
    let res = sso
        .admin(
            Method::PUT,
            "/api/v2.0/configurations",
            Some(json!({"auth_mode": "db_auth"})),
        )
        .await;
    assert_eq!(res.status(), 400);
}
both_backends!(settings_ping_and_sign_out_, settings_ping_and_sign_out);

/// Instances share sign-ins: one behind the same address begins it, another
/// takes the provider's answer; the session works on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_begun_on_one_instance_ends_on_another() {
    let sso = sso(Backend::Postgres, json!({}), &[]).await;
    let other = serve(sso.dir.path(), &sso.database, Some(&sso.url("")), &[]).await;
    let gina = account("gina");
    put_person(&sso.provider, &gina, &[]).await;
    let mut jar = CookieJar::default();
    let authorize = sso.begin(&mut jar).await;
    let back = sso.provider.authorize(&authorize, &gina).await;
    let on_other = back.replace(&sso.url(""), &other.url(""));
    assert_ne!(on_other, back);
    let res = sso.callback(&mut jar, &on_other).await;
    assert_eq!(
        res.status(),
        StatusCode::SEE_OTHER,
        "{}",
        res.text().await.unwrap()
    );
    assert_eq!(sso.current(&jar).await["username"], gina.as_str());
    let res = sso
        .http
        .get(other.url("/api/v2.0/users/current"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// Seconds since the Unix epoch.
fn unix_now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}
