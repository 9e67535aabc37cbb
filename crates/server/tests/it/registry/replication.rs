//! Replication's copy step (`service::replication::push_artifact`) against
//! docker-registry 2.8.2 behind htpasswd: an image and a multi-arch index
//! pushed from Berth arrive whole (skopeo reads them back with the same
//! digests); a second copy finds everything there and sends nothing.

use super::clients::{require, run as run_command, skopeo};
use super::{digest_of, push_image, put_manifest};
use crate::registry_test;
use crate::util::{DockerRegistry, PeerOptions};

const USER: &str = "mirror";
const PASSWORD: &str = "mirror-secret";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

fn inspect_digest(peer: &DockerRegistry, reference: &str) -> String {
    let host = peer.url().replace("http://", "");
    let raw = run_command(
        skopeo()
            .args(["inspect", "--raw", "--tls-verify=false", "--creds"])
            .arg(format!("{USER}:{PASSWORD}"))
            .arg(format!("docker://{host}/{reference}")),
    );
    digest_of(raw.as_bytes())
}

registry_test!(
    async fn an_image_and_an_index_arrive_whole_at_a_peer(app) {
        require("skopeo");
        let peer = DockerRegistry::start(PeerOptions {
            basic_auth: Some((USER.into(), PASSWORD.into())),
            tls: false,
        })
        .await;
        let (image_body, image) = push_image(&app, "library/app", "v1", &[b"first layer", &vec![9u8; 300_000]]).await;
        let (arm, arm_digest) = push_image(&app, "library/app", "arm", &[b"arm layer"]).await;
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": image,
                 "size": image_body.len(), "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": arm_digest,
                 "size": arm.len(), "platform": {"architecture": "arm64", "os": "linux"}},
            ],
        });
        let index = serde_json::to_vec(&index).unwrap();
        let res = put_manifest(&app, "library/app", "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, axum::http::StatusCode::CREATED, "{}", res.text());

        let remote = berth::upstream::Remote::new(&berth::upstream::Target {
            base: peer.url(),
            insecure: false,
            ca_certificate: "",
            credential: Some((USER, PASSWORD)),
        })
        .unwrap();
        let copied = berth::service::replication::push_artifact(&app.state, &remote, "library/app", "v1", "mirror/app")
            .await
            .unwrap();
        assert_eq!((copied.manifests, copied.blobs), (1, 3), "{copied:?}");
        assert_eq!(inspect_digest(&peer, "mirror/app:v1"), image);

        let copied = berth::service::replication::push_artifact(&app.state, &remote, "library/app", "multi", "mirror/app")
            .await
            .unwrap();
        assert_eq!(
            (copied.manifests, copied.manifests_present, copied.blobs),
            (2, 1, 2),
            "the index and the arm image; the first image was there: {copied:?}"
        );
        assert_eq!(inspect_digest(&peer, "mirror/app:multi"), digest_of(&index));
        assert_eq!(inspect_digest(&peer, &format!("mirror/app@{arm_digest}")), arm_digest);
        let pulled = tempfile::tempdir().unwrap();
        let host = peer.url().replace("http://", "");
        run_command(skopeo()
            .args(["copy", "--all", "--src-tls-verify=false", "--src-creds"])
            .arg(format!("{USER}:{PASSWORD}"))
            .arg(format!("docker://{host}/mirror/app:multi"))
            .arg(format!("oci:{}:multi", pulled.path().display())));

        let again = berth::service::replication::push_artifact(&app.state, &remote, "library/app", "multi", "mirror/app")
            .await
            .unwrap();
        assert_eq!((again.manifests, again.blobs, again.manifests_present), (0, 0, 1), "{again:?}");
    }
);
