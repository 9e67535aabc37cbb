//! `berth fsck`: checks that stored content is what the database says it is.
//!
//! Every blob file must hash to its name and have a row; every blob row must
//! have its bytes (a file, or a manifest body that hashes to the digest);
//! every upload part the database records must exist. Repair removes only
//! what nothing can need: stray files (claimed first, as garbage collection
//! does), corrupt files (moved aside, so a push of the digest restores it),
//! claims and runs left by a dead collector, and sessions whose parts are gone.
//! The counts triggers keep for listings (an artifact's tags and parents and
//! whether Harbor lists it; a repository's artifacts, listed and tagged ones)
//! must match a recount; repair recounts them. So must each project's quota
//! usage, the sum of the sizes of its charged blob links, and each link's
//! charge: a link is charged while an artifact of its project uses the blob
//! and uncharged once none does and no push awaits it (a link a push
//! renewed may be either); repair corrects the charges, then recounts usage.

use std::collections::HashSet;

use berth_domain::oci::Digest;

use crate::Store;
use crate::blobs::{BlobStore, digest_of};
use crate::error::StoreResult;

/// How long a blob file without a row is given for the push that placed it
/// to record it, before it is reported as stray.
const IN_FLIGHT: std::time::Duration = std::time::Duration::from_secs(2);

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The digest or upload id concerned.
    pub subject: String,
    /// What is wrong.
    pub problem: String,
    /// What repair did, or `None` when it cannot be fixed here (or repair was not asked).
    pub repaired: Option<String>,
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Blob rows checked.
    pub blobs: u64,
    /// Blob files checked.
    pub files: u64,
    /// Upload sessions checked.
    pub uploads: u64,
    /// Every problem, in the order found.
    pub findings: Vec<Finding>,
}

impl FsckReport {
    /// Whether something is wrong that was not repaired.
    pub fn unresolved(&self) -> bool {
        self.findings.iter().any(|f| f.repaired.is_none())
    }
}

#[derive(sqlx::FromRow)]
struct BlobRow {
    id: i64,
    digest: String,
    size: i64,
    deleting: i64,
    body: Option<Vec<u8>>,
    in_use: i64,
}

/// Blob rows read at a time.
const ROWS_PER_PAGE: i64 = 500;

fn note(report: &mut FsckReport, subject: &str, problem: String, repaired: Option<String>) {
    report.findings.push(Finding {
        subject: subject.to_string(),
        problem,
        repaired,
    });
}

/// What is wrong with the bytes of blob `row`, if anything (claimed rows are
/// left to the collector); with `repair`, a corrupt file is moved aside.
async fn check_row(blobs: &BlobStore, row: &BlobRow, repair: bool) -> StoreResult<Option<Finding>> {
    let finding = |problem: String, repaired: Option<String>| {
        Ok(Some(Finding {
            subject: row.digest.clone(),
            problem,
            repaired,
        }))
    };
    if row.deleting == 1 {
        return Ok(None);
    }
    let Ok(digest) = Digest::parse(&row.digest) else {
        return finding("the database names a malformed digest".into(), None);
    };
    if let Some(body) = &row.body {
        if digest_of(digest.algorithm(), body) != digest {
            return finding(
                "the stored manifest body does not hash to its digest".into(),
                None,
            );
        }
        return Ok(None);
    }
    match blobs.rehash(&digest).await? {
        None => finding(
            format!(
                "the blob file is missing{}; pushing the blob again restores it",
                if row.in_use == 1 {
                    " and a manifest uses it"
                } else {
                    ""
                }
            ),
            None,
        ),
        Some((found, len)) if found != digest || i64::try_from(len) != Ok(row.size) => {
            let repaired = if repair {
                blobs.quarantine(&digest).await?;
                Some("moved aside to quarantine/; pushing the blob again restores it".into())
            } else {
                None
            };
            finding(
                format!("the blob file hashes to {found} ({len} bytes)"),
                repaired,
            )
        }
        Some(_) => Ok(None),
    }
}

/// Checks the content of `store` and `blobs`; with `repair`, fixes what is safe to fix.
pub async fn check(store: &Store, blobs: &BlobStore, repair: bool) -> StoreResult<FsckReport> {
    let mut report = FsckReport::default();

    // The rows in pages (keyset on id): manifest bodies come with them, and a
    // registry has millions.
    let mut claimed = false;
    let mut last_id = 0i64;
    loop {
        let rows: Vec<BlobRow> = sqlx::query_as(
            "SELECT b.id, b.digest, b.size, b.deleting, mb.body, \
             CAST(EXISTS (SELECT 1 FROM artifact_blobs ab WHERE ab.blob_id = b.id) AS INTEGER) AS in_use \
             FROM blobs b LEFT JOIN manifest_bodies mb ON mb.blob_id = b.id \
             WHERE b.id > $1 ORDER BY b.id LIMIT $2",
        )
        .bind(last_id)
        .bind(ROWS_PER_PAGE)
        .fetch_all(&store.pool)
        .await?;
        let Some(last) = rows.last() else {
            break;
        };
        last_id = last.id;
        report.blobs += rows.len() as u64;
        for row in &rows {
            claimed |= row.deleting == 1;
            if let Some(finding) = check_row(blobs, row, repair).await? {
                report.findings.push(finding);
            }
        }
    }
    if claimed {
        let repaired = if repair {
            store
                .recover_gc(blobs)
                .await?
                .then(|| "the claimed blobs were removed".to_string())
        } else {
            None
        };
        note(
            &mut report,
            "garbage collection",
            "blobs claimed by a collection that did not finish".into(),
            repaired,
        );
    }

    let (files, mut stray) = super::gc::stray_files(store, blobs).await?;
    report.files = files as u64;
    if !stray.is_empty() {
        // A push places its file, then records it: a file seen in between is
        // not stray. Those the database knows a moment later are dropped.
        tokio::time::sleep(IN_FLIGHT).await;
        let known: HashSet<String> = store
            .registry()
            .known_digests(&stray)
            .await?
            .into_iter()
            .collect();
        stray.retain(|digest| !known.contains(digest.as_str()));
    }
    for digest in &stray {
        let repaired = if repair {
            super::gc::remove_stray_file(store, blobs, digest)
                .await?
                .then(|| "removed".to_string())
        } else {
            None
        };
        note(
            &mut report,
            digest.as_str(),
            "a blob file the database does not know".into(),
            repaired,
        );
    }

    let parts: Vec<(String, String)> =
        sqlx::query_as("SELECT upload_id, name FROM upload_parts ORDER BY upload_id, number")
            .fetch_all(&store.pool)
            .await?;
    let mut broken: Vec<String> = Vec::new();
    let mut sessions = HashSet::new();
    for (upload, name) in &parts {
        sessions.insert(upload.as_str());
        let exists = blobs.part_exists(upload, name).await?;
        if !exists && !broken.contains(upload) {
            broken.push(upload.clone());
        }
    }
    report.uploads = sessions.len() as u64;
    for upload in broken {
        let repaired = if repair {
            store.registry().delete_upload(&upload).await?;
            blobs.discard_upload(&upload).await;
            Some("the session was ended; its client starts the upload again".into())
        } else {
            None
        };
        note(
            &mut report,
            &upload,
            "an upload session whose part files are missing".into(),
            repaired,
        );
    }
    check_counts(store, repair, &mut report).await?;
    check_charges(store, repair, &mut report).await?;
    Ok(report)
}

/// SQL: whether an artifact of link `pb`'s project uses its blob.
const LINK_USED: &str = "EXISTS (SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id \
     WHERE a.project_id = pb.project_id AND ab.blob_id = pb.blob_id)";

/// Checks each link's charge and each project's usage (migration 0017).
async fn check_charges(store: &Store, repair: bool, report: &mut FsckReport) -> StoreResult<()> {
    let wrong: Vec<(i64, i64, String, String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT pb.project_id, pb.blob_id, b.digest, p.name, pb.charged FROM project_blobs pb \
         JOIN blobs b ON b.id = pb.blob_id JOIN projects p ON p.id = pb.project_id \
         WHERE (pb.charged = 0 AND {LINK_USED}) \
         OR (pb.charged = 1 AND pb.pending_since IS NULL AND NOT {LINK_USED}) \
         ORDER BY pb.project_id, pb.blob_id"
    )))
    .fetch_all(&store.pool)
    .await?;
    for (project_id, blob_id, digest, project, charged) in wrong {
        let (problem, fix) = if charged == 0 {
            (
                format!(
                    "project {project}: an artifact uses the blob, but it is not charged to the quota"
                ),
                format!(
                    "UPDATE project_blobs SET charged = 1 WHERE project_id = $1 AND blob_id = $2 \
                         AND charged = 0 AND {}",
                    LINK_USED.replace("pb.", "project_blobs.")
                ),
            )
        } else {
            (
                format!(
                    "project {project}: the blob is charged to the quota, but no artifact uses it and no push awaits it"
                ),
                format!(
                    "UPDATE project_blobs SET charged = 0 WHERE project_id = $1 AND blob_id = $2 \
                         AND charged = 1 AND pending_since IS NULL AND NOT {}",
                    LINK_USED.replace("pb.", "project_blobs.")
                ),
            )
        };
        let repaired = if repair {
            sqlx::query(sqlx::AssertSqlSafe(fix))
                .bind(project_id)
                .bind(blob_id)
                .execute(&store.pool)
                .await?;
            Some("its charge was corrected; the project's usage is recounted".to_string())
        } else {
            None
        };
        note(report, &digest, problem, repaired);
    }

    let usages: Vec<(i64, String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT q.project_id, p.name, q.used, ({CHARGED_SUM}) AS charged \
         FROM project_quotas q JOIN projects p ON p.id = q.project_id ORDER BY q.project_id"
    )))
    .fetch_all(&store.pool)
    .await?;
    for (project_id, project, used, charged) in usages {
        if used == charged {
            continue;
        }
        let repaired = if repair {
            recount_usage(store, project_id).await?;
            Some("recounted".to_string())
        } else {
            None
        };
        note(
            report,
            &project,
            format!(
                "the project's quota usage is {used} bytes, but its charged blobs total {charged} bytes"
            ),
            repaired,
        );
    }
    Ok(())
}

/// SQL: the total size of the charged links of project `q.project_id`.
const CHARGED_SUM: &str = "SELECT CAST(COALESCE(SUM(b.size), 0) AS BIGINT) FROM project_blobs pb \
     JOIN blobs b ON b.id = pb.blob_id WHERE pb.project_id = q.project_id AND pb.charged = 1";

/// Sets project `project_id`'s usage to the sum of its charged links. The
/// quota row is locked first (on PostgreSQL) and the links summed by the
/// next statement, so a push or delete that changed charges has either
/// committed (and is counted) or waits to change the usage after this.
async fn recount_usage(store: &Store, project_id: i64) -> StoreResult<()> {
    let mut tx = store.begin_write().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT used FROM project_quotas WHERE project_id = $1{}",
        store.locking(crate::db::Locking::Update)
    )))
    .bind(project_id)
    .fetch_optional(&mut *tx)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE project_quotas SET used = ({}), updated_at = $2 WHERE project_id = $1",
        CHARGED_SUM.replace("q.project_id", "$1")
    )))
    .bind(project_id)
    .bind(berth_domain::time::now())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What an artifact's kept counts should be, from its tags and references.
const ARTIFACT_RECOUNT: &str = "SELECT a.id, \
     (SELECT COUNT(*) FROM tags t WHERE t.artifact_id = a.id) AS tags, \
     (SELECT COUNT(*) FROM artifact_references ar WHERE ar.child_id = a.id) AS parents \
     FROM artifacts a";

/// What a repository's kept counts should be, from its artifacts' (checked first).
const REPOSITORY_RECOUNT: &str = "SELECT r.id, \
     (SELECT COUNT(*) FROM artifacts a WHERE a.repository_id = r.id) AS artifacts, \
     (SELECT COUNT(*) FROM artifacts a WHERE a.repository_id = r.id AND a.listed = 1) AS listed, \
     (SELECT COUNT(*) FROM artifacts a WHERE a.repository_id = r.id AND a.listed = 1 AND a.tag_count > 0) AS tagged \
     FROM repositories r";

/// Checks the counts the listing triggers keep (migrations 0010 and 0011).
async fn check_counts(store: &Store, repair: bool, report: &mut FsckReport) -> StoreResult<()> {
    let artifacts: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT a.id, a.digest FROM artifacts a JOIN ({ARTIFACT_RECOUNT}) c ON c.id = a.id \
         WHERE a.tag_count <> c.tags OR a.parent_count <> c.parents OR a.listed <> \
         CASE WHEN a.accessory_type IS NULL AND (c.tags > 0 OR c.parents = 0) THEN 1 ELSE 0 END"
    )))
    .fetch_all(&store.pool)
    .await?;
    // The listing trigger sets `listed` from the counts.
    let recount = format!(
        "UPDATE artifacts SET tag_count = c.tags, parent_count = c.parents \
         FROM ({ARTIFACT_RECOUNT} WHERE a.id = $1) c WHERE artifacts.id = c.id"
    );
    note_recounts(store, repair, report, artifacts, &recount, |id| {
        format!("artifact {id}: its tag or parent count, or whether it is listed, is wrong")
    })
    .await?;
    let repositories: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT r.id, r.name FROM repositories r JOIN ({REPOSITORY_RECOUNT}) c ON c.id = r.id \
         WHERE r.artifact_count <> c.artifacts OR r.listed_count <> c.listed OR r.tagged_count <> c.tagged"
    )))
    .fetch_all(&store.pool)
    .await?;
    let recount = format!(
        "UPDATE repositories SET artifact_count = c.artifacts, listed_count = c.listed, \
         tagged_count = c.tagged FROM ({REPOSITORY_RECOUNT} WHERE r.id = $1) c \
         WHERE repositories.id = c.id"
    );
    note_recounts(store, repair, report, repositories, &recount, |_| {
        "the repository's artifact, listed or tagged count is wrong".into()
    })
    .await
}

/// Notes each row `(id, subject)` whose counts are wrong; with `repair`,
/// recounts it with `recount` (bound to the id).
async fn note_recounts(
    store: &Store,
    repair: bool,
    report: &mut FsckReport,
    wrong: Vec<(i64, String)>,
    recount: &str,
    problem: impl Fn(i64) -> String,
) -> StoreResult<()> {
    for (id, subject) in wrong {
        let repaired = if repair {
            sqlx::query(sqlx::AssertSqlSafe(recount.to_string()))
                .bind(id)
                .execute(&store.pool)
                .await?;
            Some("recounted".to_string())
        } else {
            None
        };
        note(report, &subject, problem(id), repaired);
    }
    Ok(())
}
