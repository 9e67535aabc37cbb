"""Drives Berth's Harbor API with the real `harborapi` client (PyPI).

Usage: python3 harborapi_compat.py <base-url> <admin-password>

Every call goes through harborapi, which validates the responses with its
pydantic models, so field names and types must match Harbor's. Exits non-zero
(with a traceback) on the first failed expectation.
"""

import asyncio
import http.server
import json
import sys
import threading

from harborapi import HarborAsyncClient
from harborapi.exceptions import Conflict, NotFound, Unauthorized, Forbidden, BadRequest
from harborapi.models import (
    Access,
    CVEAllowlist,
    CVEAllowlistItem,
    Configurations,
    Label,
    ProjectMetadata,
    ProjectReq,
    QuotaUpdateReq,
    Registry,
    RegistryCredential,
    ReplicationFilter,
    ReplicationPolicy,
    ReplicationTrigger,
    ResourceList,
    RetentionPolicy,
    RetentionPolicyScope,
    RetentionRule,
    RetentionRuleTrigger,
    RetentionSelector,
    Robot,
    RobotCreate,
    RobotPermission,
    Schedule,
    ScheduleObj,
    UserCreationReq,
    UserGroup,
    UserProfile,
    WebhookPolicy,
    WebhookTargetObject,
)


def start_receiver():
    """A webhook receiver on a loopback port: (its URL, the bodies it got)."""
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            headers = {name.lower(): value for name, value in self.headers.items()}
            received.append((headers, json.loads(self.rfile.read(length))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/hook", received


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


async def expect_error(kind, coroutine):
    try:
        await coroutine
    except kind:
        return
    raise AssertionError(f"expected {kind.__name__}")


async def main(base, password):
    url = f"{base}/api/v2.0"
    admin = HarborAsyncClient(url=url, username="admin", secret=password)

    # System.
    expect((await admin.ping()).strip() == "Pong", "ping")
    health = await admin.health_check()
    expect(health.status == "healthy", f"health: {health}")

    # Users.
    location = await admin.create_user(
        UserCreationReq(
            username="compat-alice",
            email="compat-alice@example.com",
            realname="Alice Compat",
            password="Compat-Passw0rd",
            comment="made by harborapi",
        )
    )
    expect(location.startswith("/api/v2.0/users/"), f"user location {location}")
    alice_id = int(location.rsplit("/", 1)[1])
    await expect_error(
        Conflict,
        admin.create_user(
            UserCreationReq(
                username="compat-alice",
                email="other@example.com",
                realname="Dup",
                password="Compat-Passw0rd",
            )
        ),
    )
    users = await admin.get_users()
    expect([u.username for u in users] == ["compat-alice"], f"users {users}")
    found = await admin.search_users_by_username("compat")
    expect(found[0].user_id == alice_id, f"search users {found}")
    alice = await admin.get_user_by_username("compat-alice")
    expect(alice.email == "compat-alice@example.com" and not alice.sysadmin_flag, f"{alice}")
    await admin.update_user(alice_id, UserProfile(email="alice2@example.com", realname="Alice Two", comment="c"))
    expect((await admin.get_user(alice_id)).realname == "Alice Two", "profile update")
    await admin.set_user_password(alice_id, new_password="Other-Passw0rd")
    alice_client = HarborAsyncClient(url=url, username="compat-alice", secret="Other-Passw0rd")
    me = await alice_client.get_current_user()
    expect(me.user_id == alice_id, f"current user {me}")
    await admin.set_user_admin(alice_id, True)
    expect((await admin.get_user(alice_id)).sysadmin_flag, "sysadmin set")
    await admin.set_user_admin(alice_id, False)

    # Projects.
    expect(await admin.project_exists("library"), "library exists")
    expect(not await admin.project_exists("compat-none"), "missing project")
    location = await admin.create_project(
        ProjectReq(project_name="compat-proj", metadata=ProjectMetadata(public="false", auto_scan="true"))
    )
    expect(location == "/api/v2.0/projects/compat-proj", f"project location {location}")
    await expect_error(Conflict, admin.create_project(ProjectReq(project_name="compat-proj")))
    await expect_error(BadRequest, admin.create_project(ProjectReq(project_name="Bad Name")))
    project = await admin.get_project("compat-proj")
    expect(project.name == "compat-proj" and project.owner_name == "admin", f"{project}")
    expect(project.metadata.public == "false" and project.metadata.auto_scan == "true", f"{project.metadata}")
    expect(project.current_user_role_ids == [1], f"roles {project.current_user_role_ids}")
    same = await admin.get_project(project.project_id)
    expect(same.name == "compat-proj", "get by id")
    projects = await admin.get_projects(query="name=~compat")
    expect([p.name for p in projects] == ["compat-proj"], f"list {projects}")
    every = await admin.get_projects(page_size=1, limit=10)
    expect({p.name for p in every} == {"library", "compat-proj"}, f"paged list {every}")
    await admin.update_project("compat-proj", ProjectReq(metadata=ProjectMetadata(severity="high")))
    expect((await admin.get_project("compat-proj")).metadata.severity == "high", "update project")
    summary = await admin.get_project_summary("compat-proj")
    expect(summary.repo_count == 0 and summary.project_admin_count == 1, f"summary {summary}")
    deletable = await admin.get_project_deletable("compat-proj")
    expect(deletable.deletable, f"deletable {deletable}")

    # Members.
    member_location = await admin.add_project_member_user("compat-proj", "compat-alice", 2)
    mid = int(member_location.rsplit("/", 1)[1])
    members = await admin.get_project_members("compat-proj")
    expect(sorted(m.entity_name for m in members) == ["admin", "compat-alice"], f"members {members}")
    member = await admin.get_project_member("compat-proj", mid)
    expect(member.role_name == "developer" and member.entity_type == "u", f"{member}")
    await admin.update_project_member_role("compat-proj", mid, 4)
    expect((await admin.get_project_member("compat-proj", mid)).role_id == 4, "role update")
    alice_view = await alice_client.get_project("compat-proj")
    expect(alice_view.current_user_role_ids == [4], f"alice roles {alice_view}")
    await expect_error(Forbidden, alice_client.delete_project("compat-proj"))
    await admin.remove_project_member("compat-proj", mid)
    await expect_error(Forbidden, alice_client.get_project("compat-proj"))

    # Metadata.
    await admin.set_project_metadata("compat-proj", ProjectMetadata(prevent_vul="true"))
    await expect_error(Conflict, admin.set_project_metadata("compat-proj", ProjectMetadata(prevent_vul="true")))
    meta = await admin.get_project_metadata("compat-proj")
    expect(meta.prevent_vul == "true" and meta.public == "false", f"metadata {meta}")
    entry = await admin.get_project_metadata_entry("compat-proj", "prevent_vul")
    expect(entry == {"prevent_vul": "true"}, f"entry {entry}")
    await admin.update_project_metadata_entry("compat-proj", "public", {"public": "true"})
    expect("compat-proj" in [p.name for p in await alice_client.get_projects()], "public now")
    await admin.delete_project_metadata_entry("compat-proj", "prevent_vul")
    expect(await admin.get_project_metadata_entry("compat-proj", "prevent_vul") == {}, "entry deleted")

    # Search, statistics, configuration.
    result = await admin.search("compat")
    expect([p.name for p in result.project] == ["compat-proj"], f"search {result}")
    stats = await admin.get_statistics()
    expect(stats.total_project_count == 2 and stats.public_project_count == 2, f"stats {stats}")
    config = await admin.get_config()
    expect(config.auth_mode.value == "db_auth", f"config {config.auth_mode}")
    await admin.update_config(Configurations(project_creation_restriction="adminonly", token_expiration=45))
    config = await admin.get_config()
    expect(config.project_creation_restriction.value == "adminonly", "config update")
    expect(config.token_expiration.value == 45, "config int")
    await expect_error(Forbidden, alice_client.get_config())
    await expect_error(Forbidden, alice_client.create_project(ProjectReq(project_name="by-alice")))

    # Labels, the system CVE allowlist and volumes.
    label_location = await admin.create_label(Label(name="compat-label", scope="g", description="d"))
    label_id = int(label_location.rsplit("/", 1)[1])
    await admin.update_label(label_id, Label(name="compat-renamed", description="new", color="#ffffff", scope="g"))
    label = await admin.get_label(label_id)
    expect((label.name, label.description, label.color) == ("compat-renamed", "new", "#ffffff"), f"{label}")
    await expect_error(Forbidden, alice_client.update_label(label_id, Label(name="by-alice", scope="g")))
    allowlist = await alice_client.get_cve_allowlist()
    expect(allowlist.items == [] and not allowlist.id, f"empty allowlist {allowlist}")
    new_list = CVEAllowlist(items=[CVEAllowlistItem(cve_id="CVE-2019-10164")], expires_at=1893456000)
    await expect_error(Forbidden, alice_client.update_cve_allowlist(new_list))
    await admin.update_cve_allowlist(new_list)
    allowlist = await alice_client.get_cve_allowlist()
    expect([i.cve_id for i in allowlist.items] == ["CVE-2019-10164"] and allowlist.expires_at == 1893456000, f"{allowlist}")
    volumes = await admin.get_system_volume_info()
    expect(len(volumes.storage) == 1 and 0 < volumes.storage[0].free <= volumes.storage[0].total, f"{volumes}")

    # Quotas: one per project, read and limited by administrators.
    project_id = (await admin.get_project("compat-proj")).project_id
    quotas = await admin.get_quotas(reference="project", reference_id=str(project_id))
    expect(len(quotas) == 1 and quotas[0].ref.root["name"] == "compat-proj", f"quotas {quotas}")
    expect(quotas[0].hard.root["storage"] == -1 and quotas[0].used.root["storage"] == 0, f"{quotas[0]}")
    await admin.update_quota(quotas[0].id, QuotaUpdateReq(hard=ResourceList({"storage": 1 << 30})))
    expect((await admin.get_quota(quotas[0].id)).hard.root["storage"] == 1 << 30, "quota update")
    expect(len(await admin.get_quotas()) == 2, "library and compat-proj")
    await expect_error(Forbidden, alice_client.get_quotas())

    # Robot accounts: a project robot made, listed, read, updated, refreshed,
    # used as Basic credentials, and deleted.
    created = await admin.create_robot(
        RobotCreate(
            name="compat-ci",
            description="made by harborapi",
            level="project",
            duration=-1,
            permissions=[
                RobotPermission(
                    kind="project",
                    namespace="compat-proj",
                    access=[Access(resource="repository", action="push"), Access(resource="repository", action="pull")],
                )
            ],
        )
    )
    expect(created.name == "robot$compat-proj+compat-ci" and created.secret, f"robot {created}")
    robots = await admin.get_robots(query=f"Level=project,ProjectID={project_id}")
    expect([r.name for r in robots] == [created.name], f"robots {robots}")
    robot = await admin.get_robot(created.id)
    expect(robot.level == "project" and robot.permissions[0].namespace == "compat-proj", f"{robot}")
    robot.description = "updated by harborapi"
    await admin.update_robot(created.id, robot)
    expect((await admin.get_robot(created.id)).description == "updated by harborapi", "robot update")
    robot_client = HarborAsyncClient(url=url, username=created.name, secret=created.secret)
    expect((await robot_client.get_project("compat-proj")).name == "compat-proj", "robot reads its project")
    await expect_error(Forbidden, robot_client.get_config())
    await admin.refresh_robot_secret(created.id, "Refreshed-Secret-1")
    await expect_error(Unauthorized, robot_client.get_project("compat-proj"))
    robot_client = HarborAsyncClient(url=url, username=created.name, secret="Refreshed-Secret-1")
    expect((await robot_client.get_project("compat-proj")).name == "compat-proj", "refreshed secret")
    await admin.delete_robot(created.id)
    await expect_error(NotFound, admin.get_robot(created.id))

    # Artifacts: copy and accessories, over an image and a cosign-style signature
    # pushed with plain /v2/ requests.
    image_digest = push_signed_image(base, password, "library/compat-src", "v1")
    copied = await admin.copy_artifact("library", "compat-copy", "library/compat-src:v1")
    expect(copied.endswith(f"/artifacts/{image_digest}"), f"copy location {copied}")
    artifact = await admin.get_artifact("library", "compat-copy", "v1")
    expect(artifact.digest == image_digest, f"copied artifact {artifact}")
    accessories = await admin.get_artifact_accessories("library", "compat-src", "v1")
    expect([a.type for a in accessories] == ["signature.cosign"], f"accessories {accessories}")
    expect(accessories[0].subject_artifact_digest == image_digest, f"{accessories[0]}")
    project_artifacts = await admin.get_project_artifacts("library", with_tag=True, page_size=100)
    names = {a.repository_name for a in project_artifacts}
    expect({"library/compat-src", "library/compat-copy"} <= names, f"project artifacts {names}")
    by_id = await admin.get_project_artifacts(1, query="tags=v1", with_tag=True, page_size=100)
    expect(len(by_id) == 2 and all(a.tags[0].name == "v1" for a in by_id), f"{by_id}")
    icon = await admin.get_icon(project_artifacts[0].icon)
    expect(icon.content_type == "image/png" and icon.content, f"icon {icon}")
    await expect_error(NotFound, admin.get_icon("sha256:" + "0" * 64))

    # Audit logs: written in batches a moment after the operations.
    for _ in range(50):
        entries = await admin.get_audit_logs(query="resource=~compat-src", page_size=100)
        if any(e.operation == "create" for e in entries):
            break
        await asyncio.sleep(0.1)
    expect(any(e.operation == "create" and e.resource == "library/compat-src:v1" for e in entries), f"{entries}")
    library_logs = await admin.get_project_logs("library", page_size=100)
    expect(any(e.resource_type == "artifact" for e in library_logs), f"{library_logs}")

    # Tag retention, an audit purge and the GC schedule, as the client words them.
    metadata = await admin.get_retention_metadata()
    expect([t.rule_template for t in metadata.templates][:2] == ["latestPushedK", "latestPulledN"], f"{metadata}")
    selector = lambda decoration: RetentionSelector(kind="doublestar", decoration=decoration, pattern="**")
    policy = RetentionPolicy(
        algorithm="or",
        rules=[RetentionRule(
            action="retain", template="latestPushedK", params={"latestPushedK": 10},
            tag_selectors=[selector("matches")], scope_selectors={"repository": [selector("repoMatches")]},
        )],
        trigger=RetentionRuleTrigger(kind="Schedule", settings={"cron": ""}, references={}),
        scope=RetentionPolicyScope(level="project", ref=1),
    )
    retention_id = int((await admin.create_retention_policy(policy)).rsplit("/", 1)[1])
    expect(await admin.get_project_retention_id("library") == retention_id, "the project names its policy")
    stored = await admin.get_retention_policy(retention_id)
    expect(stored.rules[0].params["latestPushedK"] == 10, f"{stored}")
    stored.rules[0].params = {"latestPushedK": 20}
    stored.trigger.settings = {"cron": "0 0 3 * * *"}
    await admin.update_retention_policy(retention_id, stored)
    expect((await admin.get_retention_policy(retention_id)).rules[0].params["latestPushedK"] == 20, "policy updated")
    execution_id = int((await admin.start_retention_execution(retention_id, dry_run=True)).rsplit("/", 1)[1])
    for _ in range(100):
        executions = await admin.get_retention_executions(retention_id)
        if executions and executions[0].status == "Success":
            break
        await asyncio.sleep(0.1)
    expect(executions[0].id == execution_id and executions[0].dry_run, f"{executions}")
    tasks = await admin.get_retention_tasks(retention_id, execution_id)
    task = next(t for t in tasks if t.repository == "compat-src")
    expect(task.total >= 1 and task.retained == task.total, f"{task}")
    log = await admin.get_retention_execution_task_log(retention_id, execution_id, task.id)
    expect("RETAIN" in log, log)
    await admin.stop_retention_execution(retention_id, execution_id)
    await admin.delete_retention_policy(retention_id)
    await expect_error(NotFound, admin.get_retention_policy(retention_id))

    # Webhooks: a policy, a copy it is told of, its jobs and last trigger.
    receiver_url, received = start_receiver()
    events = await admin.get_webhook_supported_events("library")
    event_types = [e.root for e in events.event_type]
    expect("PUSH_ARTIFACT" in event_types and [n.root for n in events.notify_type] == ["http", "slack"], f"{events}")
    hook = WebhookPolicy(
        name="compat-hook",
        targets=[WebhookTargetObject(type="http", address=receiver_url, auth_header="Bearer compat")],
        event_types=["PUSH_ARTIFACT"],
        enabled=True,
    )
    hook_id = int((await admin.create_webhook_policy("library", hook)).rsplit("/", 1)[1])
    stored_hook = await admin.get_webhook_policy("library", hook_id)
    expect(stored_hook.targets[0].payload_format.root == "Default" and stored_hook.enabled, f"{stored_hook}")
    expect(any(p.id == hook_id for p in await admin.get_webhook_policies("library")), "listed")
    await admin.copy_artifact("library", "compat-hooked", "library/compat-src:v1")
    for _ in range(150):
        if received:
            break
        await asyncio.sleep(0.1)
    expect(received and received[0][1]["type"] == "PUSH_ARTIFACT", f"{received}")
    expect(received[0][0].get("authorization") == "Bearer compat", f"{received[0][0]}")
    expect(received[0][1]["event_data"]["repository"]["repo_full_name"] == "library/compat-hooked", f"{received}")
    for _ in range(100):
        jobs = await admin.get_webhook_jobs("library", policy_id=hook_id)
        if jobs and jobs[0].status == "Success":
            break
        await asyncio.sleep(0.1)
    expect(jobs[0].event_type == "PUSH_ARTIFACT" and str(getattr(jobs[0].notify_type, "root", jobs[0].notify_type)) == "http", f"{jobs}")
    triggers = await admin.get_webhook_policy_last_trigger("library")
    expect(any(t.policy_name == "compat-hook" and t.event_type == "PUSH_ARTIFACT" for t in triggers), f"{triggers}")
    stored_hook.enabled = False
    await admin.update_webhook_policy("library", hook_id, stored_hook)
    expect(not (await admin.get_webhook_policy("library", hook_id)).enabled, "disabled")
    await expect_error(Conflict, admin.create_webhook_policy("library", hook))
    await admin.delete_webhook_policy("library", hook_id)
    await expect_error(NotFound, admin.get_webhook_policy("library", hook_id))

    # Replication: Berth as its own peer (the harbor adapter), a manual push-based run.
    self_registry = Registry(
        name="compat-self",
        url=base,
        type="harbor",
        credential=RegistryCredential(type="basic", access_key="admin", access_secret=password),
    )
    registry_id = int((await admin.create_registry(self_registry)).rsplit("/", 1)[1])
    replication = ReplicationPolicy(
        name="compat-replication",
        dest_registry=Registry(id=registry_id),
        dest_namespace="compat-mirror",
        filters=[ReplicationFilter(type="name", value="library/compat-src")],
        trigger=ReplicationTrigger(type="manual"),
        override=True,
        enabled=True,
    )
    policy_id = int((await admin.create_replication_policy(replication)).rsplit("/", 1)[1])
    stored_policy = await admin.get_replication_policy(policy_id)
    expect(stored_policy.dest_registry.id == registry_id and stored_policy.src_registry.id == 0, f"{stored_policy}")
    expect(any(p.id == policy_id for p in await admin.get_replication_policies(name="compat")), "listed")
    await expect_error(Conflict, admin.create_replication_policy(replication))
    execution_id = int((await admin.start_replication(policy_id)).rsplit("/", 1)[1])
    for _ in range(150):
        execution = await admin.get_replication(execution_id)
        if execution.status != "InProgress":
            break
        await asyncio.sleep(0.1)
    expect(execution.status == "Succeed" and execution.total == 1 and execution.succeed == 1, f"{execution}")
    expect(any(e.id == execution_id for e in await admin.get_replications(policy_id=policy_id)), "runs listed")
    tasks = await admin.get_replication_tasks(execution_id)
    expect(tasks[0].src_resource.startswith("library/compat-src:") and tasks[0].dst_resource.startswith("compat-mirror/compat-src:"), f"{tasks}")
    expect("sent" in await admin.get_replication_task_log(execution_id, tasks[0].id), "task log")
    expect(await admin.get_artifact("compat-mirror", "compat-src", "v1"), "the copy arrived")
    stored_policy.description = "updated"
    await admin.update_replication_policy(policy_id, stored_policy)
    expect((await admin.get_replication_policy(policy_id)).description == "updated", "policy updated")
    await admin.stop_replication(execution_id)
    await admin.delete_replication_policy(policy_id)
    await expect_error(NotFound, admin.get_replication_policy(policy_id))
    await admin.delete_registry(registry_id)

    # User groups and the caller's permissions.
    group_id = int((await admin.create_usergroup(UserGroup(group_name="compat-group", group_type=3))).rsplit("/", 1)[1])
    expect((await admin.get_usergroup(group_id)).group_name == "compat-group", "group read")
    expect(any(g.id == group_id for g in await admin.get_usergroups(group_name="compat")), "groups listed")
    expect(any(g.id == group_id for g in await admin.search_usergroups("compat-gr")), "groups searched")
    await admin.update_usergroup(group_id, UserGroup(group_name="compat-group-2"))
    expect((await admin.get_usergroup(group_id)).group_name == "compat-group-2", "group renamed")
    await expect_error(Conflict, admin.create_usergroup(UserGroup(group_name="compat-group-2", group_type=3)))
    await admin.delete_usergroup(group_id)
    await expect_error(NotFound, admin.get_usergroup(group_id))
    permissions = await admin.get_current_user_permissions(scope="/project/1", relative=True)
    expect(any(p.resource == "repository" and p.action == "push" for p in permissions), f"{permissions}")

    purge = Schedule(
        schedule=ScheduleObj(type="Manual"),
        parameters={"audit_retention_hour": 168, "include_event_types": "create_artifact,pull_artifact", "dry_run": True},
    )
    purge_id = int((await admin.create_purge_job_schedule(purge)).rsplit("/", 1)[1])
    for _ in range(100):
        job = await admin.get_purge_job(purge_id)
        if job.job_status == "Success":
            break
        await asyncio.sleep(0.1)
    expect(job.job_status == "Success" and job.job_name == "PURGE_AUDIT_LOG", f"{job}")
    expect("[DRYRUN]Purged" in await admin.get_purge_job_log(purge_id), "purge log")
    expect(any(j.id == purge_id for j in await admin.get_purge_job_history()), "purge history")
    await admin.stop_purge_job(purge_id)
    purge.schedule = ScheduleObj(type="Daily")
    await admin.update_purge_job_schedule(purge)
    schedule_type = lambda schedule: getattr(schedule.type, "value", schedule.type)
    expect(schedule_type((await admin.get_purge_job_schedule()).schedule) == "Daily", "purge schedule")
    purge.schedule = ScheduleObj(type="None")
    await admin.update_purge_job_schedule(purge)

    await admin.create_gc_schedule(Schedule(schedule=ScheduleObj(type="Weekly"), parameters={"delete_untagged": False}))
    gc = await admin.get_gc_schedule()
    expect(schedule_type(gc.schedule) == "Weekly" and gc.schedule.cron == "0 0 0 * * 0", f"{gc}")
    await admin.update_gc_schedule(Schedule(schedule=ScheduleObj(type="None")))

    # Clean-up paths.
    await admin.delete_project("compat-proj")
    expect(not await admin.project_exists("compat-proj"), "project deleted")
    await admin.delete_user(alice_id)
    bad_alice = HarborAsyncClient(url=url, username="compat-alice", secret="Other-Passw0rd")
    await expect_error(Unauthorized, bad_alice.get_current_user())
    await expect_error(NotFound, admin.get_user(alice_id))
    print("harborapi compatibility: all checks passed")


def push_signed_image(base, password, repository, tag):
    """Pushes a one-layer image tagged `tag` and a signature of it; the image's digest."""
    import base64
    import hashlib
    import json
    import urllib.request

    auth = "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()

    def send(method, path, body, content_type):
        request = urllib.request.Request(
            f"{base}{path}", data=body, method=method,
            headers={"Authorization": auth, "Content-Type": content_type})
        with urllib.request.urlopen(request) as response:
            expect(response.status == 201, f"{method} {path}: {response.status}")

    def blob(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        send("POST", f"/v2/{repository}/blobs/uploads/?digest={digest}", data, "application/octet-stream")
        return {"digest": digest, "size": len(data)}

    def manifest(document, reference):
        body = json.dumps(document).encode()
        send("PUT", f"/v2/{repository}/manifests/{reference}", body, "application/vnd.oci.image.manifest.v1+json")
        return "sha256:" + hashlib.sha256(body).hexdigest(), len(body)

    config = blob(b'{"architecture":"amd64","os":"linux"}')
    layer = blob(b"a layer harborapi copies")
    image, size = manifest({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
    }, tag)
    empty = blob(b"{}")
    payload = blob(b"a signature payload")
    signature = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", **empty},
        "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", **payload}],
        "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": image, "size": size},
    }
    body = json.dumps(signature).encode()
    manifest(signature, "sha256:" + hashlib.sha256(body).hexdigest())
    return image


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
