//! Query grammars of the list operations: Harbor's `q` and `sort`, and paging
//! with its `X-Total-Count` / `Link` headers.

pub mod artifact;
pub mod harbor;
pub mod paging;

pub use artifact::{ArtifactFilter, TagFilter};
pub use harbor::{Query, QueryOp, QueryTerm, QueryValue, Scalar, SortKey, parse_query, parse_sort};
pub use paging::Paging;
