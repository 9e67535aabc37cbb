//! Sealing secrets kept in rows, for every repository that keeps one
//! (configuration passwords today, upstream registry credentials later).

use berth_domain::sealing::{SealError, is_sealed};

use crate::Store;
use crate::error::{StoreError, StoreResult};

impl Store {
    /// The sealed form of `plain`, kept at `context` (`<table>/<item>`).
    pub(crate) fn seal_secret(&self, context: &str, plain: &str) -> StoreResult<String> {
        let sealer = self.sealer.as_ref().ok_or_else(|| StoreError::Secret {
            name: context.to_string(),
            source: SealError::NoKey,
        })?;
        Ok(sealer.seal(context, plain))
    }

    /// The plain text of a stored secret. A value that is not sealed is a row
    /// written before sealing existed and is returned as it is.
    pub(crate) fn open_secret(&self, context: &str, stored: &str) -> StoreResult<String> {
        if !is_sealed(stored) {
            return Ok(stored.to_string());
        }
        let failed = |source| StoreError::Secret {
            name: context.to_string(),
            source,
        };
        let sealer = self
            .sealer
            .as_ref()
            .ok_or_else(|| failed(SealError::NoKey))?;
        sealer.open(context, stored).map_err(failed)
    }
}
