#!/usr/bin/env python3
"""Browser test of the web portal: Debian's chromium driven by Playwright.

    python3 scripts/portal-test.py BERTH_BINARY [SCREENSHOT_DIR]

Starts the given berth on a free loopback port with a fresh SQLite data
directory, builds a small OCI image with umoci, pushes it with skopeo, and walks
the portal as a person would: a bad password shows an error; the administrator
signs in, creates a project, finds the pushed image, copies its pull commands,
adds a member, changes another member's role and removes that member, deletes
a tag, opens the artifact page (layers, tags, manifest), deletes an artifact,
creates and deletes a label, makes the project public and private again on its
configuration tab, reads its summary, is refused deleting it while it has
repositories (412, explained), deletes an empty project and signs out; a user who is not a member does not see the
private project, nor the administration links, and gets 403 on them; the
administrator creates a user on the users page, who then signs in. On a
second berth in oidc_auth mode, a user signs in through the OpenID provider
(BERTH_TEST_OIDC_URL, started by scripts/test). Screenshots of the main pages go to SCREENSHOT_DIR (default
docs/screenshots). Any missing tool or failed step exits non-zero.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import base64
import json

from playwright.sync_api import expect, sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN_PASSWORD = "Portal-test-1"


def log(text):
    print(f"portal-test: {text}", file=sys.stderr, flush=True)


def require(tool):
    if shutil.which(tool) is None and not os.path.exists(tool):
        sys.exit(f"portal-test: {tool} is required and missing")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def build_image(work):
    """An OCI layout `work/layout:v1` with one small layer."""
    layout = os.path.join(work, "layout")
    run("umoci", "init", "--layout", layout)
    run("umoci", "new", "--image", f"{layout}:v0")
    bundle = os.path.join(work, "bundle")
    run("umoci", "unpack", "--rootless", "--image", f"{layout}:v0", bundle)
    with open(os.path.join(bundle, "rootfs", "hello.txt"), "w") as f:
        f.write("hello from the portal test\n")
    run("umoci", "repack", "--image", f"{layout}:v1", bundle)
    return layout


def layer_digests(layout):
    """The layer digests of `layout:v1`, read from the OCI layout."""
    def blob(digest):
        algorithm, hex_digest = digest.split(":", 1)
        with open(os.path.join(layout, "blobs", algorithm, hex_digest)) as f:
            return json.load(f)

    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    for entry in index["manifests"]:
        if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == "v1":
            return [layer["digest"] for layer in blob(entry["digest"])["layers"]]
    sys.exit("portal-test: the layout has no v1")


def push(layout, host, reference):
    run(
        "skopeo", "--insecure-policy", "copy", "--quiet",
        "--dest-tls-verify=false", "--dest-creds", f"admin:{ADMIN_PASSWORD}",
        f"oci:{layout}:v1", f"docker://{host}/{reference}",
    )


def api(base, method, path, body=None):
    """A Harbor API call as admin (Basic)."""
    request = urllib.request.Request(base + path, method=method)
    token = base64.b64encode(f"admin:{ADMIN_PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data) as response:
        return response.status


def start_berth(binary, work, port):
    env = dict(os.environ, HARBOR_ADMIN_PASSWORD=ADMIN_PASSWORD)
    logfile = open(os.path.join(work, "server.log"), "w")
    process = subprocess.Popen(
        [binary, "serve", "--ip", "127.0.0.1", "--port", str(port),
         "--data-dir", os.path.join(work, "data"),
         "--external-url", f"http://127.0.0.1:{port}", "--log", "warn"],
        env=env, stdout=logfile, stderr=subprocess.STDOUT,
    )
    for _ in range(150):
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2.0/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    with open(os.path.join(work, "server.log")) as f:
        sys.stderr.write(f.read())
    sys.exit("portal-test: berth did not become healthy")


def scenario(page, base, host, shots, clipboard_ok):
    def shot(name):
        page.screenshot(path=os.path.join(shots, f"{name}.png"), full_page=True)

    page.on("dialog", lambda dialog: dialog.accept())

    log("a browser asking for / lands on the sign-in page")
    page.goto(base + "/")
    expect(page).to_have_url(base + "/harbor/sign-in")
    shot("sign-in")

    log("a bad password shows an error")
    page.fill("#login_username", "admin")
    page.fill("#login_password", "not-the-password")
    page.click("#log_in")
    expect(page.get_by_role("alert")).to_contain_text("Invalid user name or password")
    shot("sign-in-error")

    log("admin signs in")
    page.fill("#login_username", "admin")
    page.fill("#login_password", ADMIN_PASSWORD)
    page.click("#log_in")
    expect(page).to_have_url(base + "/harbor/projects")
    expect(page.locator("#current_user")).to_have_text("admin")

    log("admin creates a private project")
    page.fill("#create_project_name", "demo")
    page.click("#create_project")
    expect(page).to_have_url(base + "/harbor/projects/demo")
    expect(page.locator("h1")).to_contain_text("demo")

    log("admin adds a member")
    api(base, "POST", "/api/v2.0/users", {
        "username": "dev", "email": "dev@example.com", "realname": "Developer",
        "password": "Dev-pass-1",
    })
    page.click("#tab_members")
    expect(page).to_have_url(base + "/harbor/projects/demo/members")
    page.fill("#member_username", "dev")
    page.select_option("#member_role", label="developer")
    page.click("#add_member")
    expect(page.get_by_role("alert")).to_contain_text("dev was added to the project")
    expect(page.locator('tr[data-member="dev"] .role')).to_have_text("developer")

    log("admin changes a member's role, then removes the member")
    api(base, "POST", "/api/v2.0/users", {
        "username": "ops", "email": "ops@example.com", "realname": "Operator",
        "password": "Ops-pass-1",
    })
    page.fill("#member_username", "ops")
    page.select_option("#member_role", label="guest")
    page.click("#add_member")
    row = page.locator('tr[data-member="ops"]')
    expect(row.locator(".role")).to_have_text("guest")
    row.locator("select.role-select").select_option(label="maintainer")
    row.locator("button.change-role").click()
    expect(page.get_by_role("alert")).to_contain_text("The role of ops was changed")
    expect(page.locator('tr[data-member="ops"] .role')).to_have_text("maintainer")
    shot("project-members")
    page.locator('tr[data-member="ops"] button.remove-member').click()
    expect(page.get_by_role("alert")).to_contain_text("ops was removed from the project")
    expect(page.locator('tr[data-member="ops"]')).to_have_count(0)
    expect(page.locator('tr[data-member="dev"]')).to_be_visible()

    log("skopeo pushes demo/app:v1 and :v2")
    push(LAYOUT, host, "demo/app:v1")
    push(LAYOUT, host, "demo/app:v2")

    log("the project is found by search, with its repository count")
    page.goto(base + "/harbor/projects")
    page.fill("#project_search", "dem")
    page.get_by_role("button", name="Search").click()
    row = page.locator('tr[data-project="demo"]')
    expect(row).to_be_visible()
    expect(row.locator(".repo-count")).to_have_text("1")
    expect(page.locator('tr[data-project="library"]')).to_have_count(0)
    page.goto(base + "/harbor/projects")
    shot("projects")

    log("the repository and its artifact are shown")
    page.click('tr[data-project="demo"] a')
    expect(page).to_have_url(base + "/harbor/projects/demo")
    shot("project")
    page.click('tr[data-repository="demo/app"] a')
    expect(page).to_have_url(base + "/harbor/projects/demo/repositories/app")
    artifact = page.locator("tr[data-digest]")
    expect(artifact).to_have_count(1)
    expect(artifact.locator('[data-tag="v1"]')).to_be_visible()
    expect(artifact.locator('[data-tag="v2"]')).to_be_visible()
    expect(artifact).to_contain_text("IMAGE")
    shot("repository")

    log("copy pull command by tag")
    button = artifact.locator('[data-tag="v1"] button.copy-tag')
    want = f"docker pull {host}/demo/app:v1"
    expect(button).to_have_attribute("data-copy", want)
    button.click()
    expect(button).to_have_attribute("data-copied", "true")
    if clipboard_ok:
        got = page.evaluate("navigator.clipboard.readText()")
        assert got == want, f"clipboard holds {got!r}, not {want!r}"

    log("copy pull command by digest")
    digest = artifact.get_attribute("data-digest")
    button = artifact.locator("button.copy-digest")
    want = f"docker pull {host}/demo/app@{digest}"
    expect(button).to_have_attribute("data-copy", want)
    button.click()
    expect(button).to_have_attribute("data-copied", "true")
    if clipboard_ok:
        got = page.evaluate("navigator.clipboard.readText()")
        assert got == want, f"clipboard holds {got!r}, not {want!r}"

    log("delete tag v2")
    artifact.locator('[data-tag="v2"] button.delete-tag').click()
    expect(page.get_by_role("alert")).to_contain_text("Tag v2 was deleted")
    expect(page.locator('[data-tag="v2"]')).to_have_count(0)
    expect(page.locator('[data-tag="v1"]')).to_be_visible()

    log("the artifact page shows its layers, tags and manifest")
    artifact.locator("a.artifact-link").click()
    expect(page.locator("#layers")).to_be_visible()
    layer = layer_digests(LAYOUT)[0]
    expect(page.locator(f'#layers tr[data-layer="{layer}"]')).to_contain_text(layer)
    expect(page.locator('#tags tr[data-tag="v1"]')).to_be_visible()
    expect(page.locator("#manifest")).to_contain_text('"schemaVersion": 2')
    shot("artifact")

    log("an artifact is deleted from its page")
    push(LAYOUT, host, "demo/old:v1")
    page.goto(base + "/harbor/projects/demo/repositories/old")
    page.locator("tr[data-digest] a.artifact-link").click()
    page.click("#delete_artifact")
    expect(page).to_have_url(re.compile(r"/harbor/projects/demo/repositories/old\?removed="))
    expect(page.get_by_role("alert")).to_contain_text("was deleted")
    expect(page.locator("tr[data-digest]")).to_have_count(0)

    log("a label is created and deleted on the labels tab")
    page.goto(base + "/harbor/projects/demo")
    page.click("#tab_labels")
    expect(page).to_have_url(base + "/harbor/projects/demo/labels")
    page.fill("#label_name", "release")
    page.fill("#label_description", "shipped builds")
    page.click("#create_label")
    expect(page.get_by_role("alert")).to_contain_text("Label release was created")
    expect(page.locator('tr[data-label="release"]')).to_contain_text("shipped builds")
    shot("project-labels")
    page.locator('tr[data-label="release"] button.delete-label').click()
    expect(page.get_by_role("alert")).to_contain_text("Label release was deleted")
    expect(page.locator('tr[data-label="release"]')).to_have_count(0)

    log("the project is made public on the configuration tab, and private again")
    page.click("#tab_configuration")
    expect(page).to_have_url(base + "/harbor/projects/demo/configuration")
    expect(page.locator("#setting_public")).not_to_be_checked()
    page.check("#setting_public")
    page.click("#save_project_configuration")
    expect(page.get_by_role("alert")).to_contain_text("The configuration was saved")
    expect(page.locator("#setting_public")).to_be_checked()
    expect(page.locator("h1 .badge")).to_have_text("Public")
    shot("project-configuration")
    page.uncheck("#setting_public")
    page.click("#save_project_configuration")
    expect(page.locator("#setting_public")).not_to_be_checked()
    expect(page.locator("h1 .badge")).to_have_text("Private")

    log("the summary tab counts repositories and members")
    page.click("#tab_summary")
    expect(page.locator("#summary_repositories")).to_have_text("2")
    expect(page.locator("#summary_members")).to_contain_text("2")
    shot("project-summary")

    log("a project with repositories is not deleted, and the page says why; an empty one is")
    page.goto(base + "/harbor/projects")
    page.locator('tr[data-project="demo"] button.danger').click()
    expect(page.get_by_role("alert")).to_contain_text("still contains repositories")
    shot("project-delete-refused")
    page.goto(base + "/harbor/projects")
    page.fill("#create_project_name", "scratch")
    page.click("#create_project")
    expect(page).to_have_url(base + "/harbor/projects/scratch")
    page.goto(base + "/harbor/projects")
    page.locator('tr[data-project="scratch"] button.danger').click()
    expect(page.get_by_role("alert")).to_contain_text("Project scratch was deleted")
    expect(page.locator('tr[data-project="scratch"]')).to_have_count(0)

    log("sign out")
    page.click("#log_out")
    expect(page).to_have_url(base + "/harbor/sign-in")
    page.goto(base + "/harbor/projects")
    expect(page).to_have_url(base + "/harbor/sign-in")

    log("the member signs in and sees the project, without delete buttons")
    page.fill("#login_username", "dev")
    page.fill("#login_password", "Dev-pass-1")
    page.click("#log_in")
    expect(page.locator('tr[data-project="demo"]')).to_be_visible()
    page.goto(base + "/harbor/projects/demo/repositories/app")
    expect(page.locator('[data-tag="v1"] button.copy-tag')).to_be_visible()
    expect(page.locator("button.delete-tag")).to_have_count(0)
    page.click("#log_out")
    expect(page).to_have_url(base + "/harbor/sign-in")

    log("a user who is not a member does not see the private project")
    api(base, "POST", "/api/v2.0/users", {
        "username": "guest", "email": "guest@example.com", "realname": "Guest",
        "password": "Guest-pass-1",
    })
    page.fill("#login_username", "guest")
    page.fill("#login_password", "Guest-pass-1")
    page.click("#log_in")
    expect(page.locator("#current_user")).to_have_text("guest")
    expect(page.locator('tr[data-project="library"]')).to_be_visible()
    expect(page.locator('tr[data-project="demo"]')).to_have_count(0)
    response = page.goto(base + "/harbor/projects/demo")
    assert response.status == 403, response.status
    page.goto(base + "/harbor/projects")

    log("a user who is not an administrator sees no admin links and gets 403 on /harbor/users")
    for link in ("#nav_users", "#nav_configuration", "#nav_system"):
        expect(page.locator(link)).to_have_count(0)
    for path in ("/harbor/users", "/harbor/configuration", "/harbor/system"):
        response = page.goto(base + path)
        assert response.status == 403, (path, response.status)
        expect(page.get_by_role("alert")).to_contain_text("for system administrators")
    page.goto(base + "/harbor/projects")
    page.click("#log_out")
    expect(page).to_have_url(base + "/harbor/sign-in")

    log("admin creates a user on /harbor/users")
    page.fill("#login_username", "admin")
    page.fill("#login_password", ADMIN_PASSWORD)
    page.click("#log_in")
    page.click("#nav_users")
    expect(page).to_have_url(base + "/harbor/users")
    page.fill("#new_username", "newbie")
    page.fill("#new_email", "newbie@example.com")
    page.fill("#new_realname", "New Person")
    page.fill("#new_password", "Newbie-pass-1")
    page.click("#create_user")
    expect(page.get_by_role("alert")).to_contain_text("The user was created")
    expect(page.locator('tr[data-user="newbie"]')).to_contain_text("newbie@example.com")
    shot("users")

    log("the configuration and system pages")
    page.click("#nav_configuration")
    expect(page).to_have_url(base + "/harbor/configuration")
    expect(page.locator("#auth_mode")).to_be_disabled()
    shot("configuration")
    page.click("#nav_system")
    expect(page).to_have_url(base + "/harbor/system")
    page.click("#run_gc")
    expect(page.get_by_role("alert")).to_contain_text("Garbage collection run")
    shot("system")
    page.click("#log_out")
    expect(page).to_have_url(base + "/harbor/sign-in")

    log("the new user signs in")
    page.fill("#login_username", "newbie")
    page.fill("#login_password", "Newbie-pass-1")
    page.click("#log_in")
    expect(page).to_have_url(base + "/harbor/projects")
    expect(page.locator("#current_user")).to_have_text("newbie")
    expect(page.locator("#nav_users")).to_have_count(0)
    page.click("#log_out")
    expect(page).to_have_url(base + "/harbor/sign-in")


def oidc_scenario(page, base, shots):
    """Single sign-on: the sign-in page offers the provider; the browser goes
    through the provider's sign-in and comes back signed in as the new user."""
    provider = os.environ["BERTH_TEST_OIDC_URL"].rstrip("/")
    account = f"sso-{os.getpid()}"

    def call(url, method, body):
        request = urllib.request.Request(url, method=method, data=json.dumps(body).encode())
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request) as response:
            text = response.read()
            return json.loads(text) if text else None

    client = call(f"{provider}/reg", "POST", {
        "redirect_uris": [f"{base}/c/oidc/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    })
    call(f"{provider}/test/accounts/{account}", "PUT", {
        "preferred_username": account, "name": "Sso Person",
        "email": f"{account}@example.test", "groups": ["berth-admins"],
    })
    assert api(base, "PUT", "/api/v2.0/configurations", {
        "auth_mode": "oidc_auth", "oidc_name": "Company SSO", "oidc_endpoint": provider,
        "oidc_client_id": client["client_id"], "oidc_client_secret": client["client_secret"],
        "oidc_scope": "openid,profile,email,groups,offline_access", "oidc_auto_onboard": True,
        "oidc_user_claim": "preferred_username", "oidc_groups_claim": "groups",
        "oidc_admin_group": "berth-admins",
    }) == 200
    page.goto(base + "/harbor/sign-in")
    expect(page.locator("#log_in_oidc")).to_have_text("Log in with Company SSO")
    page.screenshot(path=os.path.join(shots, "oidc-sign-in.png"), full_page=True)
    page.click("#log_in_oidc")
    expect(page).to_have_url(re.compile(re.escape(provider) + r"/interaction/"))
    page.fill("#login", account)
    page.click("#submit")
    expect(page).to_have_url(base + "/harbor/projects")
    expect(page.locator("#current_user")).to_have_text(account)
    expect(page.locator("#nav_users")).to_have_count(1)  # the admin group
    # The profile page holds the CLI secret docker and skopeo sign in with.
    page.click("#current_user")
    expect(page).to_have_url(base + "/harbor/profile")
    secret = page.locator("#copy_cli_secret").get_attribute("data-copy")
    assert secret and len(secret) >= 8, secret
    page.screenshot(path=os.path.join(shots, "oidc-profile.png"), full_page=True)
    page.click("#renew_cli_secret")
    expect(page.locator(".notice.ok")).to_be_visible()
    assert page.locator("#copy_cli_secret").get_attribute("data-copy") != secret
    page.click("#log_out")
    expect(page).to_have_url(base + "/harbor/sign-in")
    log("single sign-on through the OpenID provider: ok")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    shots = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "docs/screenshots")
    for tool in (binary, CHROMIUM, "skopeo", "umoci"):
        require(tool)
    if not os.environ.get("BERTH_TEST_OIDC_URL"):
        sys.exit("portal-test: BERTH_TEST_OIDC_URL is not set (scripts/test starts the OpenID provider)")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="berth-portal-test.")
    port = free_port()
    host = f"127.0.0.1:{port}"
    base = f"http://{host}"
    global LAYOUT
    LAYOUT = build_image(work)
    server = start_berth(binary, work, port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            clipboard_ok = True
            try:
                context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
            except Exception as err:  # the data attributes are still checked
                log(f"clipboard permissions not granted ({err}); checking data attributes only")
                clipboard_ok = False
            page = context.new_page()
            page.set_default_timeout(10_000)
            scenario(page, base, host, shots, clipboard_ok)
            # Single sign-on needs a registry without local users: one of its own.
            oidc_port = free_port()
            oidc_base = f"http://127.0.0.1:{oidc_port}"
            oidc_work = os.path.join(work, "sso")
            os.makedirs(oidc_work)
            oidc_server = start_berth(binary, oidc_work, oidc_port)
            try:
                sso = browser.new_context(viewport={"width": 1280, "height": 800})
                sso_page = sso.new_page()
                sso_page.set_default_timeout(10_000)
                oidc_scenario(sso_page, oidc_base, shots)
            finally:
                oidc_server.terminate()
                oidc_server.wait(timeout=30)
            browser.close()
    except BaseException:
        with open(os.path.join(work, "server.log")) as f:
            sys.stderr.write("portal-test: the server's log:\n" + f.read()[-4000:])
        raise
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    log(f"passed; screenshots in {shots}")


LAYOUT = None

if __name__ == "__main__":
    main()
