//! generator-rest's JSON shapes (generator-rest.md §5): key order as the
//! reference writes them, absent values omitted, ids as decimal strings.

use berth_domain::model::{Article, User};
use berth_domain::rest_query::Projection;
use serde::Serialize;

/// A user's public (`{id, name, picture}`) or full (`+ email, createdAt`) view.
#[derive(Debug, Serialize)]
pub struct UserView {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    picture: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<String>,
    #[serde(rename = "createdAt", skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
}

impl UserView {
    /// `{id, name, picture}`: what anyone may see, and what lists show.
    pub fn public(user: &User) -> Self {
        Self {
            id: Some(user.id.to_string()),
            name: user.realname.clone(),
            picture: user.picture.clone(),
            email: None,
            created_at: None,
        }
    }

    /// `{id, name, picture, email, createdAt}`: for the user themself and admins.
    pub fn full(user: &User) -> Self {
        Self {
            email: user.email.clone(),
            created_at: Some(user.created_at.clone()),
            ..Self::public(user)
        }
    }

    /// Drops the keys a `fields` projection leaves out.
    pub fn project(mut self, fields: &Projection) -> Self {
        keep(&mut self.id, fields, "id");
        keep(&mut self.name, fields, "name");
        keep(&mut self.picture, fields, "picture");
        keep(&mut self.email, fields, "email");
        keep(&mut self.created_at, fields, "createdAt");
        self
    }
}

fn keep<T>(value: &mut Option<T>, fields: &Projection, key: &str) {
    if !fields.keeps(key) {
        *value = None;
    }
}

/// `{id, user, title, content, createdAt, updatedAt}`.
#[derive(Debug, Serialize)]
pub struct ArticleView {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<UserView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(rename = "createdAt", skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
    #[serde(rename = "updatedAt", skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
}

impl ArticleView {
    /// The article with its author's view (`{id}` if the author row is missing).
    pub fn new(article: &Article, author: Option<UserView>) -> Self {
        let author = author.unwrap_or(UserView {
            id: Some(article.user_id.to_string()),
            name: None,
            picture: None,
            email: None,
            created_at: None,
        });
        Self {
            id: Some(article.id.to_string()),
            user: Some(author),
            title: article.title.clone(),
            content: article.content.clone(),
            created_at: Some(article.created_at.clone()),
            updated_at: Some(article.updated_at.clone()),
        }
    }

    /// Drops the keys a `fields` projection leaves out.
    pub fn project(mut self, fields: &Projection) -> Self {
        keep(&mut self.id, fields, "id");
        keep(&mut self.user, fields, "user");
        keep(&mut self.title, fields, "title");
        keep(&mut self.content, fields, "content");
        keep(&mut self.created_at, fields, "createdAt");
        keep(&mut self.updated_at, fields, "updatedAt");
        self
    }
}

/// `{token, user}` of a sign-in.
#[derive(Debug, Serialize)]
pub struct AuthView {
    /// The signed user token.
    pub token: String,
    /// The full view of the user.
    pub user: UserView,
}
