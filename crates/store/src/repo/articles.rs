//! The `articles` table: generator-rest's example resource.

use berth_domain::model::Article;
use berth_domain::rest_query::ListQuery;
use berth_domain::time;

use crate::Store;
use crate::changes::Topic;
use crate::error::StoreResult;
use crate::repo::rest_list;

const ARTICLE_COLUMNS: &str = "id, user_id, title, content, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct ArticleRow {
    id: i64,
    user_id: i64,
    title: Option<String>,
    content: Option<String>,
    created_at: String,
    updated_at: String,
}

impl From<ArticleRow> for Article {
    fn from(row: ArticleRow) -> Self {
        Article {
            id: row.id,
            user_id: row.user_id,
            title: row.title,
            content: row.content,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// An article's writable fields.
#[derive(Debug, Clone, Default)]
pub struct ArticleFields {
    /// Title; `None` stores NULL.
    pub title: Option<String>,
    /// Content; `None` stores NULL.
    pub content: Option<String>,
    /// Normalized title and content, for `q`.
    pub keywords: String,
}

/// Access to the `articles` table.
pub struct Articles<'a>(&'a Store);

impl Store {
    /// The articles repository.
    pub fn articles(&self) -> Articles<'_> {
        Articles(self)
    }
}

/// Wire sort keys of articles and their columns.
fn sort_column(field: &str) -> Option<&'static str> {
    match field {
        "id" => Some("id"),
        "createdAt" => Some("created_at"),
        "updatedAt" => Some("updated_at"),
        "title" => Some("COALESCE(title, '')"),
        "content" => Some("COALESCE(content, '')"),
        "user" => Some("user_id"),
        _ => None,
    }
}

impl Articles<'_> {
    /// Creates an article by `user_id`.
    pub async fn create(&self, user_id: i64, fields: &ArticleFields) -> StoreResult<Article> {
        let sql = format!(
            "INSERT INTO articles (user_id, title, content, keywords, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5) RETURNING {ARTICLE_COLUMNS}"
        );
        let row: ArticleRow = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .bind(&fields.title)
            .bind(&fields.content)
            .bind(&fields.keywords)
            .bind(time::now())
            .fetch_one(&self.0.pool)
            .await?;
        self.0.changes().bump(Topic::Articles);
        Ok(row.into())
    }

    /// The article with this id.
    pub async fn find(&self, id: i64) -> StoreResult<Option<Article>> {
        let sql = format!("SELECT {ARTICLE_COLUMNS} FROM articles WHERE id = $1");
        let row: Option<ArticleRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.0.pool)
            .await?;
        Ok(row.map(Article::from))
    }

    /// One page of articles, filtered by `q` over title and content, sorted by `sort`.
    pub async fn list(&self, query: &ListQuery) -> StoreResult<Vec<Article>> {
        let (sql, pattern) =
            rest_list::list_sql(ARTICLE_COLUMNS, "articles", "1 = 1", query, sort_column);
        let mut select = sqlx::query_as::<_, ArticleRow>(sqlx::AssertSqlSafe(sql));
        if let Some(pattern) = pattern {
            select = select.bind(pattern);
        }
        let rows = select.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(Article::from).collect())
    }

    /// Replaces title and content (an absent one becomes NULL); `None` if the article is gone.
    pub async fn update(&self, id: i64, fields: &ArticleFields) -> StoreResult<Option<Article>> {
        let sql = format!(
            "UPDATE articles SET title = $1, content = $2, keywords = $3, updated_at = $4 \
             WHERE id = $5 RETURNING {ARTICLE_COLUMNS}"
        );
        let row: Option<ArticleRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&fields.title)
            .bind(&fields.content)
            .bind(&fields.keywords)
            .bind(time::now())
            .bind(id)
            .fetch_optional(&self.0.pool)
            .await?;
        self.0.changes().bump(Topic::Articles);
        Ok(row.map(Article::from))
    }

    /// Deletes the article; whether it existed.
    pub async fn delete(&self, id: i64) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM articles WHERE id = $1")
            .bind(id)
            .execute(&self.0.pool)
            .await?;
        self.0.changes().bump(Topic::Articles);
        Ok(done.rows_affected() == 1)
    }
}
