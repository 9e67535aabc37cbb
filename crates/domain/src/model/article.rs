//! generator-rest's example resource: articles with an author.

/// A stored article.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Article {
    /// The REST `id` as a decimal string.
    pub id: i64,
    /// The author (REST `user`).
    pub user_id: i64,
    /// Title; `None` when absent.
    pub title: Option<String>,
    /// Content; `None` when absent.
    pub content: Option<String>,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
}
