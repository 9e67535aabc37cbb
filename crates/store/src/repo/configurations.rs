//! The `configurations` table: Harbor's system configuration, one JSON value per key.
//! Password items are sealed at rest (see `berth_domain::sealing`): written
//! sealed, opened on load, and plain rows of earlier versions sealed at start.

use berth_domain::model::configuration::{ConfigType, find_key};
use berth_domain::model::{ConfigValue, Configuration};
use berth_domain::sealing::is_sealed;
use berth_domain::time;

use crate::Store;
use crate::error::StoreResult;
use crate::repo::events::{self, NewEvent};

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

/// Whether `name` is a password item, kept sealed.
fn is_secret(name: &str) -> bool {
    find_key(name).is_some_and(|key| key.kind == ConfigType::Password)
}

/// Where a sealed item is kept: authenticated with its value.
fn context(name: &str) -> String {
    format!("configurations/{name}")
}

impl Configurations<'_> {
    /// The configuration in effect: defaults overlaid by what is stored, with
    /// password items opened. A password sealed with another key is an error
    /// ([`crate::StoreError::Secret`]), never garbage.
    pub async fn load(&self) -> StoreResult<Configuration> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, value FROM configurations")
            .fetch_all(&self.0.pool)
            .await?;
        let mut items = Vec::with_capacity(rows.len());
        for (name, text) in rows {
            let value = match decode(&text) {
                Some(ConfigValue::String(s)) if is_secret(&name) => {
                    ConfigValue::String(self.0.open_secret(&context(&name), &s)?)
                }
                Some(value) => value,
                None => continue,
            };
            items.push((name, value));
        }
        Ok(Configuration::from_stored(items))
    }

    /// Stores every given item in one transaction, sealing password items.
    pub async fn save(&self, items: &[(&str, ConfigValue)]) -> StoreResult<()> {
        self.write(items, None).await
    }

    /// [`Self::save`] as a change `by` someone makes: the same transaction
    /// records [`events::CONFIGURATION_CHANGED`] naming the items.
    pub async fn change(&self, items: &[(&str, ConfigValue)], by: &str) -> StoreResult<()> {
        self.write(items, Some(by)).await
    }

    async fn write(&self, items: &[(&str, ConfigValue)], by: Option<&str>) -> StoreResult<()> {
        let now = time::now();
        let mut texts = Vec::with_capacity(items.len());
        for (name, value) in items {
            let value = match value {
                ConfigValue::String(s) if is_secret(name) && !s.is_empty() => {
                    ConfigValue::String(self.0.seal_secret(&context(name), s)?)
                }
                other => other.clone(),
            };
            texts.push((*name, encode(&value)));
        }
        let mut tx = self.0.begin_write().await?;
        for (name, text) in &texts {
            sqlx::query(
                "INSERT INTO configurations (name, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(*name)
            .bind(text)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(by) = by {
            let names: Vec<&str> = items.iter().map(|(name, _)| *name).collect();
            let event = NewEvent {
                kind: events::CONFIGURATION_CHANGED,
                project_id: None,
                resource: names.join(","),
                actor: by.to_string(),
                digest: None,
                detail: None,
            };
            events::record(&mut tx, &event).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Seals every password item still stored in plain text (rows written
    /// before sealing existed) and checks that every sealed one opens with this
    /// store's key; returns how many rows it sealed. Run at every start: a SQL
    /// migration cannot encrypt. Idempotent, and safe while other instances
    /// run: each row is replaced only if it still holds the plain text read.
    pub async fn seal_plain_secrets(&self) -> StoreResult<usize> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, value FROM configurations")
            .fetch_all(&self.0.pool)
            .await?;
        let mut sealed = 0;
        for (name, text) in rows.into_iter().filter(|(name, _)| is_secret(name)) {
            let Some(ConfigValue::String(value)) = decode(&text) else {
                continue;
            };
            if is_sealed(&value) {
                self.0.open_secret(&context(&name), &value)?;
                continue;
            }
            if value.is_empty() {
                continue;
            }
            let replacement = encode(&ConfigValue::String(
                self.0.seal_secret(&context(&name), &value)?,
            ));
            let done = sqlx::query(
                "UPDATE configurations SET value = $1, updated_at = $2 WHERE name = $3 AND value = $4",
            )
            .bind(&replacement)
            .bind(time::now())
            .bind(&name)
            .bind(&text)
            .execute(&self.0.pool)
            .await?;
            sealed += usize::try_from(done.rows_affected()).unwrap_or(0);
        }
        Ok(sealed)
    }

    /// The text stored for `name`, exactly as kept (sealed items stay sealed);
    /// `None` when the item was never written. For checks and tools.
    pub async fn stored_text(&self, name: &str) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM configurations WHERE name = $1")
                .bind(name)
                .fetch_optional(&self.0.pool)
                .await?,
        )
    }

    /// Writes the text of one item exactly as given: no sealing, no checks.
    /// Only for tools and upgrade tests that reproduce rows of earlier versions.
    pub async fn store_text(&self, name: &str, text: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO configurations (name, value, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(text)
        .bind(time::now())
        .execute(&self.0.pool)
        .await?;
        Ok(())
    }
}
