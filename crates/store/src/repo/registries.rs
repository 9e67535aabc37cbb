//! The `registries` table: upstream registries of proxy-cache projects. The
//! access secret is sealed at rest and only opened for a request upstream.

use berth_domain::DomainError;
use berth_domain::model::registry::{Registry, RegistrySettings, SecretChange};
use berth_domain::query::{Paging, Query, SortKey};
use berth_domain::time;

use crate::Store;
use crate::error::{StoreError, StoreResult, conflict_on_unique};
use crate::repo::events::{self, NewEvent};
use crate::repo::flag;
use crate::repo::sql::{Column, Kind, Sql, order_clause};

#[derive(sqlx::FromRow)]
struct RegistryRow {
    id: i64,
    name: String,
    url: String,
    #[sqlx(rename = "type")]
    kind: String,
    description: String,
    insecure: i64,
    ca_certificate: String,
    credential_type: String,
    access_key: String,
    has_secret: i64,
    status: String,
    created_at: String,
    updated_at: String,
}

impl From<RegistryRow> for Registry {
    fn from(row: RegistryRow) -> Self {
        Registry {
            id: row.id,
            settings: RegistrySettings {
                name: row.name,
                url: row.url,
                kind: row.kind,
                description: row.description,
                insecure: flag(row.insecure),
                ca_certificate: row.ca_certificate,
                credential_type: row.credential_type,
                access_key: row.access_key,
                status: row.status,
            },
            has_secret: flag(row.has_secret),
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// The columns of a [`RegistryRow`]: the secret itself is never selected with them.
const REGISTRY_COLUMNS: &str = "id, name, url, type, description, insecure, ca_certificate, \
     credential_type, access_key, CAST(CASE WHEN access_secret = '' THEN 0 ELSE 1 END AS BIGINT) \
     AS has_secret, \
     status, created_at, updated_at";

/// What `q` filters on: Harbor's column and Go field names of its registry model.
const REGISTRY_FILTERS: &[Column] = &[
    Column {
        names: &["id", "ID"],
        sql: "id",
        kind: Kind::Int,
    },
    Column {
        names: &["name", "Name"],
        sql: "name",
        kind: Kind::Text,
    },
    Column {
        names: &["url", "URL"],
        sql: "url",
        kind: Kind::Text,
    },
    Column {
        names: &["type", "Type"],
        sql: "type",
        kind: Kind::Text,
    },
    Column {
        names: &["description", "Description"],
        sql: "description",
        kind: Kind::Text,
    },
    Column {
        names: &["credential_type", "CredentialType"],
        sql: "credential_type",
        kind: Kind::Text,
    },
    Column {
        names: &["health", "Status"],
        sql: "status",
        kind: Kind::Text,
    },
    Column {
        names: &["creation_time", "CreationTime"],
        sql: "created_at",
        kind: Kind::Text,
    },
    Column {
        names: &["update_time", "UpdateTime"],
        sql: "updated_at",
        kind: Kind::Text,
    },
];

const REGISTRY_SORT: &[(&[&str], &str)] = &[
    (&["id", "ID"], "id"),
    (&["name", "Name"], "name"),
    (&["url", "URL"], "url"),
    (&["type", "Type"], "type"),
    (&["description", "Description"], "description"),
    (&["health", "Status"], "status"),
    (&["creation_time", "CreationTime"], "created_at"),
    (&["update_time", "UpdateTime"], "updated_at"),
];

/// Where a registry's secret is kept: authenticated with the sealed value,
/// so it opens for this registry only.
fn secret_context(id: i64) -> String {
    format!("registries/{id}/access_secret")
}

fn duplicate(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("registry {name} already exists")
}

/// Harbor's message for a delete refused because projects use the registry.
fn in_use(id: i64) -> DomainError {
    DomainError::Precondition(format!(
        "the registry {id} is referenced by proxy cache project, cannot delete it"
    ))
}

fn in_policy(id: i64) -> DomainError {
    DomainError::Precondition(format!(
        "the registry {id} is referenced by replication policies, cannot delete it"
    ))
}

/// Access to the `registries` table.
pub struct Registries<'a>(&'a Store);

impl Store {
    /// The upstream registry repository.
    pub fn registries(&self) -> Registries<'_> {
        Registries(self)
    }
}

impl Registries<'_> {
    /// Creates a registry with `secret` (sealed; empty for none, and dropped
    /// without an access key); `Conflict` when the name is taken. Records
    /// [`events::REGISTRY_CREATED`] `by` the caller.
    pub async fn create(
        &self,
        settings: &RegistrySettings,
        secret: &str,
        by: &str,
    ) -> StoreResult<Registry> {
        let now = time::now();
        let mut tx = self.0.begin_write().await?;
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO registries (name, url, type, description, insecure, ca_certificate, \
             credential_type, access_key, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING id",
        )
        .bind(&settings.name)
        .bind(&settings.url)
        .bind(&settings.kind)
        .bind(&settings.description)
        .bind(i64::from(settings.insecure))
        .bind(&settings.ca_certificate)
        .bind(&settings.credential_type)
        .bind(&settings.access_key)
        .bind(&settings.status)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, duplicate(&settings.name)))?;
        if !secret.is_empty() && !settings.access_key.is_empty() {
            let sealed = self.0.seal_secret(&secret_context(id), secret)?;
            sqlx::query("UPDATE registries SET access_secret = $1 WHERE id = $2")
                .bind(sealed)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        let row: RegistryRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {REGISTRY_COLUMNS} FROM registries WHERE id = $1"
        )))
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        events::record(
            &mut tx,
            &registry_event(events::REGISTRY_CREATED, &settings.name, by),
        )
        .await?;
        tx.commit().await?;
        Ok(row.into())
    }

    /// Registry `id`.
    pub async fn get(&self, id: i64) -> StoreResult<Option<Registry>> {
        let row: Option<RegistryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {REGISTRY_COLUMNS} FROM registries WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.0.pool)
        .await?;
        Ok(row.map(Registry::from))
    }

    /// A page of the registries matching `query` (and, when given, whose name
    /// contains `name`, case-insensitively: the deprecated `name` parameter),
    /// by id unless `sort` says otherwise, and how many match.
    pub async fn list(
        &self,
        query: &Query,
        name: Option<&str>,
        sort: &[SortKey],
        paging: Paging,
    ) -> StoreResult<(i64, Vec<Registry>)> {
        let mut from = Sql::new(" FROM registries WHERE 1 = 1");
        from.query_terms(REGISTRY_FILTERS, query)?;
        if let Some(name) = name {
            from.push(" AND LOWER(name)").like(name);
        }
        let order = order_clause(REGISTRY_SORT, sort, "id", "id");
        let (rows, total): (Vec<RegistryRow>, i64) = from
            .fetch_page(&self.0.pool, REGISTRY_COLUMNS, &order, paging)
            .await?;
        Ok((total, rows.into_iter().map(Registry::from).collect()))
    }

    /// Stores `settings` for registry `id` and applies `secret` (a secret
    /// without an access key is dropped); `false` when the registry is gone,
    /// `Conflict` when the new name is taken. Records
    /// [`events::REGISTRY_UPDATED`] `by` the caller.
    pub async fn update(
        &self,
        id: i64,
        settings: &RegistrySettings,
        secret: &SecretChange,
        by: &str,
    ) -> StoreResult<bool> {
        let secret = match secret {
            _ if settings.access_key.is_empty() => SecretChange::Clear,
            SecretChange::Set(plain) if plain.is_empty() => SecretChange::Clear,
            other => other.clone(),
        };
        let sealed = match &secret {
            SecretChange::Set(plain) => Some(self.0.seal_secret(&secret_context(id), plain)?),
            SecretChange::Clear => Some(String::new()),
            SecretChange::Keep => None,
        };
        let mut tx = self.0.begin_write().await?;
        let done = sqlx::query(
            "UPDATE registries SET name = $1, url = $2, type = $3, description = $4, \
             insecure = $5, ca_certificate = $6, credential_type = $7, access_key = $8, \
             status = $9, updated_at = $10, access_secret = COALESCE($11, access_secret) \
             WHERE id = $12",
        )
        .bind(&settings.name)
        .bind(&settings.url)
        .bind(&settings.kind)
        .bind(&settings.description)
        .bind(i64::from(settings.insecure))
        .bind(&settings.ca_certificate)
        .bind(&settings.credential_type)
        .bind(&settings.access_key)
        .bind(&settings.status)
        .bind(time::now())
        .bind(sealed)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, duplicate(&settings.name)))?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        events::record(
            &mut tx,
            &registry_event(events::REGISTRY_UPDATED, &settings.name, by),
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes registry `id`; `false` when it was not there, `Precondition`
    /// while a project or a replication policy uses it. Records [`events::REGISTRY_DELETED`] `by`
    /// the caller.
    pub async fn delete(&self, id: i64, by: &str) -> StoreResult<bool> {
        let mut tx = self.0.begin_write().await?;
        let name: Option<String> = sqlx::query_scalar(
            "DELETE FROM registries WHERE id = $1 \
             AND NOT EXISTS (SELECT 1 FROM projects WHERE registry_id = $1) \
             AND NOT EXISTS (SELECT 1 FROM replication_policies \
             WHERE src_registry_id = $1 OR dest_registry_id = $1) RETURNING name",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|err| match &err {
            sqlx::Error::Database(db)
                if db.kind() == sqlx::error::ErrorKind::ForeignKeyViolation =>
            {
                StoreError::Domain(in_use(id))
            }
            _ => StoreError::Database(err),
        })?;
        let Some(name) = name else {
            let (users,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM projects WHERE registry_id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            if users > 0 {
                return Err(in_use(id).into());
            }
            let (policies,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM replication_policies \
                 WHERE src_registry_id = $1 OR dest_registry_id = $1",
            )
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
            if policies > 0 {
                return Err(in_policy(id).into());
            }
            return Ok(false);
        };
        events::record(
            &mut tx,
            &registry_event(events::REGISTRY_DELETED, &name, by),
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The plain access secret of registry `id`, for a request upstream:
    /// `None` when the registry is gone or keeps no secret. A secret sealed
    /// with another key is an error ([`StoreError::Secret`]), never garbage.
    pub async fn access_secret(&self, id: i64) -> StoreResult<Option<String>> {
        let stored: Option<String> =
            sqlx::query_scalar("SELECT access_secret FROM registries WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.0.pool)
                .await?;
        match stored.filter(|s| !s.is_empty()) {
            Some(sealed) => Ok(Some(self.0.open_secret(&secret_context(id), &sealed)?)),
            None => Ok(None),
        }
    }
}

/// The event of a change to registry `name`.
fn registry_event(kind: &'static str, name: &str, by: &str) -> NewEvent {
    NewEvent {
        kind,
        project_id: None,
        resource: name.to_string(),
        actor: by.to_string(),
        digest: None,
        detail: None,
    }
}
