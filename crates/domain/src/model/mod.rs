//! The entities the three surfaces share.

pub mod configuration;
pub mod user;

pub use configuration::{ConfigValue, Configuration};
pub use user::{ADMIN_USER_ID, NewUser, User, UserOrigin};
