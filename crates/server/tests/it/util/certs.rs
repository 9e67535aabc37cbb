//! A certificate authority for tests, made with the `openssl` command, and
//! certificates it signs for 127.0.0.1 (servers) or for clients.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `command`, failing the test with its output when it fails.
fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    /// A server at 127.0.0.1.
    Server,
    /// A client (mutual TLS).
    Client,
}

/// A CA whose key and certificate live in a directory.
pub struct TestCa {
    dir: PathBuf,
}

/// An elliptic-curve key, unencrypted.
const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

impl TestCa {
    /// A new CA in `dir` (`ca.pem`, `ca.key`).
    pub fn new(dir: &Path) -> Self {
        run(Command::new("openssl")
            .args(["req", "-x509"])
            .args(EC_KEY)
            .arg("-keyout")
            .arg(dir.join("ca.key"))
            .arg("-out")
            .arg(dir.join("ca.pem"))
            .args(["-days", "2", "-subj", "/CN=berth test CA"]));
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// The CA certificate's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The CA certificate (PEM).
    pub fn pem(&self) -> String {
        std::fs::read_to_string(self.path()).unwrap()
    }

    /// A certificate with the common name `name` signed by this CA, and its
    /// key: (`<name>.pem`, `<name>.key`) in the CA's directory.
    pub fn issue(&self, name: &str, purpose: Purpose) -> (PathBuf, PathBuf) {
        let path = |suffix: &str| self.dir.join(format!("{name}.{suffix}"));
        run(Command::new("openssl")
            .arg("req")
            .args(EC_KEY)
            .arg("-keyout")
            .arg(path("key"))
            .arg("-out")
            .arg(path("csr"))
            .args(["-subj", &format!("/CN={name}")]));
        let extensions = match purpose {
            Purpose::Server => {
                "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
                 keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
            }
            Purpose::Client => {
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n"
            }
        };
        std::fs::write(path("ext"), extensions).unwrap();
        run(Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-in"])
            .arg(path("csr"))
            .arg("-CA")
            .arg(self.path())
            .arg("-CAkey")
            .arg(self.dir.join("ca.key"))
            .arg("-CAcreateserial")
            .arg("-extfile")
            .arg(path("ext"))
            .arg("-out")
            .arg(path("pem")));
        (path("pem"), path("key"))
    }
}
