//! listArtifacts' own `q` keys on top of the shared grammar (harbor-api.md §11):
//! `base=*`, `tags=*|nil|~x|x` and `labels=(a b)`. The other keys stay in the
//! query for the column translation every listing shares.

use super::harbor::{Query, QueryValue, Scalar};
use crate::DomainError;

/// The `tags` condition of an artifact listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagFilter {
    /// `tags=*`: tagged.
    Any,
    /// `tags=nil`: untagged.
    Nil,
    /// `tags=~x`: a tag containing `x` (case-sensitive).
    Fuzzy(String),
    /// `tags=x`: a tag named `x`.
    Exact(String),
}

/// An artifact listing's filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactFilter {
    /// `base=*`: index children too.
    pub all: bool,
    /// The `tags` condition.
    pub tags: Option<TagFilter>,
    /// Label ids the artifacts must all carry.
    pub labels: Vec<i64>,
    /// The remaining terms, for the column translation.
    pub query: Query,
}

const LABELS_MESSAGE: &str =
    "the value of \"labels\" query can only be integer list with intersetion relationship";

impl ArtifactFilter {
    /// Takes the artifact-specific keys out of `query`; a wrong form of them is a 400
    /// with Harbor's message.
    pub fn from_query(mut query: Query) -> Result<Self, DomainError> {
        let mut filter = Self::default();
        let mut rest = Vec::with_capacity(query.terms.len());
        for term in query.terms.drain(..) {
            match term.key.as_str() {
                "base" => {
                    if term.value != QueryValue::Exact("*".into()) {
                        return Err(DomainError::bad_request(
                            "the value of \"base\" query can only be exact match value with \"*\"",
                        ));
                    }
                    filter.all = true;
                }
                "tags" => {
                    filter.tags = Some(match term.value {
                        QueryValue::Exact(v) if v == "*" => TagFilter::Any,
                        QueryValue::Exact(v) if v == "nil" => TagFilter::Nil,
                        QueryValue::Exact(v) => TagFilter::Exact(v),
                        QueryValue::Fuzzy(v) => TagFilter::Fuzzy(v),
                        _ => {
                            return Err(DomainError::bad_request(
                                "the value of \"tags\" query can only be fuzzy match value or exact match value",
                            ));
                        }
                    });
                }
                "labels" => {
                    let QueryValue::AndList(ids) = term.value else {
                        return Err(DomainError::bad_request(LABELS_MESSAGE));
                    };
                    for id in ids {
                        let Scalar::Int(id) = id else {
                            return Err(DomainError::bad_request(LABELS_MESSAGE));
                        };
                        filter.labels.push(id);
                    }
                }
                _ => rest.push(term),
            }
        }
        query.terms = rest;
        filter.query = query;
        Ok(filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::parse_query;

    fn filter(q: &str) -> Result<ArtifactFilter, DomainError> {
        ArtifactFilter::from_query(parse_query(q).unwrap())
    }

    #[test]
    fn artifact_forms() {
        assert_eq!(
            filter("tags=~v1").unwrap().tags,
            Some(TagFilter::Fuzzy("v1".into()))
        );
        assert_eq!(filter("tags=*").unwrap().tags, Some(TagFilter::Any));
        assert_eq!(filter("tags=nil").unwrap().tags, Some(TagFilter::Nil));
        assert!(filter("tags=[1~2]").is_err());
        let f = filter("labels=(3 4),media_type=x,base=*").unwrap();
        assert_eq!(f.labels, vec![3, 4]);
        assert!(f.all);
        assert_eq!(f.query.terms.len(), 1);
        assert_eq!(f.query.terms[0].key, "media_type");
        assert_eq!(filter("labels=(3, 4)").unwrap().labels, vec![3, 4]);
        assert!(filter("labels=1").is_err());
        assert!(filter("labels=(a)").is_err());
        assert!(filter("base=x").is_err());
    }
}
