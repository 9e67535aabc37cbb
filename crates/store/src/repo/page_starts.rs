//! Where the deep pages of a long artifact listing start, remembered per
//! repository and listing under the repository's `listing_version`
//! (migration 0014), which triggers change whenever an artifact enters or
//! leaves a listing or moves in its order. A page then walks the listing
//! index from the start nearest before it, not from the listing's end.

use std::collections::HashMap;
use std::sync::Mutex;

/// Every this many rows of a listing, in its order, one start is kept.
pub(crate) const EVERY: i64 = 1000;

/// At most this many listings are remembered; past it, all are forgotten.
const LISTINGS: usize = 1024;

/// The key of the first row of every [`EVERY`] rows: `(push_time, id)`.
pub(crate) type Start = (String, i64);

#[derive(Debug)]
struct Starts {
    version: i64,
    keys: Vec<Start>,
}

/// The remembered starts, by `(repository_id, listing)`.
#[derive(Debug, Default)]
pub(crate) struct PageStarts {
    listings: Mutex<HashMap<(i64, &'static str), Starts>>,
}

impl PageStarts {
    /// The start of rows `n * EVERY ..` of a listing read at `version`, when
    /// it is remembered for that version; `None` when it must be found.
    pub(crate) fn get(
        &self,
        repository_id: i64,
        listing: &'static str,
        version: i64,
        n: usize,
    ) -> Option<Option<Start>> {
        let listings = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        let starts = listings.get(&(repository_id, listing))?;
        (starts.version == version).then(|| starts.keys.get(n).cloned())
    }

    /// Remembers the starts of a listing as found at `version`.
    pub(crate) fn put(
        &self,
        repository_id: i64,
        listing: &'static str,
        version: i64,
        keys: Vec<Start>,
    ) {
        let mut listings = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        if listings.len() >= LISTINGS {
            listings.clear();
        }
        listings.insert((repository_id, listing), Starts { version, keys });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_serve_their_version_only() {
        let starts = PageStarts::default();
        assert_eq!(starts.get(1, "listed_count", 3, 0), None);
        starts.put(1, "listed_count", 3, vec![("t".into(), 9)]);
        assert_eq!(
            starts.get(1, "listed_count", 3, 0),
            Some(Some(("t".into(), 9)))
        );
        assert_eq!(starts.get(1, "listed_count", 3, 1), Some(None));
        assert_eq!(starts.get(1, "listed_count", 4, 0), None);
        assert_eq!(starts.get(1, "tagged_count", 3, 0), None);
        assert_eq!(starts.get(2, "listed_count", 3, 0), None);
    }
}
