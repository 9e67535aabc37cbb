//! The `configurations` table: Harbor's system configuration, one JSON value per key.

use berth_domain::model::{ConfigValue, Configuration};
use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;

/// Access to the `configurations` table.
pub struct Configurations<'a>(&'a Store);

impl Store {
    /// The configurations repository.
    pub fn configurations(&self) -> Configurations<'_> {
        Configurations(self)
    }
}

fn decode(text: &str) -> Option<ConfigValue> {
    match serde_json::from_str::<serde_json::Value>(text).ok()? {
        serde_json::Value::String(s) => Some(ConfigValue::String(s)),
        serde_json::Value::Bool(b) => Some(ConfigValue::Bool(b)),
        serde_json::Value::Number(n) => n.as_i64().map(ConfigValue::Int),
        _ => None,
    }
}

fn encode(value: &ConfigValue) -> String {
    match value {
        ConfigValue::String(s) => serde_json::Value::String(s.clone()).to_string(),
        ConfigValue::Bool(b) => b.to_string(),
        ConfigValue::Int(i) => i.to_string(),
    }
}

impl Configurations<'_> {
    /// The configuration in effect: defaults overlaid by what is stored.
    pub async fn load(&self) -> StoreResult<Configuration> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, value FROM configurations")
            .fetch_all(&self.0.pool)
            .await?;
        Ok(Configuration::from_stored(rows.into_iter().filter_map(
            |(name, value)| decode(&value).map(|v| (name, v)),
        )))
    }

    /// Stores every given item in one transaction.
    pub async fn save(&self, items: &[(&str, ConfigValue)]) -> StoreResult<()> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        for (name, value) in items {
            sqlx::query(
                "INSERT INTO configurations (name, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(*name)
            .bind(encode(value))
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
