//! The entities the three surfaces share.

pub mod article;
pub mod configuration;
pub mod group;
pub mod immutable;
pub mod member;
pub mod metadata;
pub mod project;
pub mod registry;
pub mod replication;
pub mod retention;
pub mod robot;
pub mod user;
pub mod webhook;

pub use article::Article;
pub use configuration::{ConfigValue, Configuration};
pub use group::DirectoryProfile;
pub use member::{Member, MemberEntity, UserGroup};
pub use project::{CveAllowlist, NewProject, Project, ProjectCounts, ProjectRef};
pub use robot::Robot;
pub use user::{ADMIN_USER_ID, NewUser, User, UserOrigin};

pub mod artifact;
pub use artifact::{Artifact, ArtifactReference, Label, Repository, Tag};
