//! The test harness: a `TestApp` per test on a fresh database, request helpers,
//! and the real binary on a loopback port.

mod app;
mod certs;
mod docker_registry;
mod forward_proxy;
mod moto;
mod oidc;
mod receiver;
mod request;
mod served;

pub use app::{
    ADMIN_PASSWORD, Backend, CONFIG_SECRET_KEY, JWT_SECRET, MASTER_KEY, Storage, TestApp,
    database_url, make_schedules_due, postgres_database_url, s3_blob_store, s3_blob_store_url,
    s3_client,
};
pub use certs::{Purpose, TestCa};
pub use docker_registry::{DockerRegistry, PeerOptions};
pub use forward_proxy::ForwardProxy;
pub use moto::Moto;
pub use oidc::{CookieJar, OidcProvider, location, manual_client};
pub use receiver::{Received, Receiver};
pub use request::TestResponse;
pub use served::{BERTH_BIN, RefusedPort, ServedBerth, free_port};

/// Defines one async test that runs once on SQLite and once on PostgreSQL:
/// `backend_test!(async fn name(app) { ... })` gives `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! backend_test {
    ($(#[$meta:meta])* async fn $name:ident($app:ident) $body:block) => {
        $crate::backend_test!(@module [$(#[$meta])*] $name $app $body {});
    };
    (@module [$($meta:tt)*] $name:ident $app:ident $body:block { $($more:tt)* }) => {
        $($meta)*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($app: $crate::util::TestApp) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run($crate::util::TestApp::new($crate::util::Backend::Sqlite).await).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run($crate::util::TestApp::new($crate::util::Backend::Postgres).await).await
            }

            $($more)*
        }
    };
}
pub use request::RequestBuilder;

/// [`backend_test!`] for registry content: once on SQLite and once on
/// PostgreSQL with blobs in a directory, and once on PostgreSQL with blobs in
/// an S3 bucket (`name::s3`), the way several instances run.
#[macro_export]
macro_rules! registry_test {
    ($(#[$meta:meta])* async fn $name:ident($app:ident) $body:block) => {
        $crate::backend_test!(@module [$(#[$meta])*] $name $app $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn s3() {
                run($crate::util::TestApp::with_storage(
                    $crate::util::Backend::Postgres,
                    $crate::util::Storage::S3,
                )
                .await)
                .await
            }
        });
    };
}
