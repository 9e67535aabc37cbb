//! The totals of short tag-text listings (`q=tags=~7`: the artifacts with a
//! tag holding a text of one to three characters), remembered per repository
//! and text under the repository's `listing_version`. Triggers change the
//! version whenever an artifact enters or leaves a listing, gains or loses a
//! tag, or a tag is renamed (migrations 0014 and 0015), so a remembered total
//! is exact for the version it was counted at. Counting takes a distinct
//! count over every piece of a tag name starting with the text, 40,000 rows
//! for a one-character text at 100,000 tags; paging through a listing then
//! counts once instead of once per page.

use std::collections::HashMap;
use std::sync::Mutex;

/// At most this many texts are remembered; past it, all are forgotten.
const TEXTS: usize = 1024;

/// The key of a listing: repository, text, and whether it lists every
/// artifact (`base=*`, which changes what the total is a share of).
type Key = (i64, String, bool);

#[derive(Debug)]
struct Kept {
    version: i64,
    counts: (i64, i64),
}

/// The remembered `(total, of)` of short tag-text listings.
#[derive(Debug, Default)]
pub(crate) struct TextTotals {
    texts: Mutex<HashMap<Key, Kept>>,
}

impl TextTotals {
    /// The `(total, of)` of a listing counted at `version`, when remembered.
    pub(crate) fn get(
        &self,
        repository_id: i64,
        text: &str,
        all: bool,
        version: i64,
    ) -> Option<(i64, i64)> {
        let texts = self.texts.lock().unwrap_or_else(|e| e.into_inner());
        let kept = texts.get(&(repository_id, text.to_string(), all))?;
        (kept.version == version).then_some(kept.counts)
    }

    /// Remembers the `(total, of)` of a listing as counted at `version`.
    pub(crate) fn put(
        &self,
        repository_id: i64,
        text: &str,
        all: bool,
        version: i64,
        counts: (i64, i64),
    ) {
        let mut texts = self.texts.lock().unwrap_or_else(|e| e.into_inner());
        if texts.len() >= TEXTS {
            texts.clear();
        }
        texts.insert(
            (repository_id, text.to_string(), all),
            Kept { version, counts },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_serve_their_version_only() {
        let totals = TextTotals::default();
        assert_eq!(totals.get(1, "7", false, 3), None);
        totals.put(1, "7", false, 3, (40, 100));
        assert_eq!(totals.get(1, "7", false, 3), Some((40, 100)));
        assert_eq!(totals.get(1, "7", false, 4), None);
        assert_eq!(totals.get(1, "7", true, 3), None);
        assert_eq!(totals.get(1, "8", false, 3), None);
        assert_eq!(totals.get(2, "7", false, 3), None);
    }
}
