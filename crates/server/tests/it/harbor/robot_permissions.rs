//! Every permission a robot account can be given, from Harbor's own list
//! (`GET /permissions`): a robot granted only that permission may do the
//! operations Harbor guards with it, and is refused others.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{id_from_location, project};
use crate::registry::push_image;
use crate::util::{TestApp, TestResponse};

/// Permissions of Harbor's list for features Berth does not serve (scanning,
/// preheating, the security hub, CVE export): a robot may be given them, and
/// nothing answers to them.
const UNSERVED: &[&str] = &[
    "preheat-instance",
    "preheat-policy",
    "scan-all",
    "scan",
    "sbom",
    "scanner",
    "security-hub",
    "export-cve",
];

/// One operation, as a robot calls it.
#[derive(Debug, Clone)]
enum Probe {
    /// A call whose permission check passes when it answers neither 401 nor 403.
    Call(Method, String, Option<Value>),
    /// A list the permission widens: it passes when the list is not empty.
    Sees(String),
}

fn call(method: Method, path: &str) -> Probe {
    Probe::Call(method, path.to_string(), None)
}

fn with(method: Method, path: &str, body: Value) -> Probe {
    Probe::Call(method, path.to_string(), Some(body))
}

/// What the operations refer to: a private project `p` (robots of the
/// project level are of it) with an image, a public one to copy from, and
/// objects looked up before their permission is checked.
struct Setup {
    pid: i64,
    label: i64,
    project_label: i64,
    robot: i64,
    system_robot: i64,
    retention: i64,
}

/// A robot holding `access` of `kind` (`system` or `project` `p`); its
/// login and secret.
async fn robot(app: &TestApp, name: &str, kind: &str, access: Value) -> (String, String) {
    let (level, namespace) = match kind {
        "system" => ("system", "/"),
        _ => ("project", "p"),
    };
    let body = json!({
        "name": name, "level": level, "duration": -1,
        "permissions": [{"kind": kind, "namespace": namespace, "access": access}],
    });
    let res = app
        .post("/api/v2.0/robots")
        .admin()
        .json(&body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{body}: {}", res.text());
    let body = res.json();
    (
        body["name"].as_str().unwrap().to_string(),
        body["secret"].as_str().unwrap().to_string(),
    )
}

/// A permission nobody lacks: robots made to be acted on hold only a deny.
fn harmless() -> Value {
    json!([{"resource": "repository", "action": "pull", "effect": "deny"}])
}

async fn created(res: TestResponse) -> i64 {
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    id_from_location(&res)
}

/// Makes again, as admin, whatever an allowed delete took away.
async fn restore(app: &TestApp, setup: &mut Setup, n: usize) {
    let gone = |path: String| async move {
        app.get(&path).admin().send().await.status == StatusCode::NOT_FOUND
    };
    if gone(format!("/api/v2.0/labels/{}", setup.label)).await {
        let body = json!({"name": format!("global-{n}"), "scope": "g"});
        setup.label = created(
            app.post("/api/v2.0/labels")
                .admin()
                .json(&body)
                .send()
                .await,
        )
        .await;
    }
    if gone(format!("/api/v2.0/labels/{}", setup.project_label)).await {
        let body = json!({"name": format!("local-{n}"), "scope": "p", "project_id": setup.pid});
        setup.project_label = created(
            app.post("/api/v2.0/labels")
                .admin()
                .json(&body)
                .send()
                .await,
        )
        .await;
    }
    if gone(format!("/api/v2.0/robots/{}", setup.robot)).await {
        let body = json!({
            "name": format!("target-{n}"), "level": "project", "duration": -1,
            "permissions": [{"kind": "project", "namespace": "p", "access": harmless()}],
        });
        setup.robot = created(
            app.post("/api/v2.0/robots")
                .admin()
                .json(&body)
                .send()
                .await,
        )
        .await;
    }
    if gone(format!("/api/v2.0/robots/{}", setup.system_robot)).await {
        let body = json!({
            "name": format!("system-target-{n}"), "level": "system", "duration": -1,
            "permissions": [{"kind": "system", "namespace": "/", "access": harmless()}],
        });
        setup.system_robot = created(
            app.post("/api/v2.0/robots")
                .admin()
                .json(&body)
                .send()
                .await,
        )
        .await;
    }
    if gone(format!("/api/v2.0/retentions/{}", setup.retention)).await {
        let body = json!({
            "algorithm": "or",
            "rules": [{
                "disabled": false, "action": "retain", "template": "always", "params": {},
                "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "**"}],
                "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "**"}]},
            }],
            "trigger": {"kind": "Schedule", "settings": {"cron": ""}, "references": {}},
            "scope": {"level": "project", "ref": setup.pid},
        });
        setup.retention = created(
            app.post("/api/v2.0/retentions")
                .admin()
                .json(&body)
                .send()
                .await,
        )
        .await;
    }
}

/// The operations Harbor guards with system permission `resource` `action`.
fn system_probes(resource: &str, action: &str, s: &Setup, n: usize) -> Vec<Probe> {
    use Method as M;
    let (label, system_robot) = (s.label, s.system_robot);
    let system_robot_body = json!({
        "name": format!("made-{n}"), "level": "system", "duration": -1,
        "permissions": [{"kind": "system", "namespace": "/", "access": harmless()}],
    });
    let none = json!({"schedule": {"type": "None"}});
    match (resource, action) {
        ("audit-log", "list") => vec![
            Probe::Sees("/api/v2.0/audit-logs".into()),
            Probe::Sees("/api/v2.0/auditlog-exts".into()),
        ],
        ("project", "list") => vec![Probe::Sees("/api/v2.0/projects?public=false".into())],
        ("project", "create") => vec![with(
            M::POST,
            "/api/v2.0/projects",
            json!({"project_name": format!("made-{n}")}),
        )],
        ("replication-policy", "read") => vec![call(M::GET, "/api/v2.0/replication/policies/999")],
        ("replication-policy", "create") => {
            vec![with(M::POST, "/api/v2.0/replication/policies", json!({}))]
        }
        ("replication-policy", "delete") => {
            vec![call(M::DELETE, "/api/v2.0/replication/policies/999")]
        }
        ("replication-policy", "list") => vec![call(M::GET, "/api/v2.0/replication/policies")],
        ("replication-policy", "update") => vec![with(
            M::PUT,
            "/api/v2.0/replication/policies/999",
            json!({}),
        )],
        ("replication", "read") => vec![
            call(M::GET, "/api/v2.0/replication/executions/999"),
            call(M::GET, "/api/v2.0/replication/executions/999/tasks/1/log"),
        ],
        ("replication", "create") => vec![
            with(
                M::POST,
                "/api/v2.0/replication/executions",
                json!({"policy_id": 999}),
            ),
            with(M::PUT, "/api/v2.0/replication/executions/999", json!({})),
        ],
        ("replication", "list") => vec![
            call(M::GET, "/api/v2.0/replication/executions"),
            call(M::GET, "/api/v2.0/replication/executions/999/tasks"),
        ],
        ("replication-adapter", "list") => vec![
            call(M::GET, "/api/v2.0/replication/adapters"),
            call(M::GET, "/api/v2.0/replication/adapterinfos"),
        ],
        ("registry", "read") => vec![
            call(M::GET, "/api/v2.0/registries/999"),
            call(M::GET, "/api/v2.0/registries/999/info"),
        ],
        ("registry", "create") => vec![with(M::POST, "/api/v2.0/registries", json!({}))],
        ("registry", "delete") => vec![call(M::DELETE, "/api/v2.0/registries/999")],
        ("registry", "list") => vec![call(M::GET, "/api/v2.0/registries")],
        ("registry", "update") => vec![with(M::PUT, "/api/v2.0/registries/999", json!({}))],
        ("system-volumes", "read") => vec![call(M::GET, "/api/v2.0/systeminfo/volumes")],
        ("garbage-collection", "read") => vec![
            call(M::GET, "/api/v2.0/system/gc/schedule"),
            call(M::GET, "/api/v2.0/system/gc/999"),
            call(M::GET, "/api/v2.0/system/gc/999/log"),
        ],
        ("garbage-collection", "create") => {
            vec![with(M::POST, "/api/v2.0/system/gc/schedule", none)]
        }
        ("garbage-collection", "list") => vec![call(M::GET, "/api/v2.0/system/gc")],
        ("garbage-collection", "update") => {
            vec![with(M::PUT, "/api/v2.0/system/gc/schedule", none)]
        }
        ("garbage-collection", "stop") => vec![call(M::PUT, "/api/v2.0/system/gc/999")],
        ("purge-audit", "read") => vec![
            call(M::GET, "/api/v2.0/system/purgeaudit/schedule"),
            call(M::GET, "/api/v2.0/system/purgeaudit/999"),
            call(M::GET, "/api/v2.0/system/purgeaudit/999/log"),
        ],
        ("purge-audit", "create") => {
            vec![with(M::POST, "/api/v2.0/system/purgeaudit/schedule", none)]
        }
        ("purge-audit", "list") => vec![call(M::GET, "/api/v2.0/system/purgeaudit")],
        ("purge-audit", "update") => {
            vec![with(M::PUT, "/api/v2.0/system/purgeaudit/schedule", none)]
        }
        ("purge-audit", "stop") => vec![call(M::PUT, "/api/v2.0/system/purgeaudit/999")],
        ("jobservice-monitor", "list") => vec![
            call(M::GET, "/api/v2.0/jobservice/pools"),
            call(M::GET, "/api/v2.0/jobservice/pools/none/workers"),
            call(M::GET, "/api/v2.0/jobservice/queues"),
            call(M::GET, "/api/v2.0/jobservice/jobs/none/log"),
            call(M::GET, "/api/v2.0/schedules"),
        ],
        ("jobservice-monitor", "stop") => vec![
            call(M::PUT, "/api/v2.0/jobservice/jobs/none"),
            with(
                M::PUT,
                "/api/v2.0/jobservice/queues/NONE",
                json!({"action": "stop"}),
            ),
        ],
        // Reading global labels is open to every caller in Berth.
        ("label", "read") => vec![call(M::GET, &format!("/api/v2.0/labels/{label}"))],
        ("label", "create") => vec![with(
            M::POST,
            "/api/v2.0/labels",
            json!({"name": format!("g-{n}"), "scope": "g"}),
        )],
        ("label", "delete") => vec![call(M::DELETE, &format!("/api/v2.0/labels/{label}"))],
        ("label", "update") => vec![with(
            M::PUT,
            &format!("/api/v2.0/labels/{label}"),
            json!({"description": "changed"}),
        )],
        ("catalog", "read") => vec![call(M::GET, "/v2/_catalog")],
        ("quota", "read") => vec![call(M::GET, "/api/v2.0/quotas/999")],
        ("quota", "list") => vec![call(M::GET, "/api/v2.0/quotas")],
        ("quota", "update") => vec![with(
            M::PUT,
            "/api/v2.0/quotas/999",
            json!({"hard": {"storage": 1}}),
        )],
        ("robot", "create") => vec![with(M::POST, "/api/v2.0/robots", system_robot_body)],
        ("robot", "read") => vec![call(M::GET, &format!("/api/v2.0/robots/{system_robot}"))],
        ("robot", "list") => vec![call(M::GET, "/api/v2.0/robots")],
        ("robot", "delete") => vec![call(M::DELETE, &format!("/api/v2.0/robots/{system_robot}"))],
        ("user", "create") => vec![with(
            M::POST,
            "/api/v2.0/users",
            json!({"username": format!("made{n}"), "email": format!("made{n}@berth.test"), "realname": "Made", "password": "Made-Passw0rd"}),
        )],
        ("user", "read") => vec![call(M::GET, "/api/v2.0/users/999")],
        ("user", "update") => vec![
            with(
                M::PUT,
                "/api/v2.0/users/999",
                json!({"email": "x@berth.test", "realname": "x"}),
            ),
            with(
                M::PUT,
                "/api/v2.0/users/999/password",
                json!({"new_password": "New-Passw0rd"}),
            ),
            with(
                M::PUT,
                "/api/v2.0/users/999/sysadmin",
                json!({"sysadmin_flag": false}),
            ),
        ],
        ("user", "list") => vec![call(M::GET, "/api/v2.0/users")],
        ("user", "delete") => vec![call(M::DELETE, "/api/v2.0/users/999")],
        ("ldap-user", "create") => vec![with(
            M::POST,
            "/api/v2.0/ldap/users/import",
            json!({"ldap_uid_list": ["nobody"]}),
        )],
        ("ldap-user", "list") => vec![
            call(M::GET, "/api/v2.0/ldap/users/search?username=nobody"),
            call(M::GET, "/api/v2.0/ldap/groups/search?groupname=nobody"),
        ],
        ("user-group", "create") => vec![with(M::POST, "/api/v2.0/usergroups", json!({}))],
        ("user-group", "read") => vec![call(M::GET, "/api/v2.0/usergroups/999")],
        ("user-group", "update") => vec![with(
            M::PUT,
            "/api/v2.0/usergroups/999",
            json!({"group_name": "x"}),
        )],
        ("user-group", "list") => vec![call(M::GET, "/api/v2.0/usergroups")],
        ("user-group", "delete") => vec![call(M::DELETE, "/api/v2.0/usergroups/999")],
        (resource, action) => panic!("no operation for system {resource}:{action}"),
    }
}

/// The operations Harbor guards with project permission `resource` `action`
/// (in project `p`, whose image is `p/app:v1`).
fn project_probes(resource: &str, action: &str, s: &Setup, n: usize) -> Vec<Probe> {
    use Method as M;
    let (pid, project_label, robot, retention) = (s.pid, s.project_label, s.robot, s.retention);
    let artifact = "/api/v2.0/projects/p/repositories/app/artifacts/v1";
    let project_robot_body = json!({
        "name": format!("made-{n}"), "level": "project", "duration": -1,
        "permissions": [{"kind": "project", "namespace": "p", "access": harmless()}],
    });
    match (resource, action) {
        ("log", "list") => vec![
            call(M::GET, "/api/v2.0/projects/p/logs"),
            call(M::GET, "/api/v2.0/projects/p/auditlog-exts"),
        ],
        ("project", "read") => vec![
            call(M::GET, "/api/v2.0/projects/p"),
            call(M::GET, "/api/v2.0/projects/p/summary"),
        ],
        ("project", "delete") => vec![call(M::GET, "/api/v2.0/projects/p/_deletable")],
        ("project", "update") => vec![with(M::PUT, "/api/v2.0/projects/p", json!({}))],
        ("metadata", "read") => vec![call(M::GET, "/api/v2.0/projects/p/metadatas/public")],
        ("metadata", "create") => vec![with(
            M::POST,
            "/api/v2.0/projects/p/metadatas",
            json!({"auto_scan": "false"}),
        )],
        ("metadata", "delete") => vec![call(M::DELETE, "/api/v2.0/projects/p/metadatas/severity")],
        ("metadata", "list") => vec![call(M::GET, "/api/v2.0/projects/p/metadatas")],
        ("metadata", "update") => vec![with(
            M::PUT,
            "/api/v2.0/projects/p/metadatas/auto_scan",
            json!({"auto_scan": "false"}),
        )],
        ("repository", "read") => vec![call(M::GET, "/api/v2.0/projects/p/repositories/app")],
        ("repository", "update") => vec![with(
            M::PUT,
            "/api/v2.0/projects/p/repositories/app",
            json!({"description": "d"}),
        )],
        ("repository", "delete") => {
            vec![call(M::DELETE, "/api/v2.0/projects/p/repositories/nothere")]
        }
        ("repository", "list") => vec![call(M::GET, "/api/v2.0/projects/p/repositories")],
        ("repository", "pull") => vec![call(M::GET, "/v2/p/app/tags/list")],
        ("repository", "push") => vec![call(M::POST, "/v2/p/app/blobs/uploads/")],
        ("artifact", "read") => vec![call(M::GET, artifact)],
        // The source is public: its artifacts are readable by anyone.
        ("artifact", "create") => vec![call(
            M::POST,
            "/api/v2.0/projects/p/repositories/copies/artifacts?from=pub/src:v1",
        )],
        ("artifact", "list") => vec![call(
            M::GET,
            "/api/v2.0/projects/p/repositories/app/artifacts",
        )],
        ("artifact", "delete") => vec![call(
            M::DELETE,
            "/api/v2.0/projects/p/repositories/app/artifacts/nothere",
        )],
        ("tag", "create") => vec![with(
            M::POST,
            &format!("{artifact}/tags"),
            json!({"name": format!("t{n}")}),
        )],
        ("tag", "list") => vec![call(M::GET, &format!("{artifact}/tags"))],
        ("tag", "delete") => vec![call(M::DELETE, &format!("{artifact}/tags/nothere"))],
        ("accessory", "list") => vec![call(M::GET, &format!("{artifact}/accessories"))],
        ("artifact-addition", "read") => vec![
            call(M::GET, &format!("{artifact}/additions/vulnerabilities")),
            call(M::GET, &format!("{artifact}/additions/build_history")),
        ],
        ("artifact-label", "create") => vec![with(
            M::POST,
            &format!("{artifact}/labels"),
            json!({"id": project_label}),
        )],
        ("artifact-label", "delete") => vec![call(M::DELETE, &format!("{artifact}/labels/999"))],
        ("immutable-tag", "create") => vec![with(
            M::POST,
            "/api/v2.0/projects/p/immutabletagrules",
            json!({}),
        )],
        ("immutable-tag", "delete") => vec![call(
            M::DELETE,
            "/api/v2.0/projects/p/immutabletagrules/999",
        )],
        ("immutable-tag", "list") => vec![call(M::GET, "/api/v2.0/projects/p/immutabletagrules")],
        ("immutable-tag", "update") => vec![with(
            M::PUT,
            "/api/v2.0/projects/p/immutabletagrules/999",
            json!({}),
        )],
        ("notification-policy", "read") => vec![
            call(M::GET, "/api/v2.0/projects/p/webhook/policies/999"),
            call(M::GET, "/api/v2.0/projects/p/webhook/events"),
            call(M::GET, "/api/v2.0/projects/p/webhook/lasttrigger"),
        ],
        ("notification-policy", "create") => vec![with(
            M::POST,
            "/api/v2.0/projects/p/webhook/policies",
            json!({}),
        )],
        ("notification-policy", "delete") => {
            vec![call(M::DELETE, "/api/v2.0/projects/p/webhook/policies/999")]
        }
        ("notification-policy", "list") => vec![
            call(M::GET, "/api/v2.0/projects/p/webhook/policies"),
            call(M::GET, "/api/v2.0/projects/p/webhook/jobs?policy_id=999"),
        ],
        ("notification-policy", "update") => vec![with(
            M::PUT,
            "/api/v2.0/projects/p/webhook/policies/999",
            json!({}),
        )],
        ("tag-retention", "read") => {
            vec![call(M::GET, &format!("/api/v2.0/retentions/{retention}"))]
        }
        ("tag-retention", "create") => vec![with(
            M::POST,
            "/api/v2.0/retentions",
            json!({"algorithm": "or", "rules": [], "trigger": {"kind": "Schedule", "settings": {"cron": ""}}, "scope": {"level": "project", "ref": pid}}),
        )],
        ("tag-retention", "delete") => vec![call(
            M::DELETE,
            &format!("/api/v2.0/retentions/{retention}"),
        )],
        ("tag-retention", "list") => vec![call(
            M::GET,
            &format!("/api/v2.0/retentions/{retention}/executions"),
        )],
        ("tag-retention", "update") => vec![with(
            M::POST,
            &format!("/api/v2.0/retentions/{retention}/executions"),
            json!({"dry_run": true}),
        )],
        ("label", "read") => vec![call(M::GET, &format!("/api/v2.0/labels/{project_label}"))],
        ("label", "create") => vec![with(
            M::POST,
            "/api/v2.0/labels",
            json!({"name": format!("l-{n}"), "scope": "p", "project_id": pid}),
        )],
        ("label", "delete") => vec![call(
            M::DELETE,
            &format!("/api/v2.0/labels/{project_label}"),
        )],
        ("label", "list") => vec![call(
            M::GET,
            &format!("/api/v2.0/labels?scope=p&project_id={pid}"),
        )],
        ("label", "update") => vec![with(
            M::PUT,
            &format!("/api/v2.0/labels/{project_label}"),
            json!({"description": "changed"}),
        )],
        ("quota", "read") => vec![Probe::Sees("/api/v2.0/projects/p/summary".into())],
        ("robot", "create") => vec![with(M::POST, "/api/v2.0/robots", project_robot_body)],
        ("robot", "read") => vec![call(M::GET, &format!("/api/v2.0/robots/{robot}"))],
        ("robot", "list") => vec![call(
            M::GET,
            &format!("/api/v2.0/robots?q=Level%3Dproject,ProjectID%3D{pid}"),
        )],
        ("robot", "delete") => vec![call(M::DELETE, &format!("/api/v2.0/robots/{robot}"))],
        ("member", "create") => vec![with(
            M::POST,
            "/api/v2.0/projects/p/members",
            json!({"role_id": 3, "member_user": {"username": "nobody"}}),
        )],
        ("member", "read") => vec![call(M::GET, "/api/v2.0/projects/p/members/999")],
        ("member", "update") => vec![with(
            M::PUT,
            "/api/v2.0/projects/p/members/999",
            json!({"role_id": 3}),
        )],
        ("member", "list") => vec![call(M::GET, "/api/v2.0/projects/p/members")],
        ("member", "delete") => vec![call(M::DELETE, "/api/v2.0/projects/p/members/999")],
        (resource, action) => panic!("no operation for project {resource}:{action}"),
    }
}

/// Whether `probe`, sent with Basic `login`/`secret`, got past its
/// permission check; the answer, to show when it did not do as expected.
async fn passes(app: &TestApp, login: &str, secret: &str, probe: &Probe) -> (bool, String) {
    match probe {
        Probe::Call(method, path, body) => {
            let mut req = app.request(method.clone(), path).basic(login, secret);
            if let Some(body) = body {
                req = req.json(body);
            }
            let res = req.send().await;
            let refused = matches!(res.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
            (!refused, format!("{} {}", res.status, res.text()))
        }
        Probe::Sees(path) => {
            let res = app.get(path).basic(login, secret).send().await;
            let body = res.json();
            let sees = match res.status {
                StatusCode::OK if path.ends_with("/summary") => body.get("quota").is_some(),
                StatusCode::OK => body.as_array().is_some_and(|items| !items.is_empty()),
                _ => false,
            };
            (sees, format!("{} {}", res.status, res.text()))
        }
    }
}

/// The permissions of one level from `GET /permissions`.
fn listed(body: &Value, level: &str) -> Vec<(String, String)> {
    body[level]
        .as_array()
        .unwrap_or_else(|| panic!("no {level} permissions in {body}"))
        .iter()
        .map(|p| {
            (
                p["resource"].as_str().unwrap().to_string(),
                p["action"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The operations of `(resource, action)` at `level`.
fn probes(level: &str, resource: &str, action: &str, setup: &Setup, n: usize) -> Vec<Probe> {
    if level == "system" {
        system_probes(resource, action, setup, n)
    } else {
        project_probes(resource, action, setup, n)
    }
}

/// Another permission of the list to refuse: the next one of another
/// resource whose operations refuse every caller without it (a project
/// robot reads its project, every caller reads global labels and gets the
/// public artifacts its copies come from).
fn other<'a>(all: &'a [(String, String)], i: usize, level: &str) -> &'a (String, String) {
    let open = |(resource, action): &(String, String)| {
        UNSERVED.contains(&resource.as_str())
            || (level == "project" && resource == "project" && action == "read")
            || (level == "system" && resource == "label" && action == "read")
    };
    (1..all.len())
        .map(|k| &all[(i + k) % all.len()])
        .find(|p| p.0 != all[i].0 && !open(p))
        .expect("another permission")
}

backend_test!(
    /// For each permission of Harbor's robot lists, system and project: a
    /// robot given only it passes the permission check of every operation
    /// Harbor guards with it, and is refused the operations of another
    /// permission and, where there is one, of another action on the same
    /// resource.
    async fn each_robot_permission_grants_exactly_its_operations(app) {
        let res = app.put("/api/v2.0/configurations").admin()
            .json(&json!({"project_creation_restriction": "adminonly", "self_registration": false}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let pid = project(&app, None, "p", false).await;
        project(&app, None, "pub", true).await;
        push_image(&app, "p/app", "v1", &[b"app"]).await;
        push_image(&app, "pub/src", "v1", &[b"src"]).await;
        let mut setup = Setup { pid, label: 0, project_label: 0, robot: 0, system_robot: 0, retention: 0 };
        restore(&app, &mut setup, 0).await;
        // The audit log has entries (written as events are delivered).
        for _ in 0..100 {
            let res = app.get("/api/v2.0/audit-logs").admin().send().await;
            if res.json().as_array().is_some_and(|a| !a.is_empty()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }

        let res = app.get("/api/v2.0/permissions").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let all = res.json();
        let mut n = 0;
        for level in ["system", "project"] {
            let permissions = listed(&all, level);
            assert_eq!(permissions.len(), 70, "Harbor lists 70 {level} permissions: {permissions:?}");
            for (i, (resource, action)) in permissions.iter().enumerate() {
                n += 1;
                let grant = json!([{"resource": resource, "action": action}]);
                let (login, secret) = robot(&app, &format!("r{n}"), level, grant).await;
                if UNSERVED.contains(&resource.as_str()) {
                    continue;
                }
                // What another permission grants, and another action here.
                let (other_resource, other_action) = other(&permissions, i, level);
                let mut refused = probes(level, other_resource, other_action, &setup, n);
                let sibling = permissions.iter().find(|(r, a)| r == resource && a != action
                    && !(level == "system" && r == "label" && a == "read")
                    && !(level == "project" && r == "project" && a == "read")
                    && !(r == "repository" && a == "pull" && action == "push"));
                if let Some((r, a)) = sibling {
                    refused.extend(probes(level, r, a, &setup, n));
                }
                for probe in &refused {
                    let (passed, answer) = passes(&app, &login, &secret, probe).await;
                    assert!(!passed, "{level} {resource}:{action} must not pass {probe:?}: {answer}");
                }
                for probe in probes(level, resource, action, &setup, n) {
                    let (passed, answer) = passes(&app, &login, &secret, &probe).await;
                    assert!(passed, "{level} {resource}:{action} must pass {probe:?}: {answer}");
                }
                restore(&app, &mut setup, n).await;
            }
        }
    }
);

backend_test!(
    /// `GET /permissions`: both lists for system administrators, the project
    /// one for project administrators, 403 for others (robots too), 401
    /// for anonymous callers.
    async fn get_permissions_is_for_administrators(app) {
        let res = app.get("/api/v2.0/permissions").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let body = res.json();
        assert_eq!(body["system"][0], json!({"resource": "audit-log", "action": "list"}));
        assert_eq!(body["project"][0], json!({"resource": "log", "action": "list"}));
        assert!(listed(&body, "project").contains(&("member".into(), "create".into())));

        let pid = project(&app, None, "team", false).await;
        let owner = crate::harbor::fixtures::user(&app, "owner").await;
        crate::harbor::fixtures::member(&app, pid, owner, 1).await;
        crate::harbor::fixtures::user(&app, "dev").await;
        let res = app.get("/api/v2.0/permissions").basic("owner", crate::harbor::fixtures::PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.json().get("system").is_none(), "{}", res.text());
        assert_eq!(listed(&res.json(), "project"), listed(&body, "project"));
        let res = app.get("/api/v2.0/permissions").basic("dev", crate::harbor::fixtures::PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let (login, secret) = robot(&app, "everything", "system", json!([{"resource": "*", "action": "*"}])).await;
        let res = app.get("/api/v2.0/permissions").basic(&login, &secret).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.get("/api/v2.0/permissions").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);

backend_test!(
    /// `scope` may name a resource under a project: the permissions on it,
    /// relative to it with `relative=true` (`.` for the scope itself).
    async fn current_user_permissions_of_a_sub_resource(app) {
        let pid = project(&app, None, "team", false).await;
        let url = format!("/api/v2.0/users/current/permissions?scope=/project/{pid}/repository&relative=true");
        let res = app.get(&url).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let mut actions: Vec<(String, String)> = res.json().as_array().unwrap().iter()
            .map(|p| (p["resource"].as_str().unwrap().to_string(), p["action"].as_str().unwrap().to_string()))
            .collect();
        actions.sort();
        let expected: Vec<(String, String)> = ["delete", "list", "pull", "push", "read", "update"]
            .iter()
            .map(|a| (".".to_string(), a.to_string()))
            .collect();
        assert_eq!(actions, expected);

        let res = app.get(&format!("/api/v2.0/users/current/permissions?scope=/project/{pid}&relative=true")).admin().send().await;
        let relative = res.json();
        assert!(relative.as_array().unwrap().contains(&json!({"resource": ".", "action": "read"})), "{relative}");
        assert!(relative.as_array().unwrap().contains(&json!({"resource": "repository", "action": "push"})), "{relative}");
        // Without relative=true, every permission in the project, absolute.
        let res = app.get(&format!("/api/v2.0/users/current/permissions?scope=/project/{pid}/repository")).admin().send().await;
        let absolute = res.json();
        assert!(absolute.as_array().unwrap().contains(&json!({"resource": format!("/project/{pid}/member"), "action": "create"})), "{absolute}");

        // A robot: what its permissions grant, there and in the system.
        let body = json!({
            "name": "sys", "level": "system", "duration": -1,
            "permissions": [
                {"kind": "system", "namespace": "/", "access": [{"resource": "registry", "action": "list"}]},
                {"kind": "project", "namespace": "team", "access": [{"resource": "repository", "action": "pull"}]},
            ],
        });
        let res = app.post("/api/v2.0/robots").admin().json(&body).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let (login, secret) = (res.json()["name"].as_str().unwrap().to_string(), res.json()["secret"].as_str().unwrap().to_string());
        let res = app.get(&url).basic(&login, &secret).send().await;
        assert_eq!(res.json(), json!([{"resource": ".", "action": "pull"}]));
        let res = app.get("/api/v2.0/users/current/permissions?scope=/system&relative=true").basic(&login, &secret).send().await;
        assert_eq!(res.json(), json!([{"resource": "registry", "action": "list"}]));
    }
);
