//! Puts the commit Berth is built from into `berth --version`: `BERTH_COMMIT`
//! when the build is given it (an image built without `.git`), else what
//! `git` says of the working tree, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=BERTH_COMMIT");
    let git = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.git");
    for watched in ["HEAD", "refs/heads", "packed-refs"] {
        let path = git.join(watched);
        if path.exists() {
            println!("cargo::rerun-if-changed={}", path.display());
        }
    }
    let commit = std::env::var("BERTH_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo::rustc-env=BERTH_COMMIT={commit}");
}
