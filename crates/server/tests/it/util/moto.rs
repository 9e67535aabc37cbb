//! moto's server (`python3 -m moto.server`, from `moto[server]` on PyPI): S3
//! with STS and IAM, enforcing signatures after its first few requests, so a
//! request signed with keys STS never issued is refused.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// The account moto's roles live in.
pub const MOTO_ACCOUNT: &str = "123456789012";

/// A moto server on a loopback port of its own; killed when dropped.
pub struct Moto {
    child: Child,
    port: u16,
    tls: bool,
}

impl Moto {
    /// Starts moto (over TLS with `tls = Some((cert, key, ca))`) and, while it
    /// still takes unsigned requests, creates the role `role` (allowed every
    /// S3 action, assumable with web identity) and the bucket `bucket`. The
    /// request after those (the first `AssumeRoleWithWebIdentity`) is unsigned
    /// too; every later one must be signed with keys moto issued.
    pub fn start(dir: &Path, tls: Option<(&Path, &Path, &Path)>, role: &str, bucket: &str) -> Self {
        let port = free_port();
        let mut command = Command::new("python3");
        command
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            // The set-up's three requests and the first STS call.
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "4")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("moto.log")).unwrap());
        if let Some((cert, key, _)) = tls {
            command.arg("-c").arg(cert).arg("-k").arg(key);
        }
        let child = command
            .spawn()
            .expect("python3 -m moto.server: run `bash scripts/test`, which installs moto[server]");
        let moto = Self {
            child,
            port,
            tls: tls.is_some(),
        };
        moto.wait_until_up(dir);
        let setup = format!(
            r#"
import boto3, sys
kw = dict(endpoint_url=sys.argv[1], region_name="us-east-1", verify=sys.argv[2] or False,
          aws_access_key_id="AKIDSETUP", aws_secret_access_key="setup")
iam = boto3.client("iam", **kw)
iam.create_role(RoleName="{role}", AssumeRolePolicyDocument='{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"Federated":"test"}},"Action":"sts:AssumeRoleWithWebIdentity"}}]}}')
iam.put_role_policy(RoleName="{role}", PolicyName="s3", PolicyDocument='{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":"s3:*","Resource":"*"}}]}}')
boto3.client("s3", **kw).create_bucket(Bucket="{bucket}")
"#
        );
        let ca = tls.map(|(_, _, ca)| ca);
        let output = Command::new("python3")
            .arg("-c")
            .arg(setup)
            .arg(moto.url())
            .arg(ca.map(|p| p.display().to_string()).unwrap_or_default())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "moto set-up failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        moto
    }

    /// `http(s)://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The ARN of role `role`.
    pub fn role_arn(role: &str) -> String {
        format!("arn:aws:iam::{MOTO_ACCOUNT}:role/{role}")
    }

    /// Waits for the port to take connections (no request is sent: each counts).
    fn wait_until_up(&self, dir: &Path) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto did not start: {}",
                std::fs::read_to_string(dir.join("moto.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
