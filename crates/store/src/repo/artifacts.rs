//! Artifacts, their tags and index references, as the management API shows
//! them: Harbor's listArtifacts filters, embedded lists batched per page.

use berth_domain::model::{Artifact, ArtifactReference, Label, Tag};
use berth_domain::query::{ArtifactFilter, Paging, Query, SortKey, TagFilter};
use berth_domain::time;

use crate::error::{StoreResult, conflict_on_unique};
use crate::repo::labels::LabelRow;
use crate::repo::page_starts;
use crate::repo::sql::{Column, Keyed, Kind, Sql, Total, order_clause};
use crate::{Backend, Store};

const ARTIFACT_COLUMNS: &str = "a.id, a.project_id, a.repository_id, r.name AS repository_name, a.digest, \
     a.manifest_media_type, a.media_type, a.artifact_type, a.type AS kind, a.size, a.icon, a.subject_digest, \
     a.accessory_type, a.push_time, a.pull_time, a.extra_attrs, a.annotations";

#[derive(sqlx::FromRow)]
struct ArtifactRow {
    id: i64,
    project_id: i64,
    repository_id: i64,
    repository_name: String,
    digest: String,
    manifest_media_type: String,
    media_type: String,
    artifact_type: String,
    kind: String,
    size: i64,
    icon: String,
    subject_digest: Option<String>,
    accessory_type: Option<String>,
    push_time: String,
    pull_time: String,
    extra_attrs: String,
    annotations: Option<String>,
}

impl From<ArtifactRow> for Artifact {
    fn from(r: ArtifactRow) -> Self {
        Self {
            id: r.id,
            project_id: r.project_id,
            repository_id: r.repository_id,
            repository_name: r.repository_name,
            digest: r.digest,
            manifest_media_type: r.manifest_media_type,
            media_type: r.media_type,
            artifact_type: r.artifact_type,
            kind: r.kind,
            size: r.size,
            icon: r.icon,
            subject_digest: r.subject_digest,
            accessory_type: r.accessory_type,
            push_time: r.push_time,
            pull_time: r.pull_time,
            extra_attrs: r.extra_attrs,
            annotations: r.annotations,
        }
    }
}

#[derive(sqlx::FromRow)]
struct TagRow {
    id: i64,
    repository_id: i64,
    artifact_id: i64,
    name: String,
    push_time: String,
    pull_time: String,
}

impl From<TagRow> for Tag {
    fn from(r: TagRow) -> Self {
        Self {
            id: r.id,
            repository_id: r.repository_id,
            artifact_id: r.artifact_id,
            name: r.name,
            push_time: r.push_time,
            pull_time: r.pull_time,
        }
    }
}

#[derive(sqlx::FromRow)]
struct ReferenceRow {
    parent_id: i64,
    child_id: i64,
    child_digest: String,
    platform: Option<String>,
    urls: Option<String>,
    annotations: Option<String>,
}

impl From<ReferenceRow> for ArtifactReference {
    fn from(r: ReferenceRow) -> Self {
        Self {
            parent_id: r.parent_id,
            child_id: r.child_id,
            child_digest: r.child_digest,
            platform: r.platform,
            urls: r.urls,
            annotations: r.annotations,
        }
    }
}

const fn column(names: &'static [&'static str], sql: &'static str, kind: Kind) -> Column {
    Column { names, sql, kind }
}

/// The artifact columns `q` filters on (harbor-api.md §4).
const ARTIFACT_Q_COLUMNS: &[Column] = &[
    column(&["id", "ID"], "a.id", Kind::Int),
    column(&["type", "Type"], "a.type", Kind::Text),
    column(&["media_type", "MediaType"], "a.media_type", Kind::Text),
    column(
        &["manifest_media_type", "ManifestMediaType"],
        "a.manifest_media_type",
        Kind::Text,
    ),
    column(
        &["artifact_type", "ArtifactType"],
        "a.artifact_type",
        Kind::Text,
    ),
    column(&["project_id", "ProjectID"], "a.project_id", Kind::Int),
    column(
        &["repository_id", "RepositoryID"],
        "a.repository_id",
        Kind::Int,
    ),
    // A listing reads one repository; its name is looked up only when filtered on.
    column(
        &["repository_name", "RepositoryName"],
        "(SELECT rn.name FROM repositories rn WHERE rn.id = a.repository_id)",
        Kind::Text,
    ),
    column(&["digest", "Digest"], "a.digest", Kind::Text),
    column(&["size", "Size"], "a.size", Kind::Int),
    column(&["icon", "Icon"], "a.icon", Kind::Text),
    column(&["push_time", "PushTime"], "a.push_time", Kind::Text),
    column(&["pull_time", "PullTime"], "a.pull_time", Kind::Text),
];

const ARTIFACT_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["id", "ID"], "a.id"),
    (&["type", "Type"], "a.type"),
    (&["media_type", "MediaType"], "a.media_type"),
    (
        &["manifest_media_type", "ManifestMediaType"],
        "a.manifest_media_type",
    ),
    (&["artifact_type", "ArtifactType"], "a.artifact_type"),
    (&["digest", "Digest"], "a.digest"),
    (&["size", "Size"], "a.size"),
    (&["push_time", "PushTime"], "a.push_time"),
    (&["pull_time", "PullTime"], "a.pull_time"),
];

/// The tag columns `q` filters on.
const TAG_Q_COLUMNS: &[Column] = &[
    column(&["id", "ID"], "t.id", Kind::Int),
    column(
        &["repository_id", "RepositoryID"],
        "t.repository_id",
        Kind::Int,
    ),
    column(&["artifact_id", "ArtifactID"], "t.artifact_id", Kind::Int),
    column(&["name", "Name"], "t.name", Kind::Text),
    column(&["push_time", "PushTime"], "t.push_time", Kind::Text),
    column(&["pull_time", "PullTime"], "t.pull_time", Kind::Text),
];

const TAG_SORT_COLUMNS: &[(&[&str], &str)] = &[
    (&["id", "ID"], "t.id"),
    (&["name", "Name"], "t.name"),
    (&["push_time", "PushTime"], "t.push_time"),
    (&["pull_time", "PullTime"], "t.pull_time"),
];

/// The repository column (migration 0011) that holds the total of a listing
/// with this filter, when one does: Harbor's base set, alone or with
/// `tags=*` or `tags=nil`.
fn listing_total(filter: &ArtifactFilter) -> Option<&'static str> {
    if filter.all || !filter.labels.is_empty() || !filter.query.terms.is_empty() {
        return None;
    }
    match filter.tags {
        None => Some("listed_count"),
        Some(TagFilter::Any) => Some("tagged_count"),
        Some(TagFilter::Nil) => Some("listed_count - tagged_count"),
        Some(TagFilter::Exact(_) | TagFilter::Fuzzy(_)) => None,
    }
}

/// How `q=tags=~<text>` finds the tags holding `text`, from the pieces of
/// tag names migration 0014 keeps (`tag_grams`).
#[derive(Debug, PartialEq, Eq)]
enum TagText {
    /// No tag holds the empty text.
    Empty,
    /// One to three characters: the tags with a piece starting with the
    /// text (for three, equal to it), exactly those holding it. The pieces
    /// carry their artifact, so neither tags nor names are read.
    Short,
    /// Four or more: the tags holding every trigram of the text, whose names
    /// are then checked whole.
    Trigrams(Vec<String>),
}

impl TagText {
    fn of(text: &str) -> Self {
        match text.chars().count() {
            0 => Self::Empty,
            1..=3 => Self::Short,
            _ => Self::Trigrams(trigrams(text)),
        }
    }
}

/// The distinct three-character pieces of `text`, as migration 0014 keeps
/// them for tag names (by character, as SQL's `substr` counts).
fn trigrams(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found: Vec<String> = chars.windows(3).map(|w| w.iter().collect()).collect();
    found.sort();
    found.dedup();
    found
}

/// Past every piece of at most three characters that starts with `text`:
/// pieces compare as UTF-8 bytes (SQLite's BINARY, PostgreSQL's "C"), and
/// U+10FFFF is the greatest character.
fn after_prefix(text: &str) -> String {
    format!("{text}\u{10FFFF}\u{10FFFF}")
}

/// The listing order `artifacts_listed_idx` (migration 0010) holds, which a
/// walk of that index yields without sorting.
fn listing_index_order() -> String {
    order_clause(ARTIFACT_SORT_COLUMNS, &[], "a.push_time DESC", "a.id DESC")
}

/// How many index entries a walk of the listing index may read per match
/// it saves reading by key: reading a match by key (then sorting them all)
/// costs about ten index entries walked and probed.
const WALK_GAIN: i64 = 10;

/// About `total` times the entries a walk of the listing index passes to
/// find a page of a short tag text's listing (`total` matches among `of`
/// artifacts): `of / total` entries per row it passes, from the page's
/// nearer end (as [`Sql::fetch_keyed_page`] does).
fn walk_times_total(total: i64, of: i64, paging: Paging) -> i64 {
    let (limit, offset) = paging.limit_offset().unwrap_or((total, 0));
    let nearer = offset.min((total - offset - limit).max(0));
    (nearer + limit).saturating_mul(of)
}

/// Whether a page of a short tag text's listing is found sooner by walking
/// the listing index in order and probing each artifact against the matches
/// than by reading every match.
fn walks(total: i64, of: i64, paging: Paging) -> bool {
    walk_times_total(total, of, paging) < WALK_GAIN.saturating_mul(total).saturating_mul(total)
}

/// At most this many matches are probed in a walk on PostgreSQL: the probe
/// is a hashed subplan, which PostgreSQL only builds while the matches fit
/// in `work_mem` (otherwise it would scan them once per artifact walked).
const PG_WALK_MATCHES: i64 = 50_000;

/// How a walk of the listing index, in order, checks each artifact it
/// reaches against a short tag text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Against the matches, read once: `+a.id IN (...)` on SQLite (no index
    /// on it), `(... IN ...) IS TRUE` on PostgreSQL (a hashed subplan rather
    /// than a join).
    Matches(Backend),
    /// Against the artifact's own tags, looked up by index as it is reached:
    /// for dense matches, whose page the walk finds long before the matches
    /// would all have been read.
    Tags(Backend),
}

/// How many matches reading costs as much as probing one artifact's tags:
/// on PostgreSQL at 100,000 tags (`scripts/bench artifacts`' data), reading
/// the matches of `~v9` into the walk's hash took about 0.27 us each, and a
/// walk probing tags for `~7` 2.7 us per artifact it passed (`EXPLAIN
/// ANALYZE` of both page queries; `docs/benchmarks.md`).
const PROBE_COST: i64 = 10;

/// Whether a page of a short tag text's listing is found sooner by a walk
/// probing each artifact's tags ([`Walk::Tags`]) than by reading every match.
fn probes_tags(total: i64, of: i64, paging: Paging) -> bool {
    walk_times_total(total, of, paging).saturating_mul(PROBE_COST) < total.saturating_mul(total)
}

/// Whose artifacts a listing lists: one repository's (listArtifacts) or
/// every repository's of a project (listArtifactsOfProject).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The repository of this id.
    Repository(i64),
    /// The repositories of the project of this id.
    Project(i64),
}

impl Scope {
    /// `<alias>.repository_id = <id>`, or for a project `<alias>.repository_id
    /// IN (<its repositories>)`: how tag rows and tag pieces (keyed by
    /// repository) are narrowed to the scope.
    fn repositories(self, sql: &mut Sql, alias: &str) {
        match self {
            Self::Repository(id) => {
                sql.push(alias).push(".repository_id = ").int(id);
            }
            Self::Project(id) => {
                sql.push(alias)
                    .push(".repository_id IN (SELECT rp.id FROM repositories rp WHERE rp.project_id = ")
                    .int(id)
                    .push(")");
            }
        }
    }
}

/// The tag-text half of the listing filter: ` IN (SELECT tg.artifact_id ...)`,
/// the artifacts with a tag holding the short `text`.
fn short_text_matches(sql: &mut Sql, scope: Scope, text: &str) {
    sql.push(" IN (SELECT tg.artifact_id FROM tag_grams tg WHERE ");
    scope.repositories(sql, "tg");
    sql.push(" AND tg.gram >= ")
        .text(text)
        .push(" AND tg.gram <= ")
        .text(after_prefix(text))
        .push(")");
}

/// The repository column counting the artifacts a listing with `filter`
/// draws from: every artifact with `base=*`, else the listed ones.
fn listed_of(filter: &ArtifactFilter) -> &'static str {
    if filter.all {
        "artifact_count"
    } else {
        "listed_count"
    }
}

/// `SELECT total, of`: the total of a short tag text's listing, and the
/// number of artifacts of the repository it is a share of. A listing of
/// the text alone counts its artifacts from the pieces (migration 0014)
/// without reading them: a tagged artifact is listed exactly when it is not
/// an accessory (migration 0010), and `artifacts_accessory_idx` holds the
/// accessories to take away. Other listings count their filter.
fn short_text_total(
    backend: Backend,
    repository_id: i64,
    filter: &ArtifactFilter,
    text: &str,
    listing: &Sql,
) -> Sql {
    let mut sql = Sql::new("SELECT ");
    if filter.labels.is_empty() && filter.query.terms.is_empty() {
        sql.push(
            "(SELECT COUNT(DISTINCT tg.artifact_id) FROM tag_grams tg WHERE tg.repository_id = ",
        )
        .int(repository_id)
        .push(" AND tg.gram >= ")
        .text(text)
        .push(" AND tg.gram <= ")
        .text(after_prefix(text))
        .push(") - (SELECT COUNT(*) FROM artifacts a WHERE a.repository_id = ")
        .int(repository_id)
        // On SQLite `+a.id` walks the accessories and probes the
        // matches, which it then reads only when there are accessories.
        .push(match backend {
            Backend::Sqlite => " AND a.accessory_type IS NOT NULL AND +a.id",
            Backend::Postgres => " AND a.accessory_type IS NOT NULL AND a.id",
        });
        short_text_matches(&mut sql, Scope::Repository(repository_id), text);
        sql.push(")");
    } else {
        sql.push("(").push_sql(&listing.count()).push(")");
    }
    sql.push(" AS total, (SELECT ")
        .push(listed_of(filter))
        .push(" FROM repositories WHERE id = ")
        .int(repository_id)
        .push(") AS of");
    sql
}

/// Whether the filter's matches come from a lookup of the repository's tags
/// rather than a scan (with `q`'s column terms, which are checked per match).
fn tags_looked_up(filter: &ArtifactFilter) -> bool {
    matches!(
        &filter.tags,
        Some(TagFilter::Exact(_) | TagFilter::Fuzzy(_))
    )
}

/// ` FROM artifacts a WHERE ...`: the artifacts of repository
/// `repository_id` that `filter` keeps. With `walk`, a short tag text's
/// matches are only probed, written so that the backend walks the listing
/// index in order instead of reading the matches by key (see [`Walk`]).
fn listing_filter(scope: Scope, filter: &ArtifactFilter, walk: Option<Walk>) -> StoreResult<Sql> {
    let mut sql = match scope {
        Scope::Repository(id) => {
            let mut sql = Sql::new(" FROM artifacts a WHERE a.repository_id = ");
            sql.int(id);
            sql
        }
        Scope::Project(id) => {
            let mut sql = Sql::new(" FROM artifacts a WHERE a.project_id = ");
            sql.int(id);
            sql
        }
    };
    // `listed` (kept by triggers, migration 0010): not an accessory, and
    // tagged or not a child of an index; one range of artifacts_listed_idx.
    if filter.all {
        sql.push(" AND a.accessory_type IS NULL");
    } else {
        sql.push(" AND a.listed = 1");
    }
    match &filter.tags {
        None => {}
        // Written as artifacts_tagged_idx's condition, so that it is used.
        Some(TagFilter::Any) => {
            sql.push(" AND a.tag_count > 0");
        }
        Some(TagFilter::Nil) => {
            sql.push(" AND a.tag_count = 0");
        }
        // Driven from the repository's tags, not probed once per artifact:
        // the pieces of tag names (migration 0014) give the tags holding the
        // text, or for a longer text every trigram of it.
        Some(TagFilter::Fuzzy(text)) => match TagText::of(text) {
            TagText::Empty => {
                sql.push(" AND 1 = 0");
            }
            TagText::Short => match walk {
                None => {
                    sql.push(" AND a.id");
                    short_text_matches(&mut sql, scope, text);
                }
                Some(Walk::Matches(Backend::Sqlite)) => {
                    sql.push(" AND +a.id");
                    short_text_matches(&mut sql, scope, text);
                }
                Some(Walk::Matches(Backend::Postgres)) => {
                    sql.push(" AND (a.id");
                    short_text_matches(&mut sql, scope, text);
                    sql.push(") IS TRUE");
                }
                Some(Walk::Tags(backend)) => {
                    sql.push(" AND EXISTS (SELECT 1 FROM tags t WHERE t.artifact_id = a.id AND ")
                        .push(match backend {
                            Backend::Sqlite => "instr(t.name, ",
                            Backend::Postgres => "strpos(t.name, ",
                        })
                        .text(text.as_str())
                        .push(") > 0)");
                }
            },
            TagText::Trigrams(trigrams) => {
                sql.push(" AND a.id IN (SELECT t.artifact_id FROM tags t WHERE ");
                scope.repositories(&mut sql, "t");
                sql.push(" AND t.id IN (SELECT tg.tag_id FROM tag_grams tg WHERE ");
                scope.repositories(&mut sql, "tg");
                sql.push(" AND tg.gram IN (");
                for (i, trigram) in trigrams.iter().enumerate() {
                    if i > 0 {
                        sql.push(", ");
                    }
                    sql.text(trigram.as_str());
                }
                sql.push(") GROUP BY tg.tag_id HAVING COUNT(*) = ")
                    .int(trigrams.len() as i64)
                    .push(") AND REPLACE(t.name, ")
                    .text(text.as_str())
                    .push(", '') <> t.name)");
            }
        },
        Some(TagFilter::Exact(name)) => {
            sql.push(" AND a.id IN (SELECT t.artifact_id FROM tags t WHERE ");
            scope.repositories(&mut sql, "t");
            sql.push(" AND t.name = ").text(name.as_str()).push(")");
        }
    }
    for label in &filter.labels {
        sql.push(" AND EXISTS (SELECT 1 FROM label_references lr WHERE lr.artifact_id = a.id AND lr.label_id = ")
            .int(*label)
            .push(")");
    }
    sql.query_terms(ARTIFACT_Q_COLUMNS, &filter.query)?;
    Ok(sql)
}

/// Access to artifacts, tags and references.
pub struct Artifacts<'a>(pub(crate) &'a Store);

impl Store {
    /// The artifacts repository.
    pub fn artifacts(&self) -> Artifacts<'_> {
        Artifacts(self)
    }
}

impl Artifacts<'_> {
    /// One page of artifacts of a repository and the total: Harbor's base set
    /// (or everything with `base=*`), the artifact-specific `tags`/`labels`
    /// conditions, then the column terms, `sort` and the page.
    pub async fn list_artifacts(
        &self,
        repository_id: i64,
        filter: &ArtifactFilter,
        sort: &[SortKey],
        paging: Paging,
    ) -> StoreResult<(Vec<Artifact>, i64)> {
        let order = order_clause(ARTIFACT_SORT_COLUMNS, sort, "a.push_time DESC", "a.id DESC");
        let short_text = match &filter.tags {
            Some(TagFilter::Fuzzy(text)) if TagText::of(text) == TagText::Short => Some(text),
            _ => None,
        };
        let mut sql = listing_filter(Scope::Repository(repository_id), filter, None)?;
        let total = match listing_total(filter) {
            Some(counter) => {
                let mut count = Sql::new("SELECT ");
                count
                    .push(counter)
                    .push(" AS total, listing_version FROM repositories WHERE id = ")
                    .int(repository_id);
                let found: Vec<(i64, i64)> = count.fetch_all(&self.0.pool).await?;
                let (total, version) = found.first().copied().unwrap_or_default();
                if order == listing_index_order()
                    && let Some(rows) = self
                        .deep_page(repository_id, counter, version, &sql, &order, paging, total)
                        .await?
                {
                    return Ok((rows.into_iter().map(Artifact::from).collect(), total));
                }
                Total::Kept(total)
            }
            // Counted first, so that the page's keys can come from a walk
            // of the listing index when the matches are dense in it.
            None if let Some(text) = short_text => {
                let backend = self.0.backend();
                let (total, of) = self
                    .short_text_counts(repository_id, filter, text, &sql)
                    .await?;
                let walk = if order != listing_index_order() {
                    None
                } else if probes_tags(total, of, paging) {
                    Some(Walk::Tags(backend))
                } else if walks(total, of, paging)
                    && (backend == Backend::Sqlite || total <= PG_WALK_MATCHES)
                {
                    Some(Walk::Matches(backend))
                } else {
                    None
                };
                if walk.is_some() {
                    sql = listing_filter(Scope::Repository(repository_id), filter, walk)?;
                }
                Total::Kept(total)
            }
            // PostgreSQL 15 plans a count along with a page as if the page's
            // LIMIT could end the walk early: for matches found by scanning
            // it probed per artifact, 109 ms against 40 ms counted first.
            // SQLite gains on every form.
            None if self.0.backend() == Backend::Sqlite || tags_looked_up(filter) => {
                Total::CountAlong
            }
            None => Total::Count,
        };
        self.fetch_page(sql, &order, paging, total).await
    }

    /// One page of the artifacts of every repository of project `project_id`
    /// and the total, with listArtifacts' filter, `sort` and paging; with
    /// `latest_in_repository`, only each repository's newest push among
    /// those the filter keeps (the newer id on a tie).
    pub async fn list_project_artifacts(
        &self,
        project_id: i64,
        filter: &ArtifactFilter,
        sort: &[SortKey],
        paging: Paging,
        latest_in_repository: bool,
    ) -> StoreResult<(Vec<Artifact>, i64)> {
        let order = order_clause(ARTIFACT_SORT_COLUMNS, sort, "a.push_time DESC", "a.id DESC");
        let mut sql = listing_filter(Scope::Project(project_id), filter, None)?;
        if latest_in_repository {
            let mut latest = Sql::new(
                " FROM artifacts a WHERE a.id IN (SELECT l.id FROM (SELECT a.id, ROW_NUMBER() OVER \
                 (PARTITION BY a.repository_id ORDER BY a.push_time DESC, a.id DESC) AS n",
            );
            latest.push_sql(&sql).push(") l WHERE l.n = 1)");
            sql = latest;
        }
        let total = match self.0.backend() {
            Backend::Sqlite => Total::CountAlong,
            Backend::Postgres => Total::Count,
        };
        self.fetch_page(sql, &order, paging, total).await
    }

    /// One page of the artifacts `sql` (a `FROM ... WHERE ...` over `a`)
    /// selects, in `order`, and their total as `total` says to count it.
    async fn fetch_page(
        &self,
        sql: Sql,
        order: &str,
        paging: Paging,
        total: Total,
    ) -> StoreResult<(Vec<Artifact>, i64)> {
        let (rows, total): (Vec<ArtifactRow>, i64) = sql
            .fetch_keyed_page(
                &self.0.pool,
                Keyed {
                    columns: ARTIFACT_COLUMNS,
                    from: "artifacts a JOIN repositories r ON r.id = a.repository_id",
                    key: "a.id",
                },
                order,
                paging,
                total,
            )
            .await?;
        Ok((rows.into_iter().map(Artifact::from).collect(), total))
    }

    /// `(total, of)` of a short tag text's listing (see [`short_text_total`]).
    /// The total of the text alone is counted once per listing version of
    /// the repository and kept (see [`crate::repo::versioned`]): a distinct
    /// count over every piece starting with the text, 49,971 of them for
    /// `~7` at 100,000 tags. `of` is read with the version.
    async fn short_text_counts(
        &self,
        repository_id: i64,
        filter: &ArtifactFilter,
        text: &str,
        listing: &Sql,
    ) -> StoreResult<(i64, i64)> {
        let count = short_text_total(self.0.backend(), repository_id, filter, text, listing);
        if !(filter.labels.is_empty() && filter.query.terms.is_empty()) {
            let counts: Vec<(i64, i64)> = count.fetch_all(&self.0.pool).await?;
            return Ok(counts.first().copied().unwrap_or_default());
        }
        let mut kept = Sql::new("SELECT listing_version, ");
        kept.push(listed_of(filter))
            .push(" FROM repositories WHERE id = ")
            .int(repository_id);
        let found: Vec<(i64, i64)> = kept.fetch_all(&self.0.pool).await?;
        let key = (repository_id, text.to_string());
        let totals = &self.0.text_totals;
        if let Some(&(version, of)) = found.first()
            && let Some(total) = totals.get(&key, version, |total| *total)
        {
            return Ok((total, of));
        }
        // The version the total was counted at, read in the same statement.
        let mut count = count;
        count
            .push(", (SELECT listing_version FROM repositories WHERE id = ")
            .int(repository_id)
            .push(") AS version");
        let counted: Vec<(i64, i64, Option<i64>)> = count.fetch_all(&self.0.pool).await?;
        let Some(&(total, of, version)) = counted.first() else {
            return Ok((0, 0));
        };
        if let Some(version) = version {
            totals.put(key, version, total);
        }
        Ok((total, of))
    }

    /// The rows of a deep page of a listing in the listing index's order
    /// (`listing` names its kept total), walked from the remembered start
    /// nearest before it (see [`crate::repo::page_starts`]); the starts are
    /// found first when the repository's `version` has none. `None` for a
    /// page near either end, which the walk from that end finds as fast.
    #[expect(clippy::too_many_arguments, reason = "one listing's parts, read once")]
    async fn deep_page(
        &self,
        repository_id: i64,
        listing: &'static str,
        version: i64,
        sql: &Sql,
        order: &str,
        paging: Paging,
        total: i64,
    ) -> StoreResult<Option<Vec<ArtifactRow>>> {
        let Some((limit, offset)) = paging.limit_offset() else {
            return Ok(None);
        };
        if offset.min(total - offset - limit) <= page_starts::EVERY {
            return Ok(None);
        }
        let starts = &self.0.page_starts;
        let n = usize::try_from(offset / page_starts::EVERY).unwrap_or(usize::MAX);
        let key = (repository_id, listing);
        let start = match starts.get(&key, version, |keys| keys.get(n).cloned()) {
            Some(start) => start,
            None => {
                let mut find = Sql::new(
                    "SELECT push_time, id FROM (SELECT a.push_time, a.id, ROW_NUMBER() OVER (",
                );
                find.push(order.trim_start())
                    .push(") - 1 AS n")
                    .push_sql(sql)
                    .push(") s WHERE n % ")
                    .int(page_starts::EVERY)
                    .push(" = 0 ORDER BY n");
                let keys: Vec<(String, i64)> = find.fetch_all(&self.0.pool).await?;
                let start = keys.get(n).cloned();
                starts.put(key, version, keys);
                start
            }
        };
        let Some((push_time, id)) = start else {
            return Ok(None);
        };
        let mut from = sql.clone();
        from.push(" AND (a.push_time, a.id) <= (")
            .text(push_time)
            .push(", ")
            .int(id)
            .push(")");
        let skip = offset - n as i64 * page_starts::EVERY;
        let rows = from
            .fetch_keyed_rows(
                &self.0.pool,
                Keyed {
                    columns: ARTIFACT_COLUMNS,
                    from: "artifacts a JOIN repositories r ON r.id = a.repository_id",
                    key: "a.id",
                },
                order,
                order,
                Some((limit, skip)),
            )
            .await?;
        Ok(Some(rows))
    }

    /// The artifact `digest` of repository `repository_id`.
    pub async fn artifact_by_digest(
        &self,
        repository_id: i64,
        digest: &str,
    ) -> StoreResult<Option<Artifact>> {
        let mut sql = Sql::new("SELECT ");
        sql.push(ARTIFACT_COLUMNS)
            .push(" FROM artifacts a JOIN repositories r ON r.id = a.repository_id WHERE a.repository_id = ")
            .int(repository_id)
            .push(" AND a.digest = ")
            .text(digest);
        let mut rows: Vec<ArtifactRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.pop().map(Artifact::from))
    }

    /// The artifact tag `tag` of repository `repository_id` points at.
    pub async fn artifact_by_tag(
        &self,
        repository_id: i64,
        tag: &str,
    ) -> StoreResult<Option<Artifact>> {
        let mut sql = Sql::new("SELECT ");
        sql.push(ARTIFACT_COLUMNS)
            .push(" FROM tags t JOIN artifacts a ON a.id = t.artifact_id JOIN repositories r ON r.id = a.repository_id WHERE t.repository_id = ")
            .int(repository_id)
            .push(" AND t.name = ")
            .text(tag);
        let mut rows: Vec<ArtifactRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.pop().map(Artifact::from))
    }

    /// One page of the accessories of artifact `subject` (signatures, SBOMs and
    /// other artifacts whose `subject` names it, in its repository), oldest
    /// push first, and how many there are.
    pub async fn accessories_of(
        &self,
        subject: &Artifact,
        paging: Paging,
    ) -> StoreResult<(Vec<Artifact>, i64)> {
        let filtered = |sql: &mut Sql| {
            sql.push(" WHERE a.repository_id = ")
                .int(subject.repository_id)
                .push(" AND a.subject_digest = ")
                .text(subject.digest.clone())
                .push(" AND a.accessory_type IS NOT NULL");
        };
        let mut count = Sql::new("SELECT COUNT(*) FROM artifacts a");
        filtered(&mut count);
        let total = count.fetch_count(&self.0.pool).await?;
        let mut page = Sql::new("SELECT ");
        page.push(ARTIFACT_COLUMNS)
            .push(" FROM artifacts a JOIN repositories r ON r.id = a.repository_id");
        filtered(&mut page);
        page.push(" ORDER BY a.push_time, a.id").paging(paging);
        let rows: Vec<ArtifactRow> = page.fetch_all(&self.0.pool).await?;
        Ok((rows.into_iter().map(Artifact::from).collect(), total))
    }

    /// The tags of `artifact_ids`, newest push first.
    pub async fn tags_of(&self, artifact_ids: &[i64]) -> StoreResult<Vec<Tag>> {
        if artifact_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(
            "SELECT id, repository_id, artifact_id, name, push_time, pull_time FROM tags WHERE artifact_id IN ",
        );
        sql.int_list(artifact_ids)
            .push(" ORDER BY push_time DESC, id DESC");
        let rows: Vec<TagRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(Tag::from).collect())
    }

    /// One page of an artifact's tags (filtered by `q`, sorted by `sort`,
    /// newest push first by default) and the total.
    pub async fn list_tags(
        &self,
        artifact_id: i64,
        query: &Query,
        sort: &[SortKey],
        paging: Paging,
    ) -> StoreResult<(Vec<Tag>, i64)> {
        let mut sql = Sql::new(" FROM tags t WHERE t.artifact_id = ");
        sql.int(artifact_id);
        sql.query_terms(TAG_Q_COLUMNS, query)?;
        let order = order_clause(TAG_SORT_COLUMNS, sort, "t.push_time DESC", "t.id DESC");
        let (rows, total): (Vec<TagRow>, i64) = sql
            .fetch_page(
                &self.0.pool,
                "t.id, t.repository_id, t.artifact_id, t.name, t.push_time, t.pull_time",
                &order,
                paging,
            )
            .await?;
        Ok((rows.into_iter().map(Tag::from).collect::<Vec<_>>(), total))
    }

    /// The index children of `parent_ids`.
    pub async fn references_of(&self, parent_ids: &[i64]) -> StoreResult<Vec<ArtifactReference>> {
        if parent_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(
            "SELECT parent_id, child_id, child_digest, platform, urls, annotations FROM artifact_references WHERE parent_id IN ",
        );
        sql.int_list(parent_ids)
            .push(" ORDER BY parent_id, child_id");
        let rows: Vec<ReferenceRow> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows.into_iter().map(ArtifactReference::from).collect())
    }

    /// The labels of `artifact_ids`, as `(artifact_id, label)`.
    pub async fn labels_of(&self, artifact_ids: &[i64]) -> StoreResult<Vec<(i64, Label)>> {
        if artifact_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(
            "SELECT lr.artifact_id, l.id, l.name, l.description, l.color, l.scope, l.project_id, l.created_at, l.updated_at \
             FROM label_references lr JOIN labels l ON l.id = lr.label_id WHERE lr.artifact_id IN ",
        );
        sql.int_list(artifact_ids).push(" ORDER BY l.id");
        #[derive(sqlx::FromRow)]
        struct Row {
            artifact_id: i64,
            #[sqlx(flatten)]
            label: LabelRow,
        }
        let rows: Vec<Row> = sql.fetch_all(&self.0.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.artifact_id, Label::from(r.label)))
            .collect())
    }

    /// Adds tag `name` to an artifact; `Conflict` when the repository has it.
    pub async fn create_tag(
        &self,
        repository_id: i64,
        artifact_id: i64,
        name: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO tags (repository_id, artifact_id, name, push_time, pull_time) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(repository_id)
        .bind(artifact_id)
        .bind(name)
        .bind(time::now())
        .bind(time::ZERO_TIME)
        .execute(&self.0.pool)
        .await
        .map_err(|e| {
            conflict_on_unique(e, || format!("tag {name} already exists under the repository {repository_id}"))
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_matches_walk_and_sparse_ones_are_read() {
        let page = |page| Paging {
            page,
            page_size: 100,
        };
        // 11,111 of 100,000: every page walks.
        assert!(walks(11_111, 100_000, page(1)));
        assert!(walks(11_111, 100_000, page(56)));
        // 3,691: the first pages walk, the middle ones read the matches.
        assert!(walks(3_691, 100_000, page(1)));
        assert!(!walks(3_691, 100_000, page(19)));
        // A few matches are read.
        assert!(!walks(100, 100_000, page(1)));
        assert_eq!(TagText::of("ab"), TagText::Short);
        assert_eq!(TagText::of("v99"), TagText::Short);
        assert_eq!(TagText::of("é"), TagText::Short);
        assert_eq!(TagText::of(""), TagText::Empty);
        assert_eq!(
            TagText::of("abab"),
            TagText::Trigrams(vec!["aba".into(), "bab".into()])
        );
    }
}
