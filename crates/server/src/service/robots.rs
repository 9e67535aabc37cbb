//! Robot accounts' writes: each records its event in its transaction,
//! delivers it, and forgets what this instance kept of the robot. Who may
//! create or change which robot, and with which permissions, is checked by
//! the one surface that manages robots (Harbor's `/robots`) before these run.

use berth_domain::model::Robot;

use berth_store::repo::robots::{NewRobot, RobotChange};

use crate::error::ApiError;
use crate::identity;
use crate::state::AppState;

/// Creates `new`; records `robot.created`.
pub async fn create(
    state: &AppState,
    new: &NewRobot,
    change: &RobotChange<'_>,
) -> Result<Robot, ApiError> {
    let created = state.store.robots().create(new, change).await?;
    state.deliver_events();
    Ok(created)
}

/// Stores `robot` as changed; `false` when it is gone. Records `robot.updated`.
pub async fn update(
    state: &AppState,
    robot: &Robot,
    change: &RobotChange<'_>,
) -> Result<bool, ApiError> {
    let done = state.store.robots().update(robot, change).await?;
    identity::forget_robot(state, robot.id);
    state.deliver_events();
    Ok(done)
}

/// Replaces robot `id`'s secret with `hash`; `false` when it is gone.
pub async fn set_secret(state: &AppState, id: i64, hash: &str) -> Result<bool, ApiError> {
    let done = state.store.robots().set_secret(id, hash).await?;
    identity::forget_robot(state, id);
    Ok(done)
}

/// Deletes `robot`; `false` when it is gone. Records `robot.deleted`.
pub async fn delete(
    state: &AppState,
    robot: &Robot,
    change: &RobotChange<'_>,
) -> Result<bool, ApiError> {
    let done = state.store.robots().delete(robot, change).await?;
    identity::forget_robot(state, robot.id);
    state.deliver_events();
    Ok(done)
}
