//! The entities the three surfaces share.

pub mod configuration;
pub mod group;
pub mod project;
pub mod user;

pub use configuration::{ConfigValue, Configuration};
pub use group::{DirectoryProfile, UserGroup};
pub use project::{Project, ProjectRef};
pub use user::{ADMIN_USER_ID, NewUser, User, UserOrigin};

pub mod article;
pub use article::Article;
