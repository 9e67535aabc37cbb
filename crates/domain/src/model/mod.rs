//! The entities the three surfaces share.

pub mod configuration;
pub mod project;
pub mod user;

pub use configuration::{ConfigValue, Configuration};
pub use project::{Project, ProjectRef};
pub use user::{ADMIN_USER_ID, NewUser, User, UserOrigin};

pub mod artifact;
pub use artifact::{Artifact, ArtifactReference, Label, Repository, Tag};
