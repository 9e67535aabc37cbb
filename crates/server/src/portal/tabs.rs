//! The head of every project page: where it is, the project's name and
//! visibility, and the tabs (summary, repositories, members, labels, policy, configuration).

use berth_domain::rbac::{Action, Resource};

use super::html::{esc, url_part};
use crate::access::ProjectAccess;

/// A tab of a project's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tab {
    /// `/harbor/projects/{p}/summary`.
    Summary,
    /// `/harbor/projects/{p}`.
    Repositories,
    /// `/harbor/projects/{p}/members`.
    Members,
    /// `/harbor/projects/{p}/labels`.
    Labels,
    /// `/harbor/projects/{p}/policy`: tag retention.
    Policy,
    /// `/harbor/projects/{p}/configuration`.
    Configuration,
}

impl Tab {
    const ALL: [Tab; 6] = [
        Tab::Summary,
        Tab::Repositories,
        Tab::Members,
        Tab::Labels,
        Tab::Policy,
        Tab::Configuration,
    ];

    fn label(self) -> &'static str {
        match self {
            Tab::Summary => "Summary",
            Tab::Repositories => "Repositories",
            Tab::Members => "Members",
            Tab::Labels => "Labels",
            Tab::Policy => "Policy",
            Tab::Configuration => "Configuration",
        }
    }

    /// The path under the project's page (empty for its repositories).
    fn suffix(self) -> &'static str {
        match self {
            Tab::Summary => "/summary",
            Tab::Repositories => "",
            Tab::Members => "/members",
            Tab::Labels => "/labels",
            Tab::Policy => "/policy",
            Tab::Configuration => "/configuration",
        }
    }

    fn id(self) -> &'static str {
        match self {
            Tab::Summary => "tab_summary",
            Tab::Repositories => "tab_repositories",
            Tab::Members => "tab_members",
            Tab::Labels => "tab_labels",
            Tab::Policy => "tab_policy",
            Tab::Configuration => "tab_configuration",
        }
    }

    /// Whether the caller may open the tab at all (the members list is not
    /// for limited guests, as on the API).
    fn visible(self, access: &ProjectAccess) -> bool {
        match self {
            Tab::Members => access.allows(Resource::Member, Action::List),
            Tab::Policy => access.allows(Resource::TagRetention, Action::List),
            _ => true,
        }
    }
}

/// The portal path of `tab` of project `name`.
pub(super) fn tab_path(name: &str, tab: Tab) -> String {
    format!("/harbor/projects/{}{}", url_part(name), tab.suffix())
}

/// Breadcrumb, title with the project's visibility, and the tab bar with `active` marked.
pub(super) fn header(access: &ProjectAccess, active: Tab) -> String {
    let project = &access.project;
    let links: String = Tab::ALL
        .iter()
        .filter(|tab| tab.visible(access))
        .map(|&tab| {
            let current = if tab == active {
                r#" aria-current="page""#
            } else {
                ""
            };
            format!(
                r#"<a href="{href}" id="{id}"{current}>{label}</a>"#,
                href = esc(&tab_path(&project.name, tab)),
                id = tab.id(),
                label = tab.label(),
            )
        })
        .collect();
    format!(
        r#"<p><a href="/harbor/projects">Projects</a> /</p>
<h1>{name} <span class="badge">{visibility}</span></h1>
<nav class="tabs" aria-label="Project">{links}</nav>"#,
        name = esc(&project.name),
        visibility = if project.public { "Public" } else { "Private" },
    )
}
