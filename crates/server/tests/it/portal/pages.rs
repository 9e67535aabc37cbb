//! Portal pages: what they show, that they escape user data, and the
//! operations behind their forms (create and delete projects, delete tags).

use axum::http::StatusCode;
use serde_json::json;

use super::{csrf_for, post_form, sign_in, sign_in_admin};
use crate::backend_test;
use crate::harbor::fixtures;
use crate::registry::{descriptor, digest_of, push_blob, push_image, put_manifest};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

backend_test!(
    async fn portal_pages_escape_user_data(app) {
        // A username the store holds as given (directory users are imported as they are).
        app.create_user("<b>eve</b>", "Eve-pass-1").await;
        let cookie = sign_in(&app, "<b>eve</b>", "Eve-pass-1").await;
        let res = app
            .get("/harbor/projects?name=%3Cscript%3Ealert(1)%3C%2Fscript%3E&public=%22%3E")
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        let page = res.text();
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!page.contains("<b>eve"));
        assert!(page.contains("&lt;b&gt;eve&lt;/b&gt;"));
        assert!(
            res.header("content-security-policy")
                .unwrap()
                .contains("default-src 'self'")
        );
        // An invalid name comes back in an error page, escaped.
        let csrf = csrf_for(&app, &cookie).await;
        let res = app
            .post("/harbor/projects")
            .header("cookie", &cookie)
            .form(&[("csrf_token", &csrf), ("project_name", "<img src=x>")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(!res.text().contains("<img"));
    }
);

backend_test!(
    async fn portal_projects_are_listed_searched_created_and_deleted(app) {
        fixtures::project(&app, None, "alpha", true).await;
        fixtures::project(&app, None, "beta", false).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app
            .get("/harbor/projects?name=alp")
            .header("cookie", &cookie)
            .send()
            .await;
        let page = res.text();
        assert!(page.contains(r#"data-project="alpha""#));
        assert!(!page.contains(r#"data-project="beta""#));
        let res = app
            .get("/harbor/projects?public=false")
            .header("cookie", &cookie)
            .send()
            .await;
        let page = res.text();
        assert!(page.contains(r#"data-project="beta""#) && !page.contains(r#"data-project="alpha""#));

        let res = app
            .post("/harbor/projects")
            .header("cookie", &cookie)
            .form(&[("csrf_token", &csrf), ("project_name", "gamma"), ("public", "true")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(res.header("location"), Some("/harbor/projects/gamma"));
        let res = app.get("/api/v2.0/projects/gamma").admin().send().await;
        assert_eq!(res.json()["metadata"]["public"], "true");

        // A project with repositories: 412, explained.
        push_image(&app, "gamma/app", "v1", &[b"layer"]).await;
        let res = app
            .post("/harbor/projects/gamma/delete")
            .header("cookie", &cookie)
            .form(&[("csrf_token", &csrf)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        assert!(res.text().contains("still contains repositories"), "{}", res.text());
        let res = app
            .post("/harbor/projects/beta/delete")
            .header("cookie", &cookie)
            .form(&[("csrf_token", &csrf)])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        let res = app.get("/api/v2.0/projects/beta").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn portal_repository_page_shows_artifacts_and_deletes_tags(app) {
        push_image(&app, "library/team/web", "v1", &[b"one"]).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = app
            .get("/harbor/projects/library")
            .header("cookie", &cookie)
            .send()
            .await;
        assert!(res.text().contains(r#"href="/harbor/projects/library/repositories/team/web""#));
        let res = app
            .get("/harbor/projects/library/repositories/team/web")
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let page = res.text();
        assert!(page.contains(r#"data-copy="docker pull 127.0.0.1:9000/library/team/web:v1""#), "{page}");
        assert!(page.contains(r#"data-copy="docker pull 127.0.0.1:9000/library/team/web@sha256:"#));
        let digest = page
            .split(r#"<tr data-digest=""#)
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string();
        assert!(page.contains(&format!(">{}<", &digest[7..19])), "short digest");
        assert!(page.contains("IMAGE"));
        // A user who is not a member sees nothing of the private project.
        fixtures::project(&app, None, "secret", false).await;
        app.create_user("bob", "Bob-pass-1").await;
        let bob = sign_in(&app, "bob", "Bob-pass-1").await;
        let res = app
            .get("/harbor/projects/library/repositories/team/web")
            .header("cookie", &bob)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.text().contains("copy-tag") && !res.text().contains("delete-tag"));
        let res = app.get("/harbor/projects/secret").header("cookie", &bob).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let bob_csrf = csrf_for(&app, &bob).await;
        let form = |csrf: &str| {
            vec![
                ("csrf_token".to_string(), csrf.to_string()),
                ("project".into(), "library".into()),
                ("repository".into(), "team/web".into()),
                ("digest".into(), digest.clone()),
                ("tag".into(), "v1".into()),
            ]
        };
        let bob_form = form(&bob_csrf);
        let bob_fields: Vec<(&str, &str)> =
            bob_form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let res = app
            .post("/harbor/tags/delete")
            .header("cookie", &bob)
            .form(&bob_fields)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "guests of a public project delete nothing");
        let admin_form = form(&csrf);
        let fields: Vec<(&str, &str)> =
            admin_form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let res = app
            .post("/harbor/tags/delete")
            .header("cookie", &cookie)
            .form(&fields)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let res = app
            .get("/api/v2.0/projects/library/repositories/team%252Fweb/artifacts/v1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn portal_lists_are_paged_and_bad_forms_are_pages(app) {
        for i in 0..20 {
            fixtures::project(&app, None, &format!("p{i:02}"), false).await;
        }
        let cookie = sign_in_admin(&app).await;
        let page = app.get("/harbor/projects").header("cookie", &cookie).send().await.text();
        assert!(page.contains("Page 1 of 2 · 21 projects"), "{page}");
        assert!(page.contains(r#"href="/harbor/projects?name=&amp;public=&amp;page=2""#));
        let page = app
            .get("/harbor/projects?page=2")
            .header("cookie", &cookie)
            .send()
            .await
            .text();
        assert!(page.contains(r#"data-project="p19""#) && !page.contains(r#"data-project="library""#));
        let res = app
            .post("/harbor/tags/delete")
            .header("cookie", &cookie)
            .form(&[("csrf_token", "x")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(res.header("content-type").unwrap().starts_with("text/html"));
    }
);

backend_test!(
    async fn portal_project_admins_add_members(app) {
        fixtures::project(&app, None, "team", false).await;
        app.create_user("carol", "Carol-pass-1").await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let add = |name: &'static str, role: &'static str| {
            let cookie = cookie.clone();
            let csrf = csrf.clone();
            let app = &app;
            async move {
                app.post("/harbor/projects/team/members")
                    .header("cookie", &cookie)
                    .form(&[("csrf_token", csrf.as_str()), ("username", name), ("role_id", role)])
                    .send()
                    .await
            }
        };
        let res = add("carol", "2").await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(res.header("location"), Some("/harbor/projects/team/members?added=carol"));
        let page = app.get("/harbor/projects/team/members").header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"<tr data-member="carol"><td>carol</td><td>User</td><td class="role">developer</td>"#), "{page}");
        assert_eq!(add("carol", "3").await.status, StatusCode::CONFLICT);
        assert_eq!(add("nobody", "3").await.status, StatusCode::NOT_FOUND);
        assert_eq!(add("carol", "9").await.status, StatusCode::CONFLICT);
        // A developer sees the members but cannot add any.
        let carol = sign_in(&app, "carol", "Carol-pass-1").await;
        let page = app.get("/harbor/projects/team/members").header("cookie", &carol).send().await.text();
        assert!(page.contains(r#"data-member="carol""#) && !page.contains("add_member"));
        assert!(!page.contains("change-role") && !page.contains("remove-member"));
        let carol_csrf = csrf_for(&app, &carol).await;
        let res = app
            .post("/harbor/projects/team/members")
            .header("cookie", &carol)
            .form(&[("csrf_token", carol_csrf.as_str()), ("username", "admin"), ("role_id", "1")])
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
    }
);

backend_test!(
    async fn portal_unknown_pages_are_html_404s(app) {
        let cookie = sign_in_admin(&app).await;
        let res = app.get("/harbor/nowhere/at/all").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert!(res.header("content-type").unwrap().starts_with("text/html"));
        assert!(res.text().contains("There is no such page."));
        let res = app.get("/harbor/projects").header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::OK, "known pages still win");
    }
);

backend_test!(
    async fn portal_artifact_page_shows_layers_and_accessories_and_deletes(app) {
        let (image, digest) = push_image(&app, "library/app", "v1", &[b"layer one"]).await;
        let empty = b"{}".to_vec();
        push_blob(&app, "library/app", &empty).await;
        let payload = b"a cosign signature".to_vec();
        push_blob(&app, "library/app", &payload).await;
        let signature = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
            "config": descriptor("application/vnd.oci.empty.v1+json", &empty),
            "layers": [descriptor("application/vnd.dev.cosign.simplesigning.v1+json", &payload)],
            "subject": {"mediaType": OCI_MANIFEST, "digest": digest, "size": image.len()},
            "annotations": {"note": "<script>alert(1)</script>"},
        })
        .to_string()
        .into_bytes();
        let signature_digest = digest_of(&signature);
        let res = put_manifest(&app, "library/app", &signature_digest, OCI_MANIFEST, &signature).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());

        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let page = app
            .get("/harbor/projects/library/repositories/app")
            .header("cookie", &cookie)
            .send()
            .await
            .text();
        let link = format!("/harbor/projects/library/repositories/app/artifacts/sha256%3A{}", &digest[7..]);
        assert!(page.contains(&format!(r#"href="{link}""#)), "{page}");
        let res = app.get(&link).header("cookie", &cookie).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let page = res.text();
        assert!(page.contains(&format!(r#"data-layer="{}""#, digest_of(b"layer one"))), "{page}");
        assert!(page.contains(r#"<tr data-tag="v1">"#));
        assert!(page.contains(&format!(r#"data-accessory="{signature_digest}""#)));
        assert!(page.contains(r#"<td class="accessory-type">signature.cosign</td>"#));
        assert!(page.contains("&quot;schemaVersion&quot;: 2"), "pretty-printed and escaped");
        assert!(page.contains(r#"id="delete_artifact""#));
        // The signature's own page: its subject, its manifest escaped.
        let res = app
            .get(&format!("/harbor/projects/library/repositories/app/artifacts/{signature_digest}"))
            .header("cookie", &cookie)
            .send()
            .await;
        let page = res.text();
        assert!(page.contains(&format!("<code>{digest}</code></a>")), "{page}");
        assert!(!page.contains("<script>alert") && page.contains("&lt;script&gt;alert(1)"));
        let res = app
            .get(&format!("/harbor/projects/library/repositories/app/artifacts/sha256:{}", "0".repeat(64)))
            .header("cookie", &cookie)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert!(res.header("content-type").unwrap().starts_with("text/html"));

        // A guest of the public project sees the page without the button, and is refused.
        app.create_user("bob", "Bob-pass-1").await;
        let bob = sign_in(&app, "bob", "Bob-pass-1").await;
        let bob_csrf = csrf_for(&app, &bob).await;
        let page = app.get(&link).header("cookie", &bob).send().await.text();
        assert!(page.contains("data-layer") && !page.contains("delete_artifact"), "{page}");
        let fields = [("project", "library"), ("repository", "app"), ("digest", digest.as_str())];
        let res = post_form(&app, &bob, "/harbor/artifacts/delete", Some(&bob_csrf), &fields).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        // Without the CSRF token, even the administrator is refused.
        let res = post_form(&app, &cookie, "/harbor/artifacts/delete", None, &fields).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert!(res.text().contains("CSRF token invalid"));
        // An immutable tag protects it: 412, shown as a page.
        let rules = "/api/v2.0/projects/library/immutabletagrules";
        let rule = json!({
            "action": "immutable",
            "template": "immutable_template",
            "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "v*"}],
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "**"}]},
        });
        let res = app.post(rules).admin().json(&rule).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let location = res.header("location").unwrap().to_string();
        let res = post_form(&app, &cookie, "/harbor/artifacts/delete", Some(&csrf), &fields).await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        assert!(res.text().contains("immutable"), "{}", res.text());
        let res = app.delete(&location).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = post_form(&app, &cookie, "/harbor/artifacts/delete", Some(&csrf), &fields).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(
            res.header("location").map(str::to_string),
            Some(format!("/harbor/projects/library/repositories/app?removed={}", &digest[7..19]))
        );
        let res = app
            .get(&format!("/api/v2.0/projects/library/repositories/app/artifacts/{digest}"))
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn portal_index_page_links_its_children_which_are_not_deleted_while_referenced(app) {
        let (child, child_digest) = push_image(&app, "library/multi", "amd64", &[b"amd64 layer"]).await;
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{
                "mediaType": OCI_MANIFEST,
                "digest": child_digest,
                "size": child.len(),
                "platform": {"os": "linux", "architecture": "amd64"},
            }],
        })
        .to_string()
        .into_bytes();
        let res = put_manifest(&app, "library/multi", "v1", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let page = app
            .get(&format!("/harbor/projects/library/repositories/multi/artifacts/{}", digest_of(&index)))
            .header("cookie", &cookie)
            .send()
            .await
            .text();
        assert!(page.contains("<h2>Children (1)</h2>"), "{page}");
        assert!(page.contains("<td>linux/amd64</td>"));
        assert!(page.contains(&format!(
            r#"href="/harbor/projects/library/repositories/multi/artifacts/sha256%3A{}""#,
            &child_digest[7..]
        )));
        let fields = [("project", "library"), ("repository", "multi"), ("digest", child_digest.as_str())];
        let res = post_form(&app, &cookie, "/harbor/artifacts/delete", Some(&csrf), &fields).await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert!(res.header("content-type").unwrap().starts_with("text/html"));
    }
);

backend_test!(
    async fn portal_project_admins_change_roles_and_remove_members(app) {
        let team = fixtures::project(&app, None, "team", false).await;
        let carol_id = app.create_user("carol", "Carol-pass-1").await;
        let dave_id = app.create_user("dave", "Dave-pass-1").await;
        let carol_member = fixtures::member(&app, team, carol_id, 2).await;
        fixtures::member(&app, team, dave_id, 2).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let page = app.get("/harbor/projects/team/members").header("cookie", &cookie).send().await.text();
        let role_path = format!("/harbor/projects/team/members/{carol_member}/role");
        let delete_path = format!("/harbor/projects/team/members/{carol_member}/delete");
        assert!(page.contains(&format!(r#"action="{role_path}""#)), "{page}");
        assert!(page.contains(&format!(r#"action="{delete_path}""#)));
        assert!(
            page.contains(r#"<tr data-member="admin"><td>admin</td><td>User</td><td class="role">projectAdmin</td><td class="actions muted">you</td></tr>"#),
            "no controls on one's own row: {page}"
        );

        // A developer may not change roles: no controls, and the server refuses.
        let dave = sign_in(&app, "dave", "Dave-pass-1").await;
        let dave_csrf = csrf_for(&app, &dave).await;
        let page = app.get("/harbor/projects/team/members").header("cookie", &dave).send().await.text();
        assert!(page.contains(r#"data-member="carol""#) && !page.contains("change-role"));
        let res = post_form(&app, &dave, &role_path, Some(&dave_csrf), &[("role_id", "1")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = post_form(&app, &dave, &delete_path, Some(&dave_csrf), &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        // Without the CSRF token, not even the administrator.
        let res = post_form(&app, &cookie, &role_path, None, &[("role_id", "1")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert!(res.text().contains("CSRF token invalid"));
        let res = post_form(&app, &cookie, &delete_path, None, &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let member_url = format!("/api/v2.0/projects/{team}/members/{carol_member}");
        let res = app.get(&member_url).admin().send().await;
        assert_eq!(res.json()["role_id"], 2, "unchanged");

        // The role, changed; a role that does not exist is a 400 page.
        let res = post_form(&app, &cookie, &role_path, Some(&csrf), &[("role_id", "4")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(res.header("location"), Some("/harbor/projects/team/members?updated=carol"));
        assert_eq!(app.get(&member_url).admin().send().await.json()["role_name"], "maintainer");
        let res = post_form(&app, &cookie, &role_path, Some(&csrf), &[("role_id", "9")]).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert!(res.header("content-type").unwrap().starts_with("text/html"));
        let page = app
            .get("/harbor/projects/team/members?updated=carol")
            .header("cookie", &cookie)
            .send()
            .await
            .text();
        assert!(page.contains(r#"<td class="role">maintainer</td>"#), "{page}");
        assert!(page.contains("The role of carol was changed."));

        // Removed; removing again is a 404 page.
        let res = post_form(&app, &cookie, &delete_path, Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(app.get(&member_url).admin().send().await.status, StatusCode::NOT_FOUND);
        let res = post_form(&app, &cookie, &delete_path, Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = post_form(&app, &cookie, "/harbor/projects/team/members/x/delete", Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn portal_project_labels_are_created_and_deleted(app) {
        let team = fixtures::project(&app, None, "team", false).await;
        let other = fixtures::project(&app, None, "other", false).await;
        let dave_id = app.create_user("dave", "Dave-pass-1").await;
        fixtures::member(&app, team, dave_id, 2).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let create = |name: &'static str| {
            let (app, cookie, csrf) = (&app, cookie.clone(), csrf.clone());
            async move {
                post_form(
                    app,
                    &cookie,
                    "/harbor/projects/team/labels",
                    Some(&csrf),
                    &[("name", name), ("description", "needs <review>"), ("color", "#ff0000")],
                )
                .await
            }
        };
        let res = create("<b>urgent</b>").await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        assert_eq!(create("<b>urgent</b>").await.status, StatusCode::CONFLICT);
        assert_eq!(create("   ").await.status, StatusCode::BAD_REQUEST);
        let res = app.get(&format!("/api/v2.0/labels?scope=p&project_id={team}")).admin().send().await;
        let labels = res.json();
        assert_eq!(labels[0]["name"], "<b>urgent</b>");
        assert_eq!(labels[0]["color"], "#ff0000");
        let id = labels[0]["id"].as_i64().unwrap();
        let page = app.get("/harbor/projects/team/labels").header("cookie", &cookie).send().await.text();
        assert!(page.contains("&lt;b&gt;urgent&lt;/b&gt;") && !page.contains("<b>urgent"), "{page}");
        assert!(page.contains("needs &lt;review&gt;"));
        let delete_path = format!("/harbor/projects/team/labels/{id}/delete");
        assert!(page.contains(&format!(r#"action="{delete_path}""#)));

        // A developer sees the labels but neither form, and is refused.
        let dave = sign_in(&app, "dave", "Dave-pass-1").await;
        let dave_csrf = csrf_for(&app, &dave).await;
        let page = app.get("/harbor/projects/team/labels").header("cookie", &dave).send().await.text();
        assert!(page.contains("urgent") && !page.contains("delete-label") && !page.contains("create_label"));
        let res = post_form(&app, &dave, "/harbor/projects/team/labels", Some(&dave_csrf), &[("name", "mine")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = post_form(&app, &dave, &delete_path, Some(&dave_csrf), &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        // No CSRF token, no change.
        let res = post_form(&app, &cookie, "/harbor/projects/team/labels", None, &[("name", "x")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = post_form(&app, &cookie, &delete_path, None, &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        // Another project's path does not reach this label.
        let res = post_form(&app, &cookie, &format!("/harbor/projects/other/labels/{id}/delete"), Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let _ = other;

        let res = post_form(&app, &cookie, &delete_path, Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let res = app.get(&format!("/api/v2.0/labels/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn portal_project_configuration_and_summary(app) {
        let team = fixtures::project(&app, None, "team", false).await;
        let dave_id = app.create_user("dave", "Dave-pass-1").await;
        fixtures::member(&app, team, dave_id, 2).await;
        push_image(&app, "team/app", "v1", &[b"layer"]).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let path = "/harbor/projects/team/configuration";
        let page = app.get(path).header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"id="setting_public" value="true">"#), "unchecked: {page}");
        assert!(page.contains("save_project_configuration"));

        // The scanner's settings, as a Harbor client sets them.
        for (key, value) in [("auto_scan", "true"), ("severity", "high")] {
            let res = app
                .post("/api/v2.0/projects/team/metadatas")
                .admin()
                .json(&serde_json::json!({key: value}))
                .send()
                .await;
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        }
        let res = post_form(
            &app,
            &cookie,
            path,
            Some(&csrf),
            &[("public", "true"), ("enable_content_trust_cosign", "true"), ("enable_content_trust", "true"), ("severity", "low")],
        )
        .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let metadata = app.get("/api/v2.0/projects/team").admin().send().await.json()["metadata"].clone();
        assert_eq!(metadata["public"], "true");
        assert_eq!(metadata["enable_content_trust_cosign"], "true");
        assert_eq!(metadata["enable_content_trust"], "true");
        assert_eq!(metadata["auto_scan"], "true", "the portal does not offer, nor change, scanner settings");
        assert_eq!(metadata["severity"], "high");
        let page = app.get(path).header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"id="setting_public" value="true" checked>"#), "{page}");
        assert!(page.contains(r#"id="setting_auto_scan" value="true" checked disabled>"#), "{page}");
        assert!(page.contains("No scanner is configured"), "{page}");
        assert!(page.contains(r#"<option value="high" selected>"#));
        // Unchecked again: private.
        let res = post_form(&app, &cookie, path, Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        let res = app.get("/api/v2.0/projects/team").admin().send().await;
        assert_eq!(res.json()["metadata"]["public"], "false");
        assert_eq!(res.json()["metadata"]["enable_content_trust"], "false");

        // A developer reads the settings, cannot change them.
        let dave = sign_in(&app, "dave", "Dave-pass-1").await;
        let dave_csrf = csrf_for(&app, &dave).await;
        let page = app.get(path).header("cookie", &dave).send().await.text();
        assert!(page.contains(r#"id="setting_public" value="true" disabled>"#), "{page}");
        assert!(!page.contains("save_project_configuration"));
        let res = post_form(&app, &dave, path, Some(&dave_csrf), &[("public", "true")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = post_form(&app, &cookie, path, None, &[("public", "true")]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/projects/team").admin().send().await;
        assert_eq!(res.json()["metadata"]["public"], "false", "unchanged");

        // The summary: repositories, members by role, the quota.
        let page = app.get("/harbor/projects/team/summary").header("cookie", &dave).send().await.text();
        assert!(page.contains(r#"<dd id="summary_repositories">1</dd>"#), "{page}");
        assert!(page.contains(r#"<dd id="summary_members">2 (1 projectAdmin, 1 developer)</dd>"#), "{page}");
        assert!(page.contains(r#"<dd id="summary_quota">"#) && page.contains("of unlimited"), "{page}");
        assert!(page.contains(r#"id="tab_summary" aria-current="page""#));
        app.create_user("erin", "Erin-pass-1").await;
        let erin = sign_in(&app, "erin", "Erin-pass-1").await;
        let res = app.get("/harbor/projects/team/summary").header("cookie", &erin).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "a private project");
    }
);

backend_test!(
    /// `banner_message` is shown on every portal page while it is current,
    /// escaped, in Harbor's JSON form or as plain text.
    async fn the_configured_banner_is_shown(app) {
        let cookie = sign_in_admin(&app).await;
        let page = app.get("/harbor/projects").header("cookie", &cookie).send().await.text();
        assert!(!page.contains("banner_message"), "no banner configured");
        let banner = r#"{"closable":true,"message":"Read-only <tonight>","type":"warning","fromDate":"01/01/2020","toDate":"12/31/2099"}"#;
        let res = app.put("/api/v2.0/configurations").admin().json(&serde_json::json!({"banner_message": banner})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let page = app.get("/harbor/projects").header("cookie", &cookie).send().await.text();
        assert!(
            page.contains(r#"<div class="banner banner-warning" id="banner_message" role="status">Read-only &lt;tonight&gt;</div>"#),
            "{page}"
        );
        let past = r#"{"message":"Over","type":"info","fromDate":"01/01/2020","toDate":"01/02/2020"}"#;
        app.put("/api/v2.0/configurations").admin().json(&serde_json::json!({"banner_message": past})).send().await;
        let page = app.get("/harbor/projects").header("cookie", &cookie).send().await.text();
        assert!(!page.contains("banner_message"), "an ended banner is not shown");
    }
);

backend_test!(
    async fn portal_policy_tab_adds_rules_runs_them_and_shows_the_runs(app) {
        for n in 1..=3 {
            push_image(&app, "library/app", &format!("v{n}"), &[format!("layer {n}").as_bytes()]).await;
        }
        let guest = app.create_user("gus", "Gus-pass-1").await;
        fixtures::member(&app, 1, guest, 3).await;
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let page = app.get("/harbor/projects/library/policy").header("cookie", &cookie).send().await.text();
        assert!(page.contains("No rules") && page.contains(r#"id="tab_policy""#), "{page}");
        let rule = [("template", "latestPushedK"), ("count", "1"), ("tags", "**"), ("repositories", "app")];
        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/rules", Some(&csrf), &rule).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let bad = [("template", "latestPushedK"), ("count", "-3"), ("tags", "**"), ("repositories", "**")];
        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/rules", Some(&csrf), &bad).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/schedule", Some(&csrf), &[("cron", "0 0 2 * * *")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let page = app.get("/harbor/projects/library/policy").header("cookie", &cookie).send().await.text();
        assert!(page.contains("retain the most recently pushed 1 artifacts"), "{page}");
        assert!(page.contains(r#"value="0 0 2 * * *""#), "{page}");

        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/run", Some(&csrf), &[("dry_run", "true")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let page = app.get("/harbor/projects/library/policy").header("cookie", &cookie).send().await.text();
        assert!(page.contains("dry run") && page.contains("1 of 3 kept"), "{page}");
        let log_path = page.split("href=\"").find(|s| s.contains("/log\"")).unwrap().split('"').next().unwrap().to_string();
        let log = app.get(&log_path).header("cookie", &cookie).send().await;
        assert!(log.header("content-type").unwrap().starts_with("text/plain"));
        assert!(log.text().contains("| DEL |"), "{}", log.text());
        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/run", Some(&csrf), &[("dry_run", "false")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let tags = app.get("/v2/library/app/tags/list").admin().send().await.json();
        assert_eq!(tags["tags"], json!(["v3"]));

        // A guest does not see the tab, nor change the policy.
        let gus = sign_in(&app, "gus", "Gus-pass-1").await;
        let gus_csrf = csrf_for(&app, &gus).await;
        let page = app.get("/harbor/projects/library").header("cookie", &gus).send().await.text();
        assert!(!page.contains("tab_policy"), "{page}");
        let res = app.get("/harbor/projects/library/policy").header("cookie", &gus).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = post_form(&app, &gus, "/harbor/projects/library/policy/rules/0/delete", Some(&gus_csrf), &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/rules/0/delete", None, &[]).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "no CSRF token, no change");
        let res = post_form(&app, &cookie, "/harbor/projects/library/policy/rules/0/delete", Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER);
        let page = app.get("/harbor/projects/library/policy").header("cookie", &cookie).send().await.text();
        assert!(page.contains("No rules"), "{page}");
    }
);

backend_test!(
    async fn portal_system_page_schedules_gc_and_purges_and_pauses_queues(app) {
        let cookie = sign_in_admin(&app).await;
        let csrf = csrf_for(&app, &cookie).await;
        let res = post_form(&app, &cookie, "/harbor/system/gc/schedule", Some(&csrf), &[("kind", "Daily"), ("cron", "")]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let res = post_form(&app, &cookie, "/harbor/system/gc/schedule", Some(&csrf), &[("kind", "Custom"), ("cron", "")]).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let purge = [("hours", "24"), ("types", "pull_artifact,other"), ("dry_run", "true")];
        let res = post_form(&app, &cookie, "/harbor/system/purge", Some(&csrf), &purge).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let res = post_form(&app, &cookie, "/harbor/system/purge", Some(&csrf), &[("hours", "soon"), ("types", "other")]).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let schedule = [("kind", "Weekly"), ("cron", ""), ("hours", "720"), ("types", "pull_artifact")];
        let res = post_form(&app, &cookie, "/harbor/system/purge/schedule", Some(&csrf), &schedule).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        let res = post_form(&app, &cookie, "/harbor/system/queues/RETENTION/pause", Some(&csrf), &[]).await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.text());
        berth::workers::run_due(&app.state, "test").await.unwrap();
        let page = app.get("/harbor/system").header("cookie", &cookie).send().await.text();
        assert!(page.contains(r#"<option value="Daily" selected>"#), "the GC schedule: {page}");
        assert!(page.contains(r#"<option value="Weekly" selected>"#), "the purge schedule");
        assert!(page.contains("24 h, pull_artifact,other, dry run") && page.contains("Success"), "{page}");
        assert!(page.contains(r#"<tr data-queue="RETENTION"><td>RETENTION</td><td>0</td><td>0 s</td><td class="status">paused</td>"#), "{page}");
        app.create_user("dave", "Dave-pass-1").await;
        let dave = sign_in(&app, "dave", "Dave-pass-1").await;
        let dave_csrf = csrf_for(&app, &dave).await;
        let res = post_form(&app, &dave, "/harbor/system/purge", Some(&dave_csrf), &purge).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
    }
);
