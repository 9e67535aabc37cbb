//! The counts of projects, repositories and storage a caller may see.

use berth_store::repo::statistics::Statistic;

use super::projects::viewer;
use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;

/// Counts for a signed-in caller: public ones for everybody, private ones of
/// the caller's projects, totals for administrators.
pub async fn counts(state: &AppState, principal: &Principal) -> Result<Statistic, ApiError> {
    principal.require_authenticated()?;
    Ok(state
        .store
        .statistics()
        .statistic(viewer(principal))
        .await?)
}
