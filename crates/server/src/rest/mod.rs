//! The generator-rest API (generator-rest.md): users, sign-in, password resets
//! and articles, mounted at the root (`/users`, `/auth`, `/password-resets`,
//! `/articles`). Errors render as the reference's ([`crate::error::RestError`]).

mod articles;
mod auth;
mod input;
mod password_resets;
mod social;
mod users;
mod views;

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower_http::cors::CorsLayer;

use crate::operations::Routes;
use crate::outbound::{RestServices, cors_origins};

/// The root routes of the generator-rest API, with its CORS layer.
pub fn routes(services: &RestServices) -> Routes {
    let routes = Routes::new(crate::operations::Surface::Rest)
        .merge(users::routes())
        // Sign-in answers carry a token: never cached.
        .merge(
            auth::routes()
                .map_router(|r| r.layer(middleware::map_response(crate::headers::no_store))),
        )
        // `GET /password-resets/:token` answers with the reset token.
        .merge(
            password_resets::routes()
                .map_router(|r| r.layer(middleware::map_response(crate::headers::no_store))),
        )
        .merge(articles::routes());
    match cors_origins(&services.config.cors_origins).ok().flatten() {
        Some(origin) => routes.map_router(|router| {
            router
                .layer(
                    CorsLayer::new()
                        .allow_origin(origin)
                        .allow_methods([
                            Method::GET,
                            Method::HEAD,
                            Method::PUT,
                            Method::PATCH,
                            Method::POST,
                            Method::DELETE,
                        ])
                        .allow_headers(tower_http::cors::AllowHeaders::mirror_request()),
                )
                .layer(middleware::from_fn(preflight_no_content))
        }),
        None => routes,
    }
}

/// The `cors` package answers preflights 204; tower-http answers 200.
async fn preflight_no_content(request: Request, next: Next) -> Response {
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = next.run(request).await;
    if preflight && response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}
