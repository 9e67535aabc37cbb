//! `/articles` (generator-rest.md §4.4, the configuration of §1): create with a
//! user token, read by anyone, update and delete by the author or an admin.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::{Article, User};
use berth_domain::rest_query::keywords_of;
use berth_store::Topic;
use berth_store::repo::articles::ArticleFields;
use bytes::Bytes;

use super::input::{PathParam, RestInput, not_found, parse_id};
use super::views::{ArticleView, UserView};
use crate::error::{ApiError, RestResult};
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Rest)
        .get("/articles", index_articles)
        .post("/articles", create_article)
        .get("/articles/{id}", show_article)
        .put("/articles/{id}", update_article)
        .delete("/articles/{id}", destroy_article)
}

/// `title` and `content` as given (absent ones stored as NULL), with their keywords.
fn article_fields(input: &RestInput) -> ArticleFields {
    let title = input.field("title");
    let content = input.field("content");
    ArticleFields {
        keywords: keywords_of([title.as_deref(), content.as_deref()]),
        title,
        content,
    }
}

async fn find_article(state: &AppState, id: &str) -> RestResult<Article> {
    let id = parse_id(id).ok_or_else(not_found)?;
    Ok(state
        .store
        .articles()
        .find(id)
        .await?
        .ok_or_else(not_found)?)
}

/// The author of one article, tombstones included.
async fn author_of(state: &AppState, article: &Article) -> RestResult<Option<User>> {
    let mut users = state
        .store
        .users()
        .find_many_including_deleted(&[article.user_id])
        .await?;
    Ok(users.pop())
}

/// `authorOrAdmin`: the caller wrote the article or is an administrator.
fn author_or_admin(caller: &User, article: &Article) -> RestResult<()> {
    if caller.id == article.user_id || caller.is_sysadmin() {
        Ok(())
    } else {
        Err(ApiError::unauthorized().into())
    }
}

/// `POST /articles` (token): 201; `user` is the creator's full view.
pub async fn create_article(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<(StatusCode, Json<ArticleView>)> {
    let caller = input.require_user(&state).await?;
    let article = state
        .store
        .articles()
        .create(caller.id, &article_fields(&input))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ArticleView::new(&article, Some(UserView::full(&caller)))),
    ))
}

/// `GET /articles` (anyone): one page, authors as public views, fetched in one
/// batched query. Rendered pages are kept until articles or their authors change.
pub async fn index_articles(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<Response> {
    let query = input.list_query()?;
    let pages = &state.rest.article_pages;
    let generation = state.store.changes().generation(Topic::Articles);
    if let Some(body) = generation.and_then(|g| pages.get(&query, g)) {
        return Ok(json_body(body));
    }
    let articles = state.store.articles().list(&query).await?;
    let mut author_ids: Vec<i64> = articles.iter().map(|a| a.user_id).collect();
    author_ids.sort_unstable();
    author_ids.dedup();
    let authors: HashMap<i64, User> = state
        .store
        .users()
        .find_many_including_deleted(&author_ids)
        .await?
        .into_iter()
        .map(|u| (u.id, u))
        .collect();
    let views: Vec<ArticleView> = articles
        .iter()
        .map(|a| {
            let author = authors.get(&a.user_id).map(UserView::public);
            ArticleView::new(a, author).project(&query.fields)
        })
        .collect();
    let body = Bytes::from(serde_json::to_vec(&views).map_err(ApiError::internal)?);
    if let Some(generation) = generation {
        pages.put(query, generation, body.clone());
    }
    Ok(json_body(body))
}

/// A `200 application/json` response of an already rendered body.
fn json_body(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /articles/:id` (anyone): the article with its author's public view.
pub async fn show_article(
    State(state): State<AppState>,
    id: PathParam,
) -> RestResult<Json<ArticleView>> {
    let article = find_article(&state, id.as_str()).await?;
    let author = author_of(&state, &article).await?;
    Ok(Json(ArticleView::new(
        &article,
        author.as_ref().map(UserView::public),
    )))
}

/// `PUT /articles/:id` (author or admin): replaces `title` and `content`;
/// `user` is the author's full view.
pub async fn update_article(
    State(state): State<AppState>,
    id: PathParam,
    input: RestInput,
) -> RestResult<Json<ArticleView>> {
    let caller = input.require_user(&state).await?;
    let article = find_article(&state, id.as_str()).await?;
    author_or_admin(&caller, &article)?;
    let article = state
        .store
        .articles()
        .update(article.id, &article_fields(&input))
        .await?
        .ok_or_else(not_found)?;
    let author = author_of(&state, &article).await?;
    Ok(Json(ArticleView::new(
        &article,
        author.as_ref().map(UserView::full),
    )))
}

/// `DELETE /articles/:id` (author or admin): 204.
pub async fn destroy_article(
    State(state): State<AppState>,
    id: PathParam,
    input: RestInput,
) -> RestResult<StatusCode> {
    let caller = input.require_user(&state).await?;
    let article = find_article(&state, id.as_str()).await?;
    author_or_admin(&caller, &article)?;
    if !state.store.articles().delete(article.id).await? {
        return Err(not_found().into());
    }
    Ok(StatusCode::NO_CONTENT)
}
