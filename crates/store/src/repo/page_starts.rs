//! Where the deep pages of a long artifact listing start, kept per
//! repository and listing under the repository's listing version (see
//! [`crate::repo::versioned`]). A page then walks the listing index from the
//! start nearest before it, not from the listing's end.

use crate::repo::versioned::Versioned;

/// Every this many rows of a listing, in its order, one start is kept.
pub(crate) const EVERY: i64 = 1000;

/// The key of the first row of every [`EVERY`] rows: `(push_time, id)`.
pub(crate) type Start = (String, i64);

/// The starts of every [`EVERY`] rows, by `(repository_id, listing)` (the
/// repository column holding the listing's total).
pub(crate) type PageStarts = Versioned<(i64, &'static str), Vec<Start>>;
